import Foundation
import SinkiConfig
import SinkiMerge
import SinkiRecord
import SinkiSupport
import SinkiTestSupport
import Testing
@testable import SinkiState

/// A replica over a real temporary folder, with a helper to write files in it.
struct Fixture {
    let directory = TemporaryDirectory("sinki-replica")
    let root: String
    let replica: Replica

    init(device: String = "here", logger: Logger = Logger(label: "test", level: .error)) throws {
        root = directory.child("Saves")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        replica = try Replica(statePath: directory.child("state.db"), roots: [RootSpec(name: "Saves", path: root)],
                              device: device, inotify: nil, logger: logger)
    }

    func write(_ relative: String, _ text: String) throws {
        let url = URL(fileURLWithPath: root + "/" + relative)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(text.utf8).write(to: url)
    }

    func read(_ relative: String) -> String? {
        (try? Data(contentsOf: URL(fileURLWithPath: root + "/" + relative))).map { String(decoding: $0, as: UTF8.self) }
    }

    func exists(_ relative: String) -> Bool { FileManager.default.fileExists(atPath: root + "/" + relative) }

    func names(_ relative: String = "") -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: root + "/" + relative)) ?? []).sorted()
    }

    /// Opens the base cache and conflicts folder with one `[merge PATTERN]` rule.
    func rules(_ pattern: String, _ rule: MergeRule) async throws {
        let rules = MergeRules(sections: [MergeSection(patterns: [try Glob(pattern)], policy: MergePolicy(rule: rule), line: 1)])
        try await replica.openMergeState(stateDirectory: directory.path, baseCacheLimit: 1 << 20, rules: rules)
        // Records are stamped with the rule's name, as the agent's config does.
        await replica.updateRules(rules, typeFor: { path in (try? RecordPath(validating: path)).map { rules.policy(for: $0).rule.rawValue } ?? "" },
                                  baseCacheLimit: 1 << 20)
    }

    /// Settles conflicts as the agent does: prepared by the replica, decided by the engine under
    /// the replica's rules (keep-both unless the test set some), carried out by the replica.
    func settle(_ conflicts: [Conflict]) async throws -> ApplyReport {
        let prepared = try await replica.prepareConflicts(conflicts)
        let engine = MergeEngine(workDirectory: directory.child("merge"), environment: [:], logger: Logger(label: "test", level: .error))
        var decided: [(PreparedConflict, MergeOutcome)] = []
        for item in prepared.ready {
            decided.append((item, await engine.resolve(path: item.path, policy: item.policy, local: item.local, remote: item.remoteVersion,
                                                       base: item.base)))
        }
        var report = try await replica.carryOut(decided).report
        report.applied = prepared.report.applied + report.applied
        return report
    }
}

/// A remote record for `path` holding `text`.
func remote(_ path: String, _ text: String, tag: Int64, mode: UInt32 = 0o640, device: String = "there") -> Record {
    let bytes = Array(text.utf8)
    return Record(path: path, data: Deflate.compress(bytes), changeTag: tag, size: Int64(bytes.count),
                  sha256: Digest.sha256Hex(bytes), mode: mode, modifiedAt: 1_700_000_000_123_456_789, device: device)
}

/// Plays the server for a push: every record is saved with the next tag.
func saveAll(_ batch: [Outgoing], from tag: inout Int64) -> [ModifyResult] {
    batch.map { outgoing in
        tag += 1
        var saved = outgoing.record.withoutData
        saved.changeTag = tag
        return ModifyResult(path: saved.path, status: .saved, record: saved)
    }
}

@Suite struct ReplicaTests {
    @Test func scanQueuesNewFilesAndARescanReadsNothing() async throws {
        let fixture = try Fixture()
        try fixture.write("a.save", "alpha")
        try fixture.write("dir/b.save", "beta")
        try FileManager.default.createDirectory(atPath: fixture.root + "/empty", withIntermediateDirectories: true)
        let first = try await fixture.replica.reconcile(root: 0, under: "")
        #expect(first.queued == 4) // a.save, dir, dir/b.save, empty
        #expect(first.hashed == 2)
        let again = try await fixture.replica.reconcile(root: 0, under: "")
        #expect(again.queued == 0)
        #expect(again.hashed == 0)
        let batch = try await fixture.replica.nextBatch(limit: 100, maxBytes: 1 << 20, excluding: [])
        #expect(batch.map(\.record.path) == ["Saves/a.save", "Saves/dir", "Saves/dir/b.save", "Saves/empty"])
        let file = try #require(batch.first)
        #expect(try Deflate.decompress(try #require(file.record.data), expectedSize: 5) == Array("alpha".utf8))
        #expect(file.record.sha256 == Digest.sha256Hex(Array("alpha".utf8)))
        #expect(batch[1].record.type == Record.directoryType)
    }

    @Test func acknowledgedPushesLeaveTheOutbox() async throws {
        let fixture = try Fixture()
        try fixture.write("a.save", "alpha")
        _ = try await fixture.replica.reconcile(root: 0, under: "")
        let batch = try await fixture.replica.nextBatch(limit: 100, maxBytes: 1 << 20, excluding: [])
        var tag: Int64 = 10
        let report = try await fixture.replica.acknowledge(batch, saveAll(batch, from: &tag))
        #expect(report.saved == 1)
        #expect(await fixture.replica.pendingCount == 0)
        #expect(try await fixture.replica.knownFile("Saves/a.save")?.tag == 11)
    }

    @Test func anEditDuringFlightStaysQueued() async throws {
        let fixture = try Fixture()
        try fixture.write("a.save", "one")
        _ = try await fixture.replica.reconcile(root: 0, under: "")
        let batch = try await fixture.replica.nextBatch(limit: 100, maxBytes: 1 << 20, excluding: [])
        try fixture.write("a.save", "two, longer")
        _ = try await fixture.replica.check(root: 0, paths: ["a.save"])
        var tag: Int64 = 0
        _ = try await fixture.replica.acknowledge(batch, saveAll(batch, from: &tag))
        #expect(await fixture.replica.pendingCount == 1)
        let next = try await fixture.replica.nextBatch(limit: 100, maxBytes: 1 << 20, excluding: [])
        #expect(next.first?.record.baseTag == 1)
        #expect(next.first?.record.size == 11)
    }

    @Test func remoteRecordsLandAtomicallyWithModeAndTime() async throws {
        let fixture = try Fixture()
        // The sender's folder records come with its file, as an agent sends them.
        let records = [Record(path: "Saves/deep", type: Record.directoryType, changeTag: 3),
                       Record(path: "Saves/deep/dir", type: Record.directoryType, changeTag: 4),
                       remote("Saves/deep/dir/new.save", "from afar", tag: 5),
                       Record(path: "Saves/emptydir", type: Record.directoryType, changeTag: 6, mode: 0o750),
                       remote("Saves/empty.txt", "", tag: 7)]
        let report = try await fixture.replica.apply(records, token: "s.7")
        #expect(report.notApplied.isEmpty)
        #expect(fixture.read("deep/dir/new.save") == "from afar")
        #expect(fixture.read("empty.txt") == "")
        let attributes = try FileManager.default.attributesOfItem(atPath: fixture.root + "/deep/dir/new.save")
        #expect((attributes[.posixPermissions] as? Int) == 0o640)
        let modified = try #require(attributes[.modificationDate] as? Date)
        #expect(abs(modified.timeIntervalSince1970 - 1_700_000_000.123) < 0.01)
        #expect(fixture.names().filter { $0.hasPrefix(".sinki-tmp") }.isEmpty)
        #expect(try await fixture.replica.feedToken(server: "") == nil)
        // What was written is known: looking at it again finds no local change (no echo).
        let check = try await fixture.replica.check(root: 0, paths: ["deep/dir/new.save", "deep", "deep/dir", "emptydir", "empty.txt"])
        #expect(check.queued == 0)
        let rescan = try await fixture.replica.reconcile(root: 0, under: "")
        #expect(rescan.queued == 0)
        #expect(await fixture.replica.pendingCount == 0)
    }

    @Test func tokensAreKeptPerServer() async throws {
        let fixture = try Fixture()
        try await fixture.replica.bindServer("http://a")
        _ = try await fixture.replica.apply([], token: "s.3")
        #expect(try await fixture.replica.feedToken(server: "http://a") == "s.3")
        try await fixture.replica.bindServer("http://b")
        #expect(try await fixture.replica.feedToken(server: "http://b") == nil)
    }

    @Test func aRemoteDeleteRemovesACleanFileAndItsEmptyDirectory() async throws {
        let fixture = try Fixture()
        _ = try await fixture.replica.apply([Record(path: "Saves/d", type: Record.directoryType, changeTag: 1),
                                             remote("Saves/d/x.save", "x", tag: 2)], token: nil)
        #expect(fixture.read("d/x.save") == "x")
        let report = try await fixture.replica.apply([Record(path: "Saves/d", deleted: true, changeTag: 4),
                                                      Record(path: "Saves/d/x.save", deleted: true, changeTag: 3)], token: nil)
        #expect(report.applied.map(\.event) == [.deleted, .deleted])
        #expect(!fixture.exists("d"))
    }

    @Test func aLocalEditAgainstARemoteEditKeepsBoth() async throws {
        let fixture = try Fixture(device: "laptop")
        _ = try await fixture.replica.apply([remote("Saves/p.save", "base", tag: 1)], token: nil)
        try fixture.write("p.save", "local edit")
        let report = try await fixture.replica.apply([remote("Saves/p.save", "remote edit", tag: 2)], token: nil)
        #expect(report.conflicts.count == 1)
        #expect(fixture.read("p.save") == "local edit") // nothing overwritten before the rule runs
        let resolved = try await fixture.settle(report.conflicts)
        #expect(resolved.applied.map(\.event) == [.conflict])
        #expect(fixture.read("p.save") == "remote edit")
        let copies = fixture.names().filter { $0.contains(".sync-conflict-") }
        #expect(copies.count == 1)
        let copy = try #require(copies.first)
        #expect(copy.hasPrefix("p.sync-conflict-") && copy.hasSuffix("-laptop.save"))
        #expect(fixture.read(copy) == "local edit")
        // The copy is a new local file to push; the path itself is settled.
        let batch = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: [])
        #expect(batch.map(\.record.path) == ["Saves/" + copy])
    }

    @Test func aLocalEditWinsOverARemoteDelete() async throws {
        let fixture = try Fixture()
        _ = try await fixture.replica.apply([remote("Saves/k.save", "v1", tag: 1)], token: nil)
        try fixture.write("k.save", "edited here")
        let report = try await fixture.replica.apply([Record(path: "Saves/k.save", deleted: true, changeTag: 2)], token: nil)
        _ = try await fixture.settle(report.conflicts)
        #expect(fixture.read("k.save") == "edited here")
        let batch = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: [])
        #expect(batch.first?.record.baseTag == 2)
        #expect(batch.first?.record.deleted == false)
    }

    /// `k.save` synced as "v1", deleted here, and a remote "v2" (tag 2) taken over the delete.
    private func loseADeleteToARemoteEdit(_ fixture: Fixture) async throws {
        try fixture.write("keeper.txt", "keeps the root from looking emptied")
        _ = try await fixture.replica.apply([remote("Saves/k.save", "v1", tag: 1)], token: nil)
        try FileManager.default.removeItem(atPath: fixture.root + "/k.save")
        let report = try await fixture.replica.apply([remote("Saves/k.save", "v2", tag: 2)], token: nil)
        _ = try await fixture.settle(report.conflicts)
    }

    /// The next push sends `k.save`'s "v2" once more based on `base`; acknowledged, nothing is pending.
    private func expectSentAgain(_ fixture: Fixture, basedOn base: Int64, _ comment: Comment? = nil) async throws {
        let batch = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: [])
        let again = try #require(batch.first { $0.record.path == "Saves/k.save" }, comment)
        #expect(again.record.baseTag == base && !again.record.deleted && again.record.sha256 == Digest.sha256Hex(Array("v2".utf8)))
        var tag = base
        _ = try await fixture.replica.acknowledge(batch, saveAll(batch, from: &tag))
        #expect(await fixture.replica.pendingCount == 0)
    }

    @Test func aLocalDeleteLosesToARemoteEdit() async throws {
        let fixture = try Fixture()
        try await loseADeleteToARemoteEdit(fixture)
        #expect(fixture.read("k.save") == "v2")
        // The delete lost: the version taken goes once more as a new one, for devices that may have
        // moved it away following a rename whose old path this delete was.
        try await expectSentAgain(fixture, basedOn: 2)
    }

    /// The fault suite's seed 3001: this agent's delete lost to a version it took and queued to send
    /// again; before it went, another device sent the same content again (its own lost delete). That
    /// version is older at the server than a rename that made devices move the path away, so adopting
    /// it must not drop this agent's resend, or those devices lack the file for good.
    @Test func aVersionQueuedToGoAgainStillGoesWhenAnotherDeviceSendsTheSameContent() async throws {
        let fixture = try Fixture()
        try await loseADeleteToARemoteEdit(fixture)
        let same = try await fixture.replica.apply([remote("Saves/k.save", "v2", tag: 5)], token: nil)
        #expect(same.conflicts.isEmpty && same.notApplied.isEmpty && fixture.read("k.save") == "v2")
        try await expectSentAgain(fixture, basedOn: 5, "the version still goes once more")
    }

    /// The fault suite's seed 4019: a new file whose bytes equal a file that just vanished here is sent
    /// as a rename of it (the server copies what it holds). When the server says another device deleted
    /// that source meanwhile, the delete follows a real rename (same inode and mtime), but a new file
    /// that only has the same bytes is the user's and must go as a new file, not be deleted.
    @Test func aDeleteElsewhereFollowsARenameButNotANewFileWithTheSameBytes() async throws {
        let fixture = try Fixture()
        try fixture.write("keeper.txt", "keeps the root from looking emptied")
        // The pairing below is by time; a loaded machine must not make it a race.
        await fixture.replica.setMoveWindow(nanoseconds: 600_000_000_000)
        _ = try await fixture.replica.apply([remote("Saves/old.txt", "hi", tag: 1), remote("Saves/moved.txt", "yo", tag: 2)], token: nil)
        // A new file with the bytes of one removed, and a file renamed (no cookie pair: found by content).
        try FileManager.default.removeItem(atPath: fixture.root + "/old.txt")
        _ = try await fixture.replica.check(root: 0, paths: ["old.txt"])
        try fixture.write("new.txt", "hi")
        try FileManager.default.moveItem(atPath: fixture.root + "/moved.txt", toPath: fixture.root + "/renamed.txt")
        _ = try await fixture.replica.check(root: 0, paths: ["new.txt", "moved.txt", "renamed.txt"])
        let batch = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: [])
        let sent = Dictionary(uniqueKeysWithValues: batch.map { ($0.record.path, $0.record) })
        #expect(sent["Saves/new.txt"]?.movedFrom == "Saves/old.txt" && sent["Saves/renamed.txt"]?.movedFrom == "Saves/moved.txt",
                "both go as renames, to spare the bytes")
        // The server: both sources were deleted by another device meanwhile.
        let gone = Problem(.moveSourceGone, detail: "deleted")
        let results = batch.map { outgoing in
            outgoing.record.movedFrom != nil ? ModifyResult(path: outgoing.record.path, status: .refused, problem: gone)
                                             : ModifyResult(path: outgoing.record.path, status: .saved, record: outgoing.record.withoutData)
        }
        let report = try await fixture.replica.acknowledge(batch, results)
        #expect(Set(report.movesWithoutSource.map(\.path)) == ["Saves/new.txt", "Saves/renamed.txt"])
        let deletedNew = try await fixture.replica.settleMoveWithoutSource(
            path: "Saves/new.txt", source: Record(path: "Saves/old.txt", deleted: true, changeTag: 3, device: "there"))
        let deletedRenamed = try await fixture.replica.settleMoveWithoutSource(
            path: "Saves/renamed.txt", source: Record(path: "Saves/moved.txt", deleted: true, changeTag: 4, device: "there"))
        #expect(!deletedNew && fixture.read("new.txt") == "hi", "a new file is never deleted for another one's delete")
        #expect(deletedRenamed && !fixture.exists("renamed.txt"), "the delete follows the file that was renamed")
        let next = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: [])
        let again = try #require(next.first { $0.record.path == "Saves/new.txt" }, "the new file goes with its bytes")
        #expect(again.record.movedFrom == nil && again.record.data != nil && !again.record.deleted)
    }

    /// The fault suite's seed 904: this agent removed (renamed away) a synced folder, and before its
    /// tombstone went a remote file landed in it, so the apply made the folder again. Devices that
    /// followed the rename moved the folder away and wait for that tombstone, which now never comes:
    /// the folder must go to the server once more as a new version, or they lack it for good.
    @Test func aFolderMadeAgainOverAQueuedTombstoneIsSentAgain() async throws {
        let fixture = try Fixture()
        try fixture.write("keeper.txt", "keeps the root from looking emptied")
        _ = try await fixture.replica.apply([Record(path: "Saves/x", type: Record.directoryType, changeTag: 1),
                                             Record(path: "Saves/x/d", type: Record.directoryType, changeTag: 2)], token: nil)
        try FileManager.default.removeItem(atPath: fixture.root + "/x/d")
        _ = try await fixture.replica.check(root: 0, paths: ["x/d"])
        #expect(await fixture.replica.pendingCount == 1, "the folder's tombstone is queued")
        let report = try await fixture.replica.apply([remote("Saves/x/d/f.save", "made before the rename was heard of", tag: 3)], token: nil)
        #expect(report.notApplied.isEmpty && fixture.read("x/d/f.save") != nil, "the file wins over the delete of its folder")
        let batch = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: [])
        let again = try #require(batch.first { $0.record.path == "Saves/x/d" }, "the folder made again goes once more")
        #expect(!again.record.deleted && again.record.type == Record.directoryType && again.record.baseTag == 2)
        var tag: Int64 = 3
        _ = try await fixture.replica.acknowledge(batch, saveAll(batch, from: &tag))
        #expect(await fixture.replica.pendingCount == 0)
    }

    /// The server stores inline content as given: a record declaring far more than its data could
    /// inflate to (or more than any inline limit) is refused without taking that memory.
    @Test(arguments: [Int64(1) << 30, Int64(65 << 20)])
    func anInlineRecordDeclaringAHugeSizeIsNeverInflated(size: Int64) async throws {
        let fixture = try Fixture()
        var record = remote("Saves/bomb.bin", "tiny", tag: 1)
        record.size = size
        let report = try await fixture.replica.apply([record], token: nil)
        #expect(report.notApplied == ["Saves/bomb.bin"])
        let kept = try #require(try await fixture.replica.statusFacts(limit: 10).notApplied.first)
        #expect(kept.failure.cause == .invalid && kept.failure.message.contains("never inflated"))
        #expect(!fixture.exists("bomb.bin"))
    }

    @Test func aMergeResultIsWrittenAndQueuedBasedOnTheRemoteVersion() async throws {
        let fixture = try Fixture()
        try await fixture.rules("*.txt", .union)
        _ = try await fixture.replica.apply([remote("Saves/list.txt", "milk\neggs\n", tag: 1)], token: nil)
        #expect(await fixture.replica.baseCacheUse.count == 1, "the shared version is kept as the base")
        try fixture.write("list.txt", "milk\nbread\neggs\n")
        let report = try await fixture.replica.apply([remote("Saves/list.txt", "milk\neggs\njam\n", tag: 2)], token: nil)
        let settled = try await fixture.settle(report.conflicts)
        #expect(settled.applied.map(\.event) == [.merged])
        #expect(fixture.read("list.txt") == "milk\nbread\neggs\njam\n")
        let batch = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: [])
        #expect(batch.map(\.record.baseTag) == [2])
        #expect(batch.first?.record.type == "union")
        #expect(try batch.first.map { try Deflate.decompress($0.record.data ?? [], expectedSize: Int($0.record.size)) } == Array("milk\nbread\neggs\njam\n".utf8))
    }

    @Test func askKeepsBothVersionsAsideHoldsTheEditAndResolveSettlesIt() async throws {
        let fixture = try Fixture(device: "laptop")
        try await fixture.rules("*.db", .ask)
        _ = try await fixture.replica.apply([remote("Saves/s.db", "base", tag: 1)], token: nil)
        try fixture.write("s.db", "local edit")
        let report = try await fixture.replica.apply([remote("Saves/s.db", "remote edit", tag: 2, device: "desk")], token: nil)
        let settled = try await fixture.settle(report.conflicts)
        #expect(settled.applied.map(\.event) == [.conflict])
        #expect(fixture.read("s.db") == "local edit", "nothing is overwritten")
        let waiting = try await fixture.replica.waitingConflicts()
        #expect(waiting.held == 1)
        let conflict = try #require(waiting.conflicts.first)
        #expect(conflict.remote.copy.flatMap(readFile) == "remote edit" && conflict.local.copy.flatMap(readFile) == "local edit")
        #expect(conflict.local.copy?.hasSuffix("-laptop.db") == true && conflict.remote.copy?.hasSuffix("-desk.db") == true)
        #expect(try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: []).isEmpty, "the edit waits for resolve")
        #expect(try await fixture.replica.resolveWaiting("Saves/other.db", keep: .local) == nil)
        let resolved = try #require(try await fixture.replica.resolveWaiting("Saves/s.db", keep: .remote))
        #expect(resolved.report.applied.map(\.event) == [.changed])
        #expect(fixture.read("s.db") == "remote edit")
        #expect(await fixture.replica.pendingCount == 0)
        #expect(try await fixture.replica.waitingConflicts().conflicts.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: conflict.remote.copy ?? "/"))
    }

    @Test func sameContentOnBothSidesIsAdoptedWithoutAConflict() async throws {
        let fixture = try Fixture()
        try fixture.write("same.save", "identical")
        _ = try await fixture.replica.reconcile(root: 0, under: "")
        let report = try await fixture.replica.apply([remote("Saves/same.save", "identical", tag: 9)], token: nil)
        #expect(report.conflicts.isEmpty)
        #expect(await fixture.replica.pendingCount == 0)
        #expect(try await fixture.replica.knownFile("Saves/same.save")?.tag == 9)
    }

    @Test(arguments: ["../x", "/etc/x", "Saves/../../x", "Saves/a/../../x", "Saves/./x", "Saves\\x", "Saves/a\u{0}b"])
    func hostilePathsAreRefusedAndNothingIsWritten(_ path: String) async throws {
        let fixture = try Fixture()
        var record = remote(path, "pwned", tag: 1)
        record.path = path
        let report = try await fixture.replica.apply([record, remote("Saves/fine.save", "ok", tag: 2)], token: nil)
        #expect(report.notApplied == [path])
        #expect(fixture.read("fine.save") == "ok") // the rest of the batch goes on
        let outside = try FileManager.default.contentsOfDirectory(atPath: fixture.directory.path).sorted()
        #expect(!outside.contains("x"))
    }

    @Test func aSymlinkedDirectoryPointingOutsideIsNeverWrittenThrough() async throws {
        let fixture = try Fixture()
        let elsewhere = fixture.directory.child("elsewhere")
        try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: fixture.root + "/link", withDestinationPath: elsewhere)
        let report = try await fixture.replica.apply([remote("Saves/link/x", "pwned", tag: 1),
                                                      remote("Saves/link/deeper/y", "pwned", tag: 2)], token: nil)
        #expect(Set(report.notApplied) == ["Saves/link/x", "Saves/link/deeper/y"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere).isEmpty)
    }

    @Test func contentThatDoesNotMatchItsHashIsNeverApplied() async throws {
        let fixture = try Fixture()
        var record = remote("Saves/lie.save", "real", tag: 1)
        record.sha256 = Digest.sha256Hex(Array("other".utf8))
        let report = try await fixture.replica.apply([record], token: nil)
        #expect(report.notApplied == ["Saves/lie.save"])
        #expect(!fixture.exists("lie.save"))
        var bomb = remote("Saves/bomb", String(repeating: "a", count: 10_000), tag: 2)
        bomb.size = 10
        let second = try await fixture.replica.apply([bomb], token: nil)
        #expect(second.notApplied == ["Saves/bomb"])
    }

    @Test func echoesOfOwnPushesAreSkipped() async throws {
        let fixture = try Fixture()
        try fixture.write("mine.save", "mine")
        _ = try await fixture.replica.reconcile(root: 0, under: "")
        let batch = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: [])
        var tag: Int64 = 0
        let results = saveAll(batch, from: &tag)
        _ = try await fixture.replica.acknowledge(batch, results)
        var echo = try #require(results.first?.record)
        echo.data = nil
        let missing = try await fixture.replica.missingContent([echo])
        #expect(missing.isEmpty)
        let report = try await fixture.replica.apply([echo], token: "t")
        #expect(report.applied.isEmpty && report.conflicts.isEmpty && report.needContent.isEmpty)
    }

    @Test func deletesBecomeTombstonesDeepestFirst() async throws {
        let fixture = try Fixture()
        try fixture.write("keeper.txt", "keeps the root from looking emptied")
        try fixture.write("d/e/f.save", "f")
        _ = try await fixture.replica.reconcile(root: 0, under: "")
        var tag: Int64 = 0
        let batch = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: [])
        _ = try await fixture.replica.acknowledge(batch, saveAll(batch, from: &tag))
        tag = 10
        try FileManager.default.removeItem(atPath: fixture.root + "/d")
        _ = try await fixture.replica.check(root: 0, paths: ["d"])
        // A directory's tombstone leaves only after those of its contents are accepted.
        var sent: [String] = []
        for _ in 0..<3 {
            let deletes = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: [])
            #expect(deletes.count == 1)
            #expect(deletes.allSatisfy { $0.record.deleted && $0.record.baseTag > 0 && $0.record.baseTag < 10 })
            sent += deletes.map(\.record.path)
            _ = try await fixture.replica.acknowledge(deletes, saveAll(deletes, from: &tag))
        }
        #expect(sent == ["Saves/d/e/f.save", "Saves/d/e", "Saves/d"])
        #expect(await fixture.replica.pendingCount == 0)
    }

    @Test func aSaveWhoseAnswerWasLostIsTheNewBaseNotAConflict() async throws {
        let fixture = try Fixture()
        try fixture.write("a.save", "v1")
        _ = try await fixture.replica.reconcile(root: 0, under: "")
        _ = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: []) // sent; the answer is lost
        try fixture.write("a.save", "v2, edited after")
        _ = try await fixture.replica.check(root: 0, paths: ["a.save"])
        // The feed brings the save back, without content (it is this device's own).
        var echo = remote("Saves/a.save", "v1", tag: 5, device: "here")
        echo.data = nil
        let report = try await fixture.replica.apply([echo], token: nil)
        #expect(report.conflicts.isEmpty && report.needContent.isEmpty)
        #expect(fixture.read("a.save") == "v2, edited after")
        let next = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: [])
        #expect(next.map(\.record.baseTag) == [5])
        #expect(next.first?.record.sha256 == Digest.sha256Hex(Array("v2, edited after".utf8)))
    }

    @Test func aFileDeletedWhileItsFirstSaveIsInFlightIsDeletedRemotelyToo() async throws {
        let fixture = try Fixture()
        try fixture.write("keeper.txt", "keeps the root from looking emptied")
        try fixture.write("tmp.save", "short-lived")
        _ = try await fixture.replica.reconcile(root: 0, under: "")
        let batch = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: [])
        try FileManager.default.removeItem(atPath: fixture.root + "/tmp.save")
        _ = try await fixture.replica.check(root: 0, paths: ["tmp.save"])
        var tag: Int64 = 0
        _ = try await fixture.replica.acknowledge(batch, saveAll(batch, from: &tag))
        let next = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: [])
        #expect(next.map(\.record.deleted) == [true])
        #expect(next.first?.record.path == "Saves/tmp.save")
        #expect(next.first?.record.baseTag == batch.firstIndex { $0.record.path == "Saves/tmp.save" }.map { Int64($0) + 1 })
    }

    @Test func aFileDeletedAfterAnUnansweredSaveIsNotBroughtBack() async throws {
        let fixture = try Fixture()
        try fixture.write("keeper.txt", "keeps the root from looking emptied")
        try fixture.write("gone.save", "v1")
        _ = try await fixture.replica.reconcile(root: 0, under: "")
        _ = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: []) // killed before the answer
        try FileManager.default.removeItem(atPath: fixture.root + "/gone.save")
        _ = try await fixture.replica.check(root: 0, paths: ["gone.save"])
        var echo = remote("Saves/gone.save", "v1", tag: 3, device: "here")
        echo.data = nil
        #expect(try await fixture.replica.missingContent([echo]).isEmpty) // ours: nothing to fetch
        let report = try await fixture.replica.apply([echo], token: nil)
        #expect(report.conflicts.isEmpty && report.needContent.isEmpty)
        #expect(!fixture.exists("gone.save"))
        let next = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: []).filter { $0.record.path == "Saves/gone.save" }
        #expect(next.map(\.record.deleted) == [true])
        #expect(next.first?.record.baseTag == 3)
    }

    @Test func aRootEmptiedWhileItsFilesAreSyncedIsASafetyStop() async throws {
        let fixture = try Fixture()
        let names = (1...5).map { "save\($0).save" }
        for name in names { try fixture.write(name, "file \(name)") }
        _ = try await fixture.replica.reconcile(root: 0, under: "")
        let batch = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: [])
        var tag: Int64 = 0
        _ = try await fixture.replica.acknowledge(batch, saveAll(batch, from: &tag))
        for name in names { try FileManager.default.removeItem(atPath: fixture.root + "/" + name) }
        let checked = try await fixture.replica.check(root: 0, paths: names)
        #expect(checked.safetyStop == "the root folder became empty")
        let walked = try await fixture.replica.reconcile(root: 0, under: "")
        #expect(walked.safetyStop?.hasPrefix("the root folder is empty") == true)
        #expect(try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: []).isEmpty)
        // The user confirms: the delete is recorded and sent.
        try await fixture.replica.confirmSafetyStop(root: 0)
        _ = try await fixture.replica.reconcile(root: 0, under: "")
        let deletes = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: [])
        #expect(deletes.map(\.record.deleted) == Array(repeating: true, count: 5))
    }

    @Test func theLastFewFilesDeletedByHandAreDeletes() async throws {
        let fixture = try Fixture()
        try fixture.write("only.save", "the one file")
        _ = try await fixture.replica.reconcile(root: 0, under: "")
        let batch = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: [])
        var tag: Int64 = 0
        _ = try await fixture.replica.acknowledge(batch, saveAll(batch, from: &tag))
        try FileManager.default.removeItem(atPath: fixture.root + "/only.save")
        let checked = try await fixture.replica.check(root: 0, paths: ["only.save"])
        #expect(checked.safetyStop == nil)
        let deletes = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: [])
        #expect(deletes.map(\.record.deleted) == [true])
    }

    @Test func aFileWrittenByAnApplyKilledBeforeItsCommitIsNotALocalEdit() async throws {
        let fixture = try Fixture()
        try fixture.write("keeper.txt", "keeps the root from looking emptied")
        _ = try await fixture.replica.reconcile(root: 0, under: "")
        let record = remote("Saves/arrived.save", "from the server", tag: 7)
        // What a kill between the rename and the commit leaves: the journal entry and the file.
        try await fixture.replica.journal([record])
        try fixture.write("arrived.save", "from the server")
        let restarted = try Replica(statePath: fixture.directory.child("state.db"), roots: [RootSpec(name: "Saves", path: fixture.root)],
                                    device: "here", inotify: nil, logger: Logger(label: "test", level: .error))
        try await restarted.recoverInterruptedApply()
        _ = try await restarted.reconcile(root: 0, under: "")
        #expect(try await restarted.knownFile("Saves/arrived.save")?.tag == 7)
        #expect(try await restarted.outboxEntry("Saves/arrived.save") == nil)
        // Its delete then applies cleanly instead of being fought as an edit.
        let report = try await restarted.apply([Record(path: "Saves/arrived.save", deleted: true, changeTag: 8)], token: nil)
        #expect(report.conflicts.isEmpty)
        #expect(!fixture.exists("arrived.save"))
    }
}

/// Pushes after renames and deletes: old paths wait for their new ones without emptying a batch,
/// and what reappears at a deleted path bases on its tombstone.
@Suite struct PushOrderTests {
    /// `level/f1` … `level/f30`, pushed and acknowledged.
    func syncedLevel(_ fixture: Fixture, tag: inout Int64) async throws {
        try fixture.write("keeper.txt", "keeps the root from looking emptied")
        for index in 1...30 { try fixture.write("level/f\(index)", "file \(index)") }
        _ = try await fixture.replica.reconcile(root: 0, under: "")
        while case let batch = try await fixture.replica.nextBatch(limit: 100, maxBytes: 1 << 20, excluding: []), !batch.isEmpty {
            _ = try await fixture.replica.acknowledge(batch, saveAll(batch, from: &tag))
        }
    }

    @Test func tombstonesHeldBehindTheirRenamesNeverEmptyABatch() async throws {
        let fixture = try Fixture()
        var tag: Int64 = 0
        try await syncedLevel(fixture, tag: &tag)
        // The pairing below is by time; a loaded machine must not make it a race.
        await fixture.replica.setMoveWindow(nanoseconds: 600_000_000_000)
        try FileManager.default.moveItem(atPath: fixture.root + "/level", toPath: fixture.root + "/renamed")
        // Seen without inotify's cookie pair: the old paths go first (queued earlier), the new ones
        // are matched to them by content. Every old path is held until its new one is accepted.
        _ = try await fixture.replica.check(root: 0, paths: ["level"])
        _ = try await fixture.replica.check(root: 0, paths: ["renamed"])
        var accepted = Set<String>()
        var rounds = 0
        while case let batch = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: []), !batch.isEmpty {
            rounds += 1
            for outgoing in batch where outgoing.record.deleted && outgoing.record.path.hasPrefix("Saves/level/") {
                let target = "Saves/renamed/" + outgoing.record.path.dropFirst("Saves/level/".count)
                #expect(accepted.contains(target), "\(outgoing.record.path) left before \(target) was accepted")
            }
            // The first ten in push order are all held: the batch holds the new paths instead.
            if rounds == 1 { #expect(batch.count == 10 && !batch.contains { $0.record.deleted }) }
            _ = try await fixture.replica.acknowledge(batch, saveAll(batch, from: &tag))
            accepted.formUnion(batch.map(\.record.path))
        }
        #expect(await fixture.replica.pendingCount == 0)
        #expect(accepted.count == 62) // 31 new paths (the folder and its files), 31 tombstones
        #expect(rounds <= 8)
    }

    @Test func aFolderWalkedWhereASyncedFileWasDeletedBasesOnItsTombstone() async throws {
        let fixture = try Fixture()
        var tag: Int64 = 0
        try await syncedLevel(fixture, tag: &tag)
        try FileManager.default.removeItem(atPath: fixture.root + "/level/f1")
        _ = try await fixture.replica.check(root: 0, paths: ["level/f1"])
        let delete = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: [])
        _ = try await fixture.replica.acknowledge(delete, saveAll(delete, from: &tag))
        // `rm f1; mkdir f1; echo x > f1/inner`: the watcher walks the new folder.
        try fixture.write("level/f1/inner", "x")
        _ = try await fixture.replica.check(root: 0, paths: ["level/f1"])
        let batch = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: [])
        #expect(batch.map(\.record.path) == ["Saves/level/f1", "Saves/level/f1/inner"])
        #expect(batch.first?.record.type == Record.directoryType)
        #expect(batch.first?.record.baseTag == tag, "based on the tombstone the server holds")
    }

    @Test func aFileWhereAFolderWasWaitsForTheDeletesOfWhatWasInIt() async throws {
        let fixture = try Fixture()
        var tag: Int64 = 0
        try await syncedLevel(fixture, tag: &tag)
        // `rm -r level; echo x > level`, seen as one event on `level`.
        try FileManager.default.removeItem(atPath: fixture.root + "/level")
        try fixture.write("level", "a file now")
        _ = try await fixture.replica.check(root: 0, paths: ["level"])
        var accepted = Set<String>()
        while case let batch = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: []), !batch.isEmpty {
            if let file = batch.first(where: { $0.record.path == "Saves/level" }) {
                #expect(!file.record.deleted && file.record.type != Record.directoryType)
                #expect(accepted.count == 30, "the file left after \(accepted.count) of the 30 deletes below it")
            }
            #expect(batch.allSatisfy { $0.record.path == "Saves/level" || $0.record.deleted })
            _ = try await fixture.replica.acknowledge(batch, saveAll(batch, from: &tag))
            accepted.formUnion(batch.map(\.record.path))
        }
        #expect(accepted.count == 31)
        #expect(await fixture.replica.pendingCount == 0)
    }

    @Test func nothingGoesBelowAFolderWhoseNewVersionIsInFlight() async throws {
        let fixture = try Fixture()
        var tag: Int64 = 0
        try await syncedLevel(fixture, tag: &tag)
        try fixture.write("f", "a plain file")
        _ = try await fixture.replica.check(root: 0, paths: ["f"])
        let file = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: [])
        _ = try await fixture.replica.acknowledge(file, saveAll(file, from: &tag))
        // `rm f; mkdir f; echo x > f/inner`: the folder goes first, alone in its batch here.
        try FileManager.default.removeItem(atPath: fixture.root + "/f")
        try fixture.write("f/inner", "x")
        _ = try await fixture.replica.check(root: 0, paths: ["f"])
        let folder = try await fixture.replica.nextBatch(limit: 1, maxBytes: 1 << 20, excluding: [])
        #expect(folder.map(\.record.path) == ["Saves/f"])
        // While it travels, what is in it waits: the two batches may be committed in either order.
        #expect(try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: ["Saves/f"]).isEmpty)
        _ = try await fixture.replica.acknowledge(folder, saveAll(folder, from: &tag))
        let inner = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: [])
        #expect(inner.map(\.record.path) == ["Saves/f/inner"])
    }

    @Test func anEmptyBatchWhileTombstonesWaitBehindARefusalSaysSo() async throws {
        let logger = Logger(label: "test", level: .error)
        let fixture = try Fixture(logger: logger)
        var tag: Int64 = 0
        try await syncedLevel(fixture, tag: &tag)
        try FileManager.default.moveItem(atPath: fixture.root + "/keeper.txt", toPath: fixture.root + "/moved.txt")
        _ = try await fixture.replica.move(root: 0, from: "keeper.txt", to: "moved.txt", isDirectory: false)
        let batch = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: [])
        #expect(batch.map(\.record.movedFrom) == ["Saves/keeper.txt"])
        // Refused: the old path's tombstone cannot go until `sinkid retry` sends the new one.
        _ = try await fixture.replica.acknowledge(batch, [ModifyResult(path: "Saves/moved.txt", status: .refused,
                                                                       problem: Problem(.badRequest, detail: "no"))])
        #expect(try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: []).isEmpty)
        let said = try #require(logger.lastProblem)
        #expect(said.message.contains("1 local change(s) wait for others that cannot be sent now (\"Saves/keeper.txt\" waits for \"Saves/moved.txt\")"))
        // Said once, not at every pump.
        #expect(try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: []).isEmpty)
        #expect(logger.lastProblem == said)
    }
}

/// A folder renamed on the other side is renamed here whole when all in it is synced and unchanged;
/// a file written here meanwhile stays where its writer put it, and the rest moves file by file.
@Suite struct RemoteRenameTests {
    /// `work/keep.txt` (and `work/sub/deep.txt`), pushed and acknowledged; returns the last tag.
    func syncedWork(_ fixture: Fixture) async throws -> Int64 {
        try fixture.write("keeper.txt", "keeps the root from looking emptied")
        try fixture.write("shelf/keep.txt", "kept")
        try fixture.write("shelf/sub/deep.txt", "deep")
        _ = try await fixture.replica.reconcile(root: 0, under: "")
        var tag: Int64 = 0
        let batch = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: [])
        _ = try await fixture.replica.acknowledge(batch, saveAll(batch, from: &tag))
        return tag
    }

    /// The other side's records for renaming `work` to `renamed`.
    func renameRecords(after tag: Int64) -> [Record] {
        let folder = Record(path: "Saves/renamed", type: Record.directoryType, changeTag: tag + 1, mode: 0o755, movedFrom: "Saves/shelf")
        let sub = Record(path: "Saves/renamed/sub", type: Record.directoryType, changeTag: tag + 2, mode: 0o755, movedFrom: "Saves/shelf/sub")
        var keep = remote("Saves/renamed/keep.txt", "kept", tag: tag + 3)
        keep.movedFrom = "Saves/shelf/keep.txt"
        var deep = remote("Saves/renamed/sub/deep.txt", "deep", tag: tag + 4)
        deep.movedFrom = "Saves/shelf/sub/deep.txt"
        return [folder, sub, keep, deep]
    }

    @Test func aSyncedFolderIsRenamedWhole() async throws {
        let fixture = try Fixture()
        let tag = try await syncedWork(fixture)
        let inode = try #require(try await fixture.replica.knownFile("Saves/shelf/keep.txt")?.inode)
        let report = try await fixture.replica.apply(renameRecords(after: tag), token: nil)
        #expect(report.notApplied.isEmpty)
        #expect(fixture.read("renamed/keep.txt") == "kept" && fixture.read("renamed/sub/deep.txt") == "deep")
        #expect(!fixture.exists("shelf"))
        #expect(try await fixture.replica.knownFile("Saves/renamed/keep.txt")?.inode == inode)
        #expect(try await fixture.replica.knownFile("Saves/renamed/keep.txt")?.tag == tag + 3)
        #expect(report.toCheck.contains { $0.root.index == 0 && $0.relative == "renamed" })
    }

    /// Fault suite seed 606: one batch renames `work/keep.txt` away and also keeps a version at
    /// `work/keep.txt` (its sender's delete there lost and the version went again). Renaming the file
    /// and adopting that version at the old path would record the old path as present with nothing there.
    @Test func aRenameSourceTheSameBatchKeepsLiveIsCopiedNotRenamedAway() async throws {
        let fixture = try Fixture()
        let tag = try await syncedWork(fixture)
        var renamed = remote("Saves/moved.txt", "kept", tag: tag + 1)
        renamed.movedFrom = "Saves/shelf/keep.txt"
        let again = remote("Saves/shelf/keep.txt", "kept", tag: tag + 2)
        let report = try await fixture.replica.apply([renamed, again], token: nil)
        #expect(report.notApplied.isEmpty)
        #expect(fixture.read("moved.txt") == "kept")
        #expect(fixture.read("shelf/keep.txt") == "kept")
        let row = try #require(try await fixture.replica.knownFile("Saves/shelf/keep.txt"))
        #expect(row.present && row.tag == tag + 2)
    }

    @Test func aFileWrittenHereBeforeTheRenameArrivesStaysWhereItWasWritten() async throws {
        let fixture = try Fixture()
        let tag = try await syncedWork(fixture)
        // Written here just before the rename arrives, not looked at yet.
        try fixture.write("shelf/new.txt", "not seen yet")
        let report = try await fixture.replica.apply(renameRecords(after: tag), token: nil)
        #expect(report.notApplied.isEmpty)
        // The synced files moved one by one (no byte written again); the new one is where it was put.
        #expect(fixture.read("renamed/keep.txt") == "kept" && fixture.read("renamed/sub/deep.txt") == "deep")
        #expect(fixture.read("shelf/new.txt") == "not seen yet")
        #expect(try await fixture.replica.knownFile("Saves/renamed/keep.txt")?.tag == tag + 3)
    }
}

/// A file another descriptor still writes is not read, whatever the quiet delay says.
@Suite struct BusyFileTests {
    @Test func aFileOpenForWritingIsBusyUntilClosed() throws {
        let directory = TemporaryDirectory("sinki-busy")
        let root = try SafeRoot(path: directory.path)
        let fd = open(directory.child("growing.bin"), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        #expect(fd >= 0)
        #expect(write(fd, "half", 4) == 4)
        let during = try ContentReader.read(root, "growing.bin", keepBytes: true)
        #expect(during.busy && during.unstable && during.bytes == nil)
        close(fd)
        let after = try ContentReader.read(root, "growing.bin", keepBytes: true)
        #expect(!after.busy && !after.unstable)
        #expect(after.bytes == Array("half".utf8))
    }

    @Test func aFileOnlyReadElsewhereIsNotBusy() throws {
        let directory = TemporaryDirectory("sinki-busy-read")
        try Data("done".utf8).write(to: URL(fileURLWithPath: directory.child("done.bin")))
        let fd = open(directory.child("done.bin"), O_RDONLY | O_CLOEXEC)
        defer { close(fd) }
        let content = try ContentReader.read(try SafeRoot(path: directory.path), "done.bin", keepBytes: false)
        #expect(!content.busy)
        #expect(content.sha256 == Digest.sha256Hex(Array("done".utf8)))
    }
}
