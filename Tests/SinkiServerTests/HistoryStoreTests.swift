import Foundation
import SinkiRecord
@testable import SinkiServer
import SinkiSupport
import SinkiTestSupport
import Testing

private let unlimited = PageLimit(records: 10_000, dataBytes: 1 << 30)

private func saved(_ outcomes: [StoreOutcome], _ comment: Comment = "") throws -> [Record] {
    try outcomes.map { outcome in
        guard case let .saved(record) = outcome else { throw ClientError(description: "expected saved, got \(outcome) \(comment)") }
        return record
    }
}

/// The usage a user's records and kept versions add up to, computed from what the store answers: inline
/// data and blobs per version, each chunk once (as live while a current record names it).
func expectedUsage(_ store: any ServerStore, user: String) throws -> (live: Int64, history: Int64) {
    var current: [Record] = []
    var after: String?
    repeat {
        let page = try store.records(user: user, prefix: nil, after: after, limit: unlimited, includeData: true)
        current += page.records
        after = page.more ? page.records.last?.path : nil
    } while after != nil
    var kept: [Record] = []
    for record in current {
        for entry in try store.versions(user: user, path: record.path, before: nil, limit: 10_000).versions where entry.supersededAt != nil {
            kept.append(try #require(try store.version(user: user, path: record.path, version: entry.version)).record)
        }
    }
    func bytes(_ record: Record) -> Int64 {
        guard !record.deleted else { return 0 }
        return Int64(record.data?.count ?? 0) + (record.asset?.chunks == nil ? record.asset?.size ?? 0 : 0)
    }
    func chunks(_ records: [Record]) -> [String: Int64] {
        var out: [String: Int64] = [:]
        for record in records where !record.deleted { for chunk in record.asset?.chunks ?? [] { out[chunk.sha256] = chunk.size } }
        return out
    }
    let liveChunks = chunks(current), keptChunks = chunks(kept).filter { liveChunks[$0.key] == nil }
    return (current.reduce(0) { $0 + bytes($1) } + liveChunks.values.reduce(0, +),
            kept.reduce(0) { $0 + bytes($1) } + keptChunks.values.reduce(0, +))
}

/// The history half of a store (issue 23; `VersionStore`), on every implementation: every version kept
/// with what it held, a folder as it was at a moment, restores as new saves, expiry, usage and quotas.
@Suite struct HistoryStoreTests {
    @Test(arguments: StoreKind.all)
    func aFileEditedFiveTimesAndDeletedHasSixVersionsNewestFirstEachWithItsContent(kind: StoreKind) throws {
        try withStore(kind) { store in
            var tag: Int64 = 0
            var tags: [Int64] = []
            for edit in 1...5 {
                var record = fileRecord("A/a.save", "version \(edit)", baseTag: tag)
                record.mode = edit == 3 ? 0o600 : 0o644
                tag = try saved(try store.modify(user: "u", items: checked([record])))[0].changeTag
                tags.append(tag)
            }
            tags.append(try saved(try store.modify(user: "u", items: checked([tombstone("A/a.save", baseTag: tag)])))[0].changeTag)
            _ = try store.modify(user: "v", items: checked([fileRecord("A/a.save", "another user's")]))

            let list = try store.versions(user: "u", path: "A/a.save", before: nil, limit: 100)
            #expect(list.versions.map(\.version) == tags.reversed() && !list.more)
            #expect(list.versions.map(\.record.deleted) == [true, false, false, false, false, false])
            #expect(list.versions.first?.supersededAt == nil, "the delete is current")
            #expect(list.versions.dropFirst().allSatisfy { $0.supersededAt != nil && $0.supersededAt! >= $0.savedAt })
            #expect(list.versions.allSatisfy { $0.record.data == nil }, "a listing carries no content")
            // Each version was replaced when the next was saved.
            for (newer, older) in zip(list.versions, list.versions.dropFirst()) { #expect(older.supersededAt == newer.savedAt) }
            for (index, version) in tags.prefix(5).enumerated() {
                let entry = try #require(try store.version(user: "u", path: "A/a.save", version: version))
                #expect(try content(of: entry.record) == Array("version \(index + 1)".utf8))
                #expect(entry.record.mode == (index == 2 ? 0o600 : 0o644))
            }
            // Paged: two at a time, each page below the last version seen.
            let first = try store.versions(user: "u", path: "A/a.save", before: nil, limit: 2)
            let second = try store.versions(user: "u", path: "A/a.save", before: first.versions.last?.version, limit: 2)
            #expect(first.more && second.more && (first.versions + second.versions).map(\.version) == Array(tags.reversed().prefix(4)))
            // Nothing of another user's, nor of another path, nor a version of another path by its number.
            #expect(try store.versions(user: "v", path: "A/a.save", before: nil, limit: 100).versions.count == 1)
            #expect(try store.versions(user: "u", path: "A/other", before: nil, limit: 100).versions.isEmpty)
            #expect(try store.version(user: "u", path: "A/other", version: tags[0]) == nil)
            #expect(try store.version(user: "v", path: "A/a.save", version: tags[0]) == nil)
        }
    }

    @Test(arguments: StoreKind.all)
    func aFolderAtAMomentHoldsWhatEachPathHeldThen(kind: StoreKind) throws {
        try withStore(kind) { store in
            let first = try saved(try store.modify(user: "u", items: checked([
                fileRecord("R/keep", "keep"), fileRecord("R/edit", "old"), fileRecord("R/gone", "gone"), fileRecord("R/sub/deep", "deep"),
                fileRecord("S/elsewhere", "x"),
            ])))
            let moment = Clock.now()
            try waitUntilSync("the clock to pass the moment") { Clock.now() > moment }
            _ = try store.modify(user: "u", items: checked([
                fileRecord("R/edit", "new", baseTag: first[1].changeTag), tombstone("R/gone", baseTag: first[2].changeTag),
                fileRecord("R/made-since", "new file"), Record(path: "R/folder-since", type: "dir", mode: 0o755, device: "laptop"),
            ]))
            let then = try store.folder(user: "u", prefix: "R", at: moment, after: nil, limit: 100)
            #expect(then.versions.map(\.record.path) == ["R/edit", "R/gone", "R/keep", "R/sub/deep"] && !then.more)
            #expect(then.versions.map(\.version) == [first[1], first[2], first[0], first[3]].map(\.changeTag))
            #expect(try store.folder(user: "u", prefix: "R/sub", at: moment, after: nil, limit: 100).versions.map(\.record.path) == ["R/sub/deep"])
            let paged = try store.folder(user: "u", prefix: "R", at: moment, after: "R/gone", limit: 1)
            #expect(paged.versions.map(\.record.path) == ["R/keep"] && paged.more)
            // Before anything was saved: nothing.
            #expect(try store.folder(user: "u", prefix: "R", at: 1, after: nil, limit: 100).versions.isEmpty)
            // Now: the current records.
            let now = try store.folder(user: "u", prefix: "R", at: Clock.now(), after: nil, limit: 100)
            #expect(now.versions.map(\.record.path) == ["R/edit", "R/folder-since", "R/keep", "R/made-since", "R/sub/deep"])
        }
    }

    @Test(arguments: StoreKind.all)
    func restoringAVersionSavesItAnewBasedOnTheCurrentRecord(kind: StoreKind) throws {
        try withStore(kind) { store in
            let v1 = try saved(try store.modify(user: "u", items: checked([fileRecord("A/f", "one")])))[0]
            let v2 = try saved(try store.modify(user: "u", items: checked([fileRecord("A/f", "two", baseTag: v1.changeTag)])))[0]
            let changes = try store.restore(user: "u", RestoreRequest(.version(path: "A/f", version: v1.changeTag, to: nil)), device: "desk")
            #expect(changes.map(\.action) == [.restore] && changes[0].from == v1.changeTag)
            let restored = changes[0].record
            #expect(restored.changeTag > v2.changeTag && restored.baseTag == v2.changeTag && restored.device == "desk")
            #expect(restored.sha256 == v1.sha256 && restored.data == nil)
            // It is an ordinary change: the feed brings it with its content, and v2 is in history.
            let feed = try store.changes(user: "u", after: v2.changeTag, limit: unlimited).records
            #expect(feed.map(\.changeTag) == [restored.changeTag])
            #expect(try content(of: feed[0]) == Array("one".utf8))
            #expect(try store.versions(user: "u", path: "A/f", before: nil, limit: 10).versions.map(\.version)
                    == [restored.changeTag, v2.changeTag, v1.changeTag])
            // The current version again: nothing to do.
            #expect(try store.restore(user: "u", RestoreRequest(.version(path: "A/f", version: v1.changeTag, to: nil)), device: "desk").isEmpty)
            // Elsewhere (--to): a new path, the current one kept.
            let copy = try store.restore(user: "u", RestoreRequest(.version(path: "A/f", version: v2.changeTag, to: "A/f-two")), device: "desk")
            #expect(copy.map(\.path) == ["A/f-two"] && copy[0].record.baseTag == 0)
            let listed = try store.records(user: "u", prefix: "A", after: nil, limit: unlimited, includeData: true).records
            #expect(try listed.map { try content(of: $0) } == [Array("one".utf8), Array("two".utf8)])
            // A dry run says the same and saves nothing.
            let head = try store.headTag(user: "u")
            let dry = try store.restore(user: "u", RestoreRequest(.version(path: "A/f", version: v2.changeTag, to: nil), dryRun: true), device: "desk")
            #expect(dry.map(\.action) == [.restore] && dry[0].record.changeTag == 0)
            #expect(try store.headTag(user: "u") == head)
            // A delete made current again deletes; a delete cannot be copied elsewhere.
            let gone = try saved(try store.modify(user: "u", items: checked([tombstone("A/f-two", baseTag: copy[0].record.changeTag)])))[0]
            let back = try store.restore(user: "u", RestoreRequest(.version(path: "A/f-two", version: copy[0].record.changeTag, to: nil)), device: "d")
            #expect(back.map(\.action) == [.restore])
            let again = try store.restore(user: "u", RestoreRequest(.version(path: "A/f-two", version: gone.changeTag, to: nil)), device: "d")
            #expect(again.map(\.action) == [.delete] && again[0].record.deleted)
            #expect(throws: RestoreError.deletedVersion(path: "A/f-two", version: gone.changeTag)) {
                try store.restore(user: "u", RestoreRequest(.version(path: "A/f-two", version: gone.changeTag, to: "A/x")), device: "d")
            }
            #expect(throws: RestoreError.noSuchVersion(path: "A/f", version: 999_999)) {
                try store.restore(user: "u", RestoreRequest(.version(path: "A/f", version: 999_999, to: nil)), device: "d")
            }
            #expect(throws: RestoreError.noSuchVersion(path: "A/f", version: v1.changeTag)) {
                try store.restore(user: "v", RestoreRequest(.version(path: "A/f", version: v1.changeTag, to: nil)), device: "d")
            }
        }
    }

    @Test(arguments: StoreKind.all)
    func aFolderRestoreBringsEveryPathBackAndRemovesWhatCameSinceInOneBatch(kind: StoreKind) throws {
        try withStore(kind) { store in
            let big = ChunkedFile.random([300_000, 1000])
            let before = try saved(try store.modify(user: "u", items: checked((0..<20).map { fileRecord("R/f\($0)", "original \($0)") }
                + [big.record("R/big"), fileRecord("R/was-file", "a file"), fileRecord("T/outside", "x")])))
            let moment = Clock.now()
            try waitUntilSync("the clock to pass the moment") { Clock.now() > moment }
            // Rewritten: every file's bytes replaced, a few deleted, a note added, a file made a folder.
            var rewrite = (0..<20).filter { $0 % 7 != 0 }.map { fileRecord("R/f\($0)", "encrypted \($0)", baseTag: before[$0].changeTag) }
            rewrite += (0..<20).filter { $0 % 7 == 0 }.map { tombstone("R/f\($0)", baseTag: before[$0].changeTag) }
            rewrite += [fileRecord("R/README-ransom.txt", "pay"), tombstone("R/big", baseTag: before[20].changeTag),
                        tombstone("R/was-file", baseTag: before[21].changeTag), fileRecord("R/outside-moment", "new")]
            _ = try saved(try store.modify(user: "u", items: checked(rewrite)))
            let folder = try saved(try store.modify(user: "u", items: checked([
                Record(path: "R/was-file", type: "dir", baseTag: try #require(try store.versions(user: "u", path: "R/was-file", before: nil, limit: 1).versions.first).version,
                       mode: 0o755, device: "laptop"),
                fileRecord("R/was-file/inside", "inside"),
            ])))
            let rewritten = try store.records(user: "u", prefix: "R", after: nil, limit: unlimited, includeData: false).records.filter { !$0.deleted }

            let dry = try store.restore(user: "u", RestoreRequest(.folder("R", at: moment), dryRun: true), device: "desk")
            #expect(try store.records(user: "u", prefix: "R", after: nil, limit: unlimited, includeData: false).records.filter { !$0.deleted } == rewritten)
            let changes = try store.restore(user: "u", RestoreRequest(.folder("R", at: moment)), device: "desk")
            #expect(dry.map(\.path) == changes.map(\.path) && dry.map(\.action) == changes.map(\.action))
            // Deletes first, deepest first; then restores in path order.
            #expect(changes.prefix(3).map(\.path) == ["R/was-file/inside", "R/outside-moment", "R/README-ransom.txt"])
            #expect(changes.prefix(3).allSatisfy { $0.action == .delete })
            #expect(changes.dropFirst(3).map(\.path) == (["R/big"] + (0..<20).map { "R/f\($0)" } + ["R/was-file"]).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
            #expect(changes.dropFirst(3).allSatisfy { $0.action == .restore })
            // The folder holds exactly what it held; what was outside it is as it was.
            let now = try store.records(user: "u", prefix: "R", after: nil, limit: unlimited, includeData: true).records.filter { !$0.deleted }
            #expect(now.map(\.path) == before.prefix(22).map(\.path).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
            for record in now {
                let old = try #require(before.first { $0.path == record.path })
                #expect(record.sha256 == old.sha256 && record.type == old.type && record.mode == old.mode)
                if record.path == "R/big" { #expect(record.asset == big.asset) } else {
                    #expect(try content(of: record) == content(of: try #require(try store.version(user: "u", path: old.path, version: old.changeTag)).record))
                }
            }
            // The rewritten versions are history themselves: the folder restored to just before the restore.
            let restoredAt = try #require(try store.versions(user: "u", path: "R/f1", before: nil, limit: 1).versions.first).savedAt
            let ransomed = try store.folder(user: "u", prefix: "R", at: restoredAt - 1, after: nil, limit: 100).versions
            #expect(Set(ransomed.map(\.record.path)) == Set(rewritten.map(\.path)))
            #expect(folder.count == 2)
            // Nothing more to do a second time.
            #expect(try store.restore(user: "u", RestoreRequest(.folder("R", at: moment)), device: "desk").isEmpty)
        }
    }

    @Test(arguments: StoreKind.all)
    func usageCountsInlineDataPerVersionAndEachChunkOnce(kind: StoreKind) throws {
        try withStore(kind) { store in
            #expect(try store.usage(user: "u") == StorageFigures(liveBytes: 0, historyBytes: 0, quotaBytes: nil))
            let v1 = ChunkedFile.random([300_000, 200_000])
            let inline = fileRecord("A/small", randomBytes(5000))
            let first = try saved(try store.modify(user: "u", items: checked([v1.record("A/big"), inline])))
            let inlineBytes = Int64(inline.data!.count)
            #expect(try store.usage(user: "u") == StorageFigures(liveBytes: 500_000 + inlineBytes, historyBytes: 0, quotaBytes: nil))
            // A new version sharing the first chunk: only the second chunk of v1 is history's alone.
            let v2 = ChunkedFile(chunks: [v1.chunks[0], randomBytes(100_000)])
            let second = try saved(try store.modify(user: "u", items: checked([v2.record("A/big", baseTag: first[0].changeTag),
                                                                                tombstone("A/small", baseTag: first[1].changeTag)])))
            #expect(try store.usage(user: "u") == StorageFigures(liveBytes: 400_000, historyBytes: 200_000 + inlineBytes, quotaBytes: nil))
            // A copy (a move keeping its source) names the same chunks: nothing more.
            _ = try saved(try store.modify(user: "u", items: checked([Record(path: "A/copy", size: v2.size, sha256: v2.record("x").sha256,
                                                                             device: "d", movedFrom: "A/big")])))
            #expect(try store.usage(user: "u").liveBytes == 400_000)
            let expected = try expectedUsage(store, user: "u")
            #expect(try store.usage(user: "u") == StorageFigures(liveBytes: expected.live, historyBytes: expected.history, quotaBytes: nil))
            // Restoring v1 makes its chunks live again; v2's own chunk becomes history.
            _ = try store.restore(user: "u", RestoreRequest(.version(path: "A/big", version: first[0].changeTag, to: nil)), device: "d")
            _ = second
            let after = try expectedUsage(store, user: "u")
            #expect(try store.usage(user: "u") == StorageFigures(liveBytes: after.live, historyBytes: after.history, quotaBytes: nil))
            #expect(after.live == 600_000 && after.history == 0 + inlineBytes)
        }
    }

    @Test(arguments: StoreKind.all)
    func usageStaysWhatTheRecordsAndVersionsHoldThroughRandomBatchesAndExpiry(kind: StoreKind) throws {
        try withStore(kind) { store in
            var workload = DigestWorkload(seed: 0x5EED_0023_0001)
            for round in 0..<30 {
                let (user, items) = try workload.batch(from: store)
                _ = try store.modify(user: user, items: checked(items))
                if round % 10 == 9 {
                    for user in DigestWorkload.users {
                        let expected = try expectedUsage(store, user: user)
                        let usage = try store.usage(user: user)
                        #expect(usage.liveBytes == expected.live && usage.historyBytes == expected.history, "round \(round), user \(user)")
                    }
                }
            }
            // Everything kept expires: history is back to nothing, the current records untouched.
            let live = try DigestWorkload.users.map { try store.usage(user: $0).liveBytes }
            var expiry = VersionExpiry(removed: 0, more: true)
            var removed = 0
            while expiry.more {
                expiry = try store.expireVersions(supersededBefore: Clock.now() + 1, limit: 7)
                removed += expiry.removed
            }
            #expect(removed > 0)
            #expect(try DigestWorkload.users.map { try store.usage(user: $0) } == live.map { StorageFigures(liveBytes: $0, historyBytes: 0, quotaBytes: nil) })
            for user in DigestWorkload.users { try expectStoredDigestsMatchRecords(store, user: user, "after expiry:") }
        }
    }

    @Test(arguments: StoreKind.all)
    func expiryTakesOnlyVersionsReplacedBeforeTheCutoffWithWhatOnlyTheyNamed(kind: StoreKind) throws {
        try withStore(kind) { store in
            let old = ChunkedFile.random([1000, 2000])
            let first = try saved(try store.modify(user: "u", items: checked([old.record("A/big"), fileRecord("A/small", "one")])))
            let new = ChunkedFile(chunks: [old.chunks[0], randomBytes(3000)])
            _ = try store.modify(user: "u", items: checked([new.record("A/big", baseTag: first[0].changeTag),
                                                            fileRecord("A/small", "two", baseTag: first[1].changeTag)]))
            #expect(try store.chunkReferences(user: "u", after: 0).names == Set(old.names + new.names), "kept versions name their chunks")
            #expect(try store.manifest(user: "u", assetID: old.hash, within: "A") == old.refs, "a kept version's manifest is served")
            #expect(try store.expireVersions(supersededBefore: 0, limit: 10) == VersionExpiry(removed: 0, more: false))
            #expect(try store.expireVersions(supersededBefore: Clock.now() + 1, limit: 10) == VersionExpiry(removed: 2, more: false))
            #expect(try store.chunkReferences(user: "u", after: 0).names == Set(new.names))
            #expect(try store.manifest(user: "u", assetID: old.hash, within: nil) == nil)
            #expect(try store.versions(user: "u", path: "A/big", before: nil, limit: 10).versions.count == 1)
            #expect(try store.usage(user: "u").historyBytes == 0)
            let live = try store.records(user: "u", prefix: "A", after: nil, limit: unlimited, includeData: true).records
            #expect(try live.map(\.asset) == [new.asset, nil] && content(of: live[1]) == Array("two".utf8))
        }
    }

    @Test(arguments: StoreKind.all)
    func aBatchThatWouldPassTheQuotaSavesNothingAndADeleteAlwaysMay(kind: StoreKind) throws {
        try withStore(kind) { store in
            try store.addUser("u", at: 1)
            #expect(throws: AccountError.self) { try store.setQuota(user: "nobody", bytes: 10) }
            let first = try saved(try store.modify(user: "u", items: checked([fileRecord("A/1", randomBytes(4000))])))
            let used = try store.usage(user: "u").usedBytes
            try store.setQuota(user: "u", bytes: used + 5000)
            #expect(try store.users().first?.quota == used + 5000)
            let head = try store.headTag(user: "u")
            let big = [fileRecord("A/2", randomBytes(3000)), fileRecord("A/3", randomBytes(3000))]
            #expect { try store.modify(user: "u", items: checked(big)) } throws: { error in
                guard let full = error as? StorageFull else { return false }
                return full.figures.usedBytes == used && full.figures.quotaBytes == used + 5000 && full.figures.neededBytes! > 5000
                    && full.problem.status == 507 && full.problem.code == "storage-full" && full.problem.storage == full.figures
            }
            #expect(try store.headTag(user: "u") == head, "nothing of the batch was saved")
            #expect(try saved(try store.modify(user: "u", items: checked([big[0]]))).count == 1)
            // Over the quota (lowered), a delete still goes: it grows nothing.
            try store.setQuota(user: "u", bytes: 1)
            #expect(try saved(try store.modify(user: "u", items: checked([tombstone("A/1", baseTag: first[0].changeTag)]))).count == 1)
            #expect(throws: StorageFull.self) { try store.modify(user: "u", items: checked([fileRecord("A/4", "x")])) }
            try store.setQuota(user: "u", bytes: nil)
            #expect(try saved(try store.modify(user: "u", items: checked([fileRecord("A/4", "x")]))).count == 1)
        }
    }

    @Test(arguments: StoreKind.all)
    func aDefaultQuotaHoldsForUsersWithoutTheirOwn(kind: StoreKind) throws {
        try withStore(kind, policy: StorePolicy(keepsHistory: true, defaultQuota: 100)) { store in
            try store.addUser("u", at: 1)
            #expect(try store.usage(user: "u").quotaBytes == 100)
            #expect(throws: StorageFull.self) { try store.modify(user: "u", items: checked([fileRecord("A/1", randomBytes(500))])) }
            try store.setQuota(user: "u", bytes: 10_000)
            #expect(try saved(try store.modify(user: "u", items: checked([fileRecord("A/1", randomBytes(500))]))).count == 1)
        }
    }

    @Test(arguments: StoreKind.all)
    func withoutHistoryASaveKeepsNothingOfWhatItReplaces(kind: StoreKind) throws {
        try withStore(kind, policy: StorePolicy(keepsHistory: false)) { store in
            let first = try saved(try store.modify(user: "u", items: checked([fileRecord("A/f", "one")])))[0]
            let second = try saved(try store.modify(user: "u", items: checked([fileRecord("A/f", "two", baseTag: first.changeTag)])))[0]
            #expect(try store.versions(user: "u", path: "A/f", before: nil, limit: 10).versions.map(\.version) == [second.changeTag])
            #expect(try store.version(user: "u", path: "A/f", version: first.changeTag) == nil)
            #expect(try store.usage(user: "u").historyBytes == 0)
        }
    }

    @Test(arguments: StoreKind.all)
    func removingAUserRemovesTheirHistoryAndUsage(kind: StoreKind) throws {
        try withStore(kind) { store in
            for user in ["u", "v"] {
                try store.addUser(user, at: 1)
                let first = try saved(try store.modify(user: user, items: checked([fileRecord("A/f", "one")])))[0]
                _ = try store.modify(user: user, items: checked([fileRecord("A/f", "two", baseTag: first.changeTag)]))
            }
            try store.removeUser("u")
            #expect(try store.versions(user: "u", path: "A/f", before: nil, limit: 10).versions.isEmpty)
            #expect(try store.usage(user: "u") == StorageFigures(liveBytes: 0, historyBytes: 0, quotaBytes: nil))
            #expect(try store.versions(user: "v", path: "A/f", before: nil, limit: 10).versions.count == 2)
        }
    }
}
