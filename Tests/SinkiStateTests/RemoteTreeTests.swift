import Foundation
import SinkiRecord
import SinkiSupport
import SinkiTestSupport
import Testing
@testable import SinkiState

/// The Remote tree (issue 21): the server's records as read, with folder digests kept in the same
/// transactions, that equal digests computed afresh from its rows whatever order the records came in;
/// rows that only move forward; repairs that set it to the server's word; and the look for versions
/// read but never held here.
@Suite struct RemoteTreeTests {
    /// Digests of every folder computed from scratch over `records` (the latest live ones).
    static func recomputed(_ entries: [RemoteEntry]) -> [String: (digest: TreeDigest, direct: TreeDigest)] {
        var out: [String: (digest: TreeDigest, direct: TreeDigest)] = [:]
        for entry in entries where !entry.deleted {
            let value = TreeDigest.entry(path: entry.path, contentID: entry.contentID)
            let folders = FolderDeltas.folders(of: entry.path)
            for (index, folder) in folders.enumerated() {
                var current = out[folder] ?? (.empty, .empty)
                current.digest ^= value
                if index == folders.count - 1 { current.direct ^= value }
                out[folder] = current
            }
        }
        return out
    }

    static func shuffled<T>(_ items: [T], _ random: inout SeededRandom) -> [T] {
        var out = items
        for index in out.indices.reversed() where index > 0 { out.swapAt(index, random.below(index + 1)) }
        return out
    }

    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
    func digestsEqualThoseComputedAfreshAfterRandomRecords(seed: UInt64) throws {
        let directory = TemporaryDirectory("sinki-remote-tree")
        let store = try StateStore(path: directory.child("state.db"))
        var random = SeededRandom(seed: seed)
        var latest: [String: RemoteEntry] = [:]
        var tag: Int64 = 0
        let paths = (0..<40).map { index in "R/" + ["a", "b", "a/c", "a/c/d"][index % 4] + "/f\(index)" }
        for _ in 0..<30 {
            var page: [Record] = []
            for _ in 0..<random.int(in: 1...12) {
                tag += 1
                let path = paths[random.below(paths.count)]
                let deleted = random.chance(0.3)
                page.append(Record(path: path, deleted: deleted, changeTag: tag, size: deleted ? 0 : 3,
                                   sha256: deleted ? "" : "h\(random.below(5))"))
            }
            // A page read late (an acknowledgement came first): older versions change nothing.
            let stale = page.map { var old = $0; old.changeTag -= 1000; old.sha256 = "stale"; return old }
            try store.observeRemote(Self.shuffled(page, &random) + stale)
            for record in page where (latest[record.path]?.changeTag ?? 0) < record.changeTag { latest[record.path] = RemoteEntry(record) }
            let expected = Self.recomputed(Array(latest.values))
            for folder in ["R", "R/a", "R/b", "R/a/c", "R/a/c/d"] {
                let stored = try store.remoteFolder(folder) ?? RemoteFolder(path: folder)
                #expect(stored.digest == (expected[folder]?.digest ?? .empty), "seed \(seed): digest of \(folder)")
                #expect(stored.direct == (expected[folder]?.direct ?? .empty), "seed \(seed): direct digest of \(folder)")
            }
            #expect(try store.remoteFolder("R")?.head == tag)
        }
        #expect(try store.remoteChildren(of: "R").map(\.path) == ["R/a", "R/b"])
        #expect(try store.remoteChildren(of: "R/a").map(\.path) == ["R/a/c"])
        let direct = try store.remoteEntries(directlyIn: "R/a").map(\.path)
        #expect(direct == direct.sorted() && direct.allSatisfy { FolderDeltas.folders(of: $0).last == "R/a" })
    }

    @Test func aRepairSetsTheFolderToTheServersRecordsAndSaysWhatDiffered() async throws {
        let fixture = try Fixture()
        _ = try await fixture.replica.apply([remote("Saves/kept.txt", "same", tag: 1), remote("Saves/gone.txt", "lost on the server", tag: 2),
                                             remote("Saves/old.txt", "old", tag: 3)], token: "s.5")
        #expect(fixture.read("gone.txt") == "lost on the server")
        let before = try await fixture.replica.remoteFolder("Saves")
        // The server holds kept.txt as read, a newer old.txt, and nothing at gone.txt (it lost it); later.txt
        // is past the feed position (5): on its way through the feed, no difference.
        let server = [remote("Saves/kept.txt", "same", tag: 1), remote("Saves/old.txt", "new", tag: 4)]
        let repair = try await fixture.replica.repairRemote(folder: "Saves", server: server + [remote("Saves/later.txt", "later", tag: 9)],
                                                            floor: 0, listedAt: 9)
        #expect(repair.mismatched.map(\.path) == ["Saves/gone.txt", "Saves/old.txt"])
        #expect(repair.mismatched.first?.server == nil && repair.mismatched.first?.here?.changeTag == 2)
        // A newer version is applied through the normal path; the file the server lost is sent again.
        #expect(repair.findings.toApply.map(\.path) == ["Saves/old.txt"])
        #expect(repair.findings.requeued == ["Saves/gone.txt"])
        let after = try await fixture.replica.remoteFolder("Saves")
        let expected = Self.recomputed(server.map(RemoteEntry.init))["Saves"]!
        #expect(after.digest == expected.digest && after.digest != before.digest)
        #expect(before.head == 3 && after.head == 4, "the newer version raises the head; the record lost takes none back")
    }

    @Test func aVersionReadButNeverHeldIsFoundAndOnlyThat() async throws {
        let fixture = try Fixture()
        _ = try await fixture.replica.apply([remote("Saves/a.txt", "a", tag: 1), remote("Saves/b.txt", "b", tag: 2),
                                             Record(path: "Saves/gone.txt", deleted: true, changeTag: 3)], token: "s.3")
        #expect(try await fixture.replica.remoteNotHeld(after: 0, limit: 10).entries.isEmpty)
        #expect(try await fixture.replica.remoteNotHeld(after: 0, limit: 10).through == 3)
        // The row of b.txt is lost with the file (the outcome of an apply that went wrong, say).
        try FileManager.default.removeItem(atPath: fixture.root + "/b.txt")
        try await fixture.replica.forgetRowForTest("Saves/b.txt")
        let found = try await fixture.replica.remoteNotHeld(after: 0, limit: 10)
        #expect(found.entries.map(\.path) == ["Saves/b.txt"])
        // Only what was read after a tag is looked at.
        #expect(try await fixture.replica.remoteNotHeld(after: 2, limit: 10).entries.isEmpty)
        // Applied again, it is held.
        _ = try await fixture.replica.apply([remote("Saves/b.txt", "b", tag: 2)], token: nil)
        #expect(fixture.read("b.txt") == "b")
        #expect(try await fixture.replica.remoteNotHeld(after: 0, limit: 10).entries.isEmpty)
    }

    /// A version renamed away here by a later one is not held at its old path, and is no loss while the
    /// renamer's tombstone for it is still to come: it is returned apart, for the caller's grace.
    @Test func aVersionRenamedAwayIsToldApartUntilItsTombstoneComes() async throws {
        let fixture = try Fixture()
        try fixture.write("keeper.txt", "keeps the root from looking emptied")
        _ = try await fixture.replica.apply([remote("Saves/p.txt", "moving", tag: 1)], token: "s.1")
        let first = try await fixture.replica.remoteNotHeld(after: 0, limit: 10)
        #expect(first.entries.isEmpty && first.movedAway.isEmpty && first.through == 1)
        var move = remote("Saves/moved.txt", "moving", tag: 2)
        move.movedFrom = "Saves/p.txt"
        _ = try await fixture.replica.apply([move], token: "s.2")
        #expect(!fixture.exists("p.txt") && fixture.read("moved.txt") == "moving", "the rename is followed at once")
        // Looked at and held before, the source's version is looked at again when its rename is read.
        let waiting = try await fixture.replica.remoteNotHeld(after: 1, limit: 10)
        #expect(waiting.entries.isEmpty && waiting.movedAway.map(\.path) == ["Saves/p.txt"])
        #expect(try await fixture.replica.remoteNotHeld(after: 0, limit: 10).movedAway.map(\.path) == ["Saves/p.txt"])
        _ = try await fixture.replica.apply([Record(path: "Saves/p.txt", deleted: true, changeTag: 3, baseTag: 1)], token: "s.3")
        let ended = try await fixture.replica.remoteNotHeld(after: 0, limit: 10)
        #expect(ended.entries.isEmpty && ended.movedAway.isEmpty)
    }

    @Test func aDatabaseFromBeforeTheRemoteTreeKeepsItsQueueAndIsFilledByAListing() throws {
        let directory = TemporaryDirectory("sinki-remote-upgrade")
        let path = directory.child("state.db")
        do {
            let store = try StateStore(path: path)
            try store.enqueue("Saves/queued.txt")
            try store.setMeta(MetaKey.feedToken, "s.41")
            // What schema 8 had: no Remote tree.
            try store.database.execute("DROP TABLE remote; DROP TABLE remote_folders;")
            try store.database.setUserVersion(8)
        }
        let store = try StateStore(path: path)
        #expect(try store.outboxEntry("Saves/queued.txt") != nil, "a change queued before the upgrade is still sent")
        #expect(try store.meta(MetaKey.feedToken) == "s.41")
        #expect(try store.meta(MetaKey.remoteSeeded) == "0", "the tree lacks what the feed moved past: a listing fills it first")
        #expect(try store.observeRemote([Record(path: "Saves/x", changeTag: 42, size: 1, sha256: "h")]) == 1)
        // A new database starts its tree with the feed: nothing to fill.
        let fresh = try StateStore(path: directory.child("fresh.db"))
        #expect(try fresh.meta(MetaKey.remoteSeeded) == nil)
    }
}

extension Replica {
    /// Loses the row of `path`, as an apply whose outcome went wrong would.
    func forgetRowForTest(_ path: String) throws { try store.removeFile(path) }
}
