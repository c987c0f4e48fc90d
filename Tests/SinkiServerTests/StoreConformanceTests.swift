import Dispatch
import Foundation
import SinkiRecord
@testable import SinkiServer
import SinkiSupport
import SinkiTestSupport
import Synchronization
import Testing

/// A store under test: how to make a fresh one, and how to open the same one again.
struct StoreKind: Sendable, CustomTestStringConvertible {
    /// What `make` gives: the store, a way to open it again after closing it, what keeps its files or
    /// database alive, and a way to take its closed database back to schema 3, from before folder
    /// digests and history (the tables gone, the version lowered), as a server of that version left it.
    typealias Made = (store: any ServerStore, reopen: @Sendable () throws -> any ServerStore, keepAlive: AnyObject,
                      forgetDigests: @Sendable () throws -> Void)

    let name: String
    /// A fresh, empty store with a policy (history kept, no default quota, unless told otherwise).
    let open: @Sendable (StorePolicy) throws -> Made

    /// A fresh, empty store keeping history, as a server does by default.
    var make: @Sendable () throws -> Made { { [open] in try open(StorePolicy()) } }

    var testDescription: String { name }

    /// What schema 5 added, gone again.
    static let forgetHistory = "DROP TABLE versions; DROP TABLE chunk_refs; DROP TABLE usage; ALTER TABLE users DROP COLUMN quota; ALTER TABLE records DROP COLUMN xattrs;"

    static let sqlite = StoreKind(name: "SQLite") { policy in
        let directory = TemporaryDirectory("sinki-store")
        let path = directory.child("records.db")
        return (try SQLiteRecordStore(path: path, readers: 2, policy: policy), { try SQLiteRecordStore(path: path, readers: 2, policy: policy) },
                directory, {
            let db = try SQLiteDatabase(path: path)
            try db.execute("DROP TABLE folder_digests; " + forgetHistory)
            try db.setUserVersion(3)
        })
    }

    /// A fresh database on the tests' own PostgreSQL cluster (started by the first test that needs it).
    static let postgres = StoreKind(name: "PostgreSQL") { policy in
        let database = try PostgresCluster.shared().createDatabase()
        let url = database.url
        return (try PostgresStore(url: url, connections: 3, policy: policy), { try PostgresStore(url: url, connections: 3, policy: policy) },
                database, {
            let db = try PGConnection(url: url)
            defer { db.close() }
            try db.execute("DROP TABLE folder_digests; " + forgetHistory + " UPDATE schema_version SET version = 3")
        })
    }

    /// Every store implementation: each runs the same suite.
    static let all: [StoreKind] = [.sqlite, .postgres]
}

/// Runs `body` with a fresh store (keeping history unless `policy` says otherwise) and closes it after.
func withStore(_ kind: StoreKind, policy: StorePolicy = StorePolicy(), _ body: (any ServerStore) throws -> Void) throws {
    let made = try kind.open(policy)
    defer { made.store.close(); withExtendedLifetime(made.keepAlive) {} }
    try body(made.store)
}

func checked(_ records: [Record]) -> [CheckedRecord] {
    records.map { CheckedRecord($0, path: try! RecordPath(validating: $0.path)) }
}

private let unlimited = PageLimit(records: 10_000, dataBytes: 1 << 30)

private func savedTag(_ outcome: StoreOutcome) -> Int64? {
    if case let .saved(record) = outcome { return record.changeTag }
    return nil
}

@Suite struct StoreConformanceTests {
    @Test(arguments: StoreKind.all)
    func savesNewRecordsWithIncreasingTagsAndWithoutData(kind: StoreKind) throws {
        try withStore(kind) { store in
            #expect(!store.storeID.isEmpty)
            #expect(!store.storeID.contains("."))
            let outcomes = try store.modify(user: "u", items: checked([fileRecord("A/1", "one"), fileRecord("A/2", "two"), tombstone("A/3", baseTag: 0)]))
            let tags = outcomes.compactMap(savedTag)
            #expect(tags.count == 3)
            #expect(tags[0] > 0 && tags[0] < tags[1] && tags[1] < tags[2])
            for outcome in outcomes {
                guard case let .saved(record) = outcome else { continue }
                #expect(record.data == nil)
            }
            guard case let .saved(first) = outcomes[0] else { return }
            #expect(first.path == "A/1" && first.size == 3 && first.sha256 == Digest.sha256Hex(Array("one".utf8)) && first.device == "laptop")
        }
    }

    /// A user's change tags tell nothing of another user's saves (issue 24): each is the time of its
    /// own save, whatever was saved between, and a store that counted tags goes on above its counter.
    @Test(arguments: StoreKind.all)
    func aUsersTagsAreTheTimesOfItsSavesAndCountNobodyElses(kind: StoreKind) throws {
        try withStore(kind) { store in
            func timed(_ user: String, _ path: String) throws -> (before: Int64, tag: Int64, after: Int64) {
                let before = Clock.now()
                let outcome = try store.modify(user: user, items: checked([fileRecord(path, path)]))
                return (before, try #require(savedTag(outcome[0])), Clock.now())
            }
            let first = try timed("alice", "A/1")
            #expect(first.before <= first.tag && first.tag <= first.after)
            // Bob's 500 saves between alice's two leave no mark on hers: her second tag is her save's time.
            let bob = try store.modify(user: "bob", items: checked((0..<500).map { fileRecord("B/\($0)", "b") }))
            let bobTags = bob.compactMap(savedTag)
            #expect(Set(bobTags).count == 500 && bobTags == bobTags.sorted())
            let second = try timed("alice", "A/2")
            #expect(second.before <= second.tag && second.tag <= second.after && second.tag > bobTags.last!)
            let feed = try store.changes(user: "alice", after: 0, limit: unlimited)
            #expect(feed.records.map(\.changeTag) == [first.tag, second.tag])
            #expect(try store.headTag(user: "alice") == second.tag)
        }
    }

    @Test(arguments: StoreKind.all)
    func staleBaseTagConflictsWithTheCurrentRecordAndItsData(kind: StoreKind) throws {
        try withStore(kind) { store in
            let first = try store.modify(user: "u", items: checked([fileRecord("A/x", "v1")]))
            let tag1 = try #require(savedTag(first[0]))
            let second = try store.modify(user: "u", items: checked([fileRecord("A/x", "v2", baseTag: tag1)]))
            let tag2 = try #require(savedTag(second[0]))
            #expect(tag2 > tag1)
            // An edit based on the old version, and one based on nothing: both conflict with v2.
            for base in [tag1, 0] {
                let outcome = try store.modify(user: "u", items: checked([fileRecord("A/x", "v3", baseTag: base)]))
                guard case let .conflict(current) = outcome[0] else { Issue.record("expected a conflict, got \(outcome[0])"); return }
                #expect(current.changeTag == tag2)
                #expect(try content(of: current) == Array("v2".utf8))
            }
            // Nothing was saved by the conflicts.
            let feed = try store.changes(user: "u", after: 0, limit: unlimited)
            #expect(feed.records.map(\.changeTag) == [tag2])
        }
    }

    @Test(arguments: StoreKind.all)
    func unknownPathWithABaseTagConflictsWithAnEmptyTombstone(kind: StoreKind) throws {
        try withStore(kind) { store in
            let outcome = try store.modify(user: "u", items: checked([fileRecord("A/never", "x", baseTag: 7)]))
            #expect(outcome == [.conflict(Record(path: "A/never", deleted: true, changeTag: 0))])
        }
    }

    @Test(arguments: StoreKind.all)
    func itemsOfOneBatchApplyInOrder(kind: StoreKind) throws {
        try withStore(kind) { store in
            let outcomes = try store.modify(user: "u", items: checked([fileRecord("A/same", "first"), fileRecord("A/same", "second")]))
            let tag = try #require(savedTag(outcomes[0]))
            guard case let .conflict(current) = outcomes[1] else { Issue.record("expected a conflict"); return }
            #expect(current.changeTag == tag)
            #expect(try content(of: current) == Array("first".utf8))
        }
    }

    @Test(arguments: StoreKind.all)
    func storesCompressedDataAsGiven(kind: StoreKind) throws {
        try withStore(kind) { store in
            let record = fileRecord("A/blob", randomBytes(10_000))
            _ = try store.modify(user: "u", items: checked([record]))
            let back = try store.changes(user: "u", after: 0, limit: unlimited).records
            #expect(back.count == 1)
            #expect(back[0].data == record.data)
            var expected = record
            expected.changeTag = back[0].changeTag
            #expect(back[0] == expected)
        }
    }

    @Test(arguments: StoreKind.all)
    func feedKeepsLatestVersionsAndTombstonesInTagOrder(kind: StoreKind) throws {
        try withStore(kind) { store in
            let saved = try store.modify(user: "u", items: checked([fileRecord("A/a", "1"), fileRecord("A/b", "1"), fileRecord("A/c", "1")]))
            let tags = saved.compactMap(savedTag)
            // Edit a, delete b: the feed shows c, then a's new version, then b's tombstone.
            let edits = try store.modify(user: "u", items: checked([fileRecord("A/a", "2", baseTag: tags[0]), tombstone("A/b", baseTag: tags[1])]))
            let feed = try store.changes(user: "u", after: 0, limit: unlimited)
            #expect(feed.records.map(\.path) == ["A/c", "A/a", "A/b"])
            #expect(feed.records[2].deleted)
            #expect(feed.records[2].data == nil)
            #expect(feed.lastTag == edits.compactMap(savedTag).last)
            #expect(!feed.more)
            // After the first save's tags, only the edits remain.
            let later = try store.changes(user: "u", after: tags[2], limit: unlimited)
            #expect(later.records.map(\.path) == ["A/a", "A/b"])
            // Nothing newer: an empty page that keeps the position.
            let none = try store.changes(user: "u", after: feed.lastTag, limit: unlimited)
            #expect(none.records.isEmpty && none.lastTag == feed.lastTag && !none.more)
        }
    }

    @Test(arguments: StoreKind.all)
    func tombstonesDropContent(kind: StoreKind) throws {
        try withStore(kind) { store in
            var delete = fileRecord("A/gone", "content")
            delete.deleted = true
            delete.asset = Asset(id: "u1", size: 7, sha256: "00")
            let outcome = try store.modify(user: "u", items: checked([delete]))
            guard case let .saved(saved) = outcome[0] else { Issue.record("expected saved"); return }
            #expect(saved.deleted && saved.asset == nil)
            let back = try store.changes(user: "u", after: 0, limit: unlimited).records[0]
            #expect(back.deleted && back.data == nil && back.asset == nil)
        }
    }

    @Test(arguments: StoreKind.all)
    func feedPagesStopAtTheRecordLimitOrPastTheDataLimit(kind: StoreKind) throws {
        try withStore(kind) { store in
            let records = (0..<25).map { fileRecord("A/\($0)", randomBytes(1000)) }
            _ = try store.modify(user: "u", items: checked(records))
            var after: Int64 = 0
            var seen: [String] = []
            var pages: [Int] = []
            while true {
                let page = try store.changes(user: "u", after: after, limit: PageLimit(records: 10, dataBytes: 1 << 30))
                seen += page.records.map(\.path)
                pages.append(page.records.count)
                after = page.lastTag
                if !page.more { break }
            }
            #expect(pages == [10, 10, 5])
            #expect(seen == records.map(\.path))
            // Each record's data is ~1000 bytes: a 2,500-byte cap stops after the third record.
            let capped = try store.changes(user: "u", after: 0, limit: PageLimit(records: 100, dataBytes: 2_500))
            #expect(capped.records.count == 3)
            #expect(capped.more)
            // One record larger than the cap still comes, alone.
            let tiny = try store.changes(user: "u", after: 0, limit: PageLimit(records: 100, dataBytes: 1))
            #expect(tiny.records.count == 1 && tiny.more)
        }
    }

    @Test(arguments: StoreKind.all)
    func lookupListsAPrefixAndItsSubtreeInPathOrder(kind: StoreKind) throws {
        try withStore(kind) { store in
            let paths = ["R/b", "R/b/c", "R/b/d/e", "R/b-x", "R/b.y", "R/bc", "R/a", "S/b", "R/b/\u{e9}"]
            _ = try store.modify(user: "u", items: checked(paths.map { fileRecord($0, $0) }))
            let listing = try store.records(user: "u", prefix: "R/b", after: nil, limit: unlimited, includeData: false)
            #expect(listing.records.map(\.path) == ["R/b", "R/b/c", "R/b/d/e", "R/b/\u{e9}"])
            #expect(listing.records.allSatisfy { $0.data == nil })
            #expect(!listing.more)
            let root = try store.records(user: "u", prefix: "R", after: nil, limit: unlimited, includeData: true)
            #expect(root.records.map(\.path) == ["R/a", "R/b", "R/b-x", "R/b.y", "R/b/c", "R/b/d/e", "R/b/\u{e9}", "R/bc"])
            #expect(try root.records.allSatisfy { try content(of: $0) == Array($0.path.utf8) })
            let everything = try store.records(user: "u", prefix: nil, after: nil, limit: unlimited, includeData: false)
            #expect(everything.records.count == paths.count)
            // Paging: two at a time, each page continuing after the last path.
            var after: String?
            var pages: [[String]] = []
            repeat {
                let page = try store.records(user: "u", prefix: "R/b", after: after, limit: PageLimit(records: 2, dataBytes: 1 << 30), includeData: false)
                pages.append(page.records.map(\.path))
                after = page.more ? page.records.last?.path : nil
            } while after != nil
            #expect(pages == [["R/b", "R/b/c"], ["R/b/d/e", "R/b/\u{e9}"]])
            #expect(try store.records(user: "u", prefix: "Q", after: nil, limit: unlimited, includeData: false).records.isEmpty)
        }
    }

    @Test(arguments: StoreKind.all)
    func usersDoNotSeeEachOthersRecords(kind: StoreKind) throws {
        try withStore(kind) { store in
            let alice = try store.modify(user: "alice", items: checked([fileRecord("A/shared", "alice's")]))
            // Bob's first save of the same path is new to him: saved, not a conflict with Alice's.
            let bob = try store.modify(user: "bob", items: checked([fileRecord("A/shared", "bob's")]))
            #expect(savedTag(alice[0]) != nil && savedTag(bob[0]) != nil)
            let aliceFeed = try store.changes(user: "alice", after: 0, limit: unlimited).records
            let bobFeed = try store.changes(user: "bob", after: 0, limit: unlimited).records
            #expect(try aliceFeed.map { try content(of: $0) } == [Array("alice's".utf8)])
            #expect(try bobFeed.map { try content(of: $0) } == [Array("bob's".utf8)])
            #expect(try store.records(user: "carol", prefix: nil, after: nil, limit: unlimited, includeData: false).records.isEmpty)
            #expect(try store.changes(user: "carol", after: 0, limit: unlimited).records.isEmpty)
        }
    }

    @Test(arguments: StoreKind.all)
    func identityAndTagsSurviveReopening(kind: StoreKind) throws {
        let made = try kind.make()
        defer { withExtendedLifetime(made.keepAlive) {} }
        let first = try made.store.modify(user: "u", items: checked([fileRecord("A/1", "x"), fileRecord("A/2", "y")]))
        let id = made.store.storeID
        // Delete the newest record's row? No: tombstones stay. Tags must still never repeat after reopening.
        made.store.close()
        let reopened = try made.reopen()
        defer { reopened.close() }
        #expect(reopened.storeID == id)
        let next = try reopened.modify(user: "u", items: checked([fileRecord("A/3", "z")]))
        #expect(try #require(savedTag(next[0])) > first.compactMap(savedTag).max()!)
        #expect(try reopened.changes(user: "u", after: 0, limit: unlimited).records.count == 3)
        #expect(try reopened.historyFloor() == 0)
    }

    @Test(arguments: StoreKind.all)
    func separateStoresHaveSeparateIDs(kind: StoreKind) throws {
        let one = try kind.make()
        let two = try kind.make()
        defer {
            one.store.close()
            two.store.close()
            withExtendedLifetime((one.keepAlive, two.keepAlive)) {}
        }
        #expect(one.store.storeID != two.store.storeID)
    }

    @Test(arguments: StoreKind.all)
    func concurrentBatchesGetDistinctTagsAndTheFeedSeesEachOnce(kind: StoreKind) throws {
        try withStore(kind) { store in
            let tags = Mutex<[Int64]>([])
            let failures = Atomic<Int>(0)
            DispatchQueue.concurrentPerform(iterations: 8) { worker in
                for batch in 0..<10 {
                    let records = (0..<20).map { fileRecord("W\(worker)/\(batch)/\($0)", "\(worker)-\(batch)-\($0)") }
                    do {
                        let outcomes = try store.modify(user: "u", items: checked(records))
                        tags.withLock { $0 += outcomes.compactMap(savedTag) }
                        // Readers run alongside the writer.
                        _ = try store.changes(user: "u", after: 0, limit: PageLimit(records: 50, dataBytes: 1 << 30))
                    } catch {
                        failures.add(1, ordering: .relaxed)
                    }
                }
            }
            #expect(failures.load(ordering: .relaxed) == 0)
            let all = tags.withLock { $0 }
            #expect(all.count == 1600 && Set(all).count == 1600)
            var after: Int64 = 0
            var fed: [Int64] = []
            while true {
                let page = try store.changes(user: "u", after: after, limit: PageLimit(records: 333, dataBytes: 1 << 30))
                fed += page.records.map(\.changeTag)
                after = page.lastTag
                if !page.more { break }
            }
            #expect(fed == all.sorted())
        }
    }

    @Test(arguments: StoreKind.all)
    func aFeedReaderTailingConcurrentWritersNeverMissesATag(kind: StoreKind) throws {
        try withStore(kind) { store in
            // If a lower tag could commit after a reader passed it, the reader would never see it.
            let saved = Atomic<Int>(0)
            let writersDone = Atomic<Int>(0)
            let seen = Mutex<(last: Int64, count: Int, backwards: Int)>((0, 0, 0))
            DispatchQueue.concurrentPerform(iterations: 5) { worker in
                if worker == 0 {
                    var after: Int64 = 0
                    var finalPass = false
                    while true {
                        guard let page = try? store.changes(user: "u", after: after, limit: PageLimit(records: 100, dataBytes: 1 << 30)) else { break }
                        seen.withLock { state in
                            for record in page.records {
                                if record.changeTag <= state.last { state.backwards += 1 }
                                state.last = record.changeTag
                                state.count += 1
                            }
                        }
                        after = page.lastTag
                        if page.more || !page.records.isEmpty { continue }
                        if finalPass { break }
                        // One more empty page after every writer is done: nothing is left behind.
                        if writersDone.load(ordering: .acquiring) == 4 { finalPass = true }
                    }
                    return
                }
                for batch in 0..<15 {
                    let records = (0..<5).map { fileRecord("T\(worker)/\(batch)/\($0)", "\(worker)") }
                    if let outcomes = try? store.modify(user: "u", items: checked(records)) {
                        saved.add(outcomes.compactMap(savedTag).count, ordering: .relaxed)
                    }
                }
                writersDone.add(1, ordering: .releasing)
            }
            let state = seen.withLock { $0 }
            #expect(saved.load(ordering: .relaxed) == 300)
            #expect(state.backwards == 0)
            #expect(state.count == 300)
        }
    }

    @Test(arguments: StoreKind.all)
    func oldTombstonesArePurgedAndRaiseTheHistoryFloor(kind: StoreKind) throws {
        // Without history: what only a replaced version named is named by nothing.
        try withStore(kind, policy: StorePolicy(keepsHistory: false)) { store in
            var big = Record(path: "A/big", type: "keep-both", size: 5, sha256: Digest.sha256Hex(Array("asset".utf8)), device: "laptop")
            big.asset = Asset(id: "0123456789abcdef0123456789abcdef", size: 5, sha256: big.sha256)
            let saved = try store.modify(user: "u", items: checked([fileRecord("A/1", "one"), fileRecord("A/2", "two"), big])).compactMap(savedTag)
            #expect(try store.assetIDs() == ["0123456789abcdef0123456789abcdef"])
            let gone = try store.modify(user: "u", items: checked([tombstone("A/1", baseTag: saved[0]), tombstone("A/big", baseTag: saved[2])]))
                .compactMap(savedTag)
            _ = try store.modify(user: "v", items: checked([tombstone("B/never", baseTag: 0)]))
            // A tombstone names no blob: the big file's may go.
            #expect(try store.assetIDs().isEmpty)
            // Nothing is older than a cutoff in the past.
            #expect(try store.sweepTombstones(savedBefore: 0, limit: 10) == TombstoneSweep(removed: 0, floor: 0, more: false))
            #expect(try store.historyFloor() == 0)
            // In slices: two, then the last one.
            let later = Clock.now() + 1_000_000_000
            let first = try store.sweepTombstones(savedBefore: later, limit: 2)
            #expect(first.removed == 2 && first.more)
            let second = try store.sweepTombstones(savedBefore: later, limit: 2)
            #expect(second.removed == 1 && !second.more)
            let floor = try store.historyFloor()
            #expect(floor == second.floor && floor >= gone.max()!)
            // Live records stay; the feed no longer holds the tombstones.
            let feed = try store.changes(user: "u", after: 0, limit: unlimited).records.map(\.path)
            #expect(feed == ["A/2"])
            #expect(try store.changes(user: "v", after: 0, limit: unlimited).records.isEmpty)
            #expect(try store.sweepTombstones(savedBefore: later, limit: 2) == TombstoneSweep(removed: 0, floor: floor, more: false))
            // A path whose tombstone went is new again: based on nothing.
            #expect(try store.modify(user: "u", items: checked([fileRecord("A/1", "back")])).compactMap(savedTag).count == 1)
        }
    }

    @Test(arguments: StoreKind.all)
    func aFeedNarrowedToAPrefixHoldsOnlyItAndResumesAfterItsOwnLastRecord(kind: StoreKind) throws {
        try withStore(kind) { store in
            _ = try store.modify(user: "u", items: checked([fileRecord("S/a/1", "1"), fileRecord("S/b", "2"), fileRecord("S/ab", "3"),
                                                            fileRecord("S/a", "4"), fileRecord("T/a/5", "5")]))
            _ = try store.modify(user: "v", items: checked([fileRecord("S/a/6", "6")]))
            let page = try store.changes(user: "u", after: 0, limit: unlimited, within: "S/a")
            #expect(page.records.map(\.path) == ["S/a/1", "S/a"])
            #expect(page.lastTag == page.records.last?.changeTag && !page.more)
            let none = try store.changes(user: "u", after: page.lastTag, limit: unlimited, within: "S/a")
            #expect(none.records.isEmpty && none.lastTag == page.lastTag)
            let one = try store.changes(user: "u", after: 0, limit: PageLimit(records: 1, dataBytes: 1 << 20), within: "S/a")
            #expect(one.records.map(\.path) == ["S/a/1"] && one.more)
            #expect(try store.changes(user: "u", after: 0, limit: unlimited, within: nil).records.count == 5)
        }
    }

    @Test(arguments: StoreKind.all)
    func whetherARecordWithinAPrefixNamesAnAsset(kind: StoreKind) throws {
        // Without history: what only a replaced version named is named by nothing.
        try withStore(kind, policy: StorePolicy(keepsHistory: false)) { store in
            let bytes = Array("asset".utf8)
            let sha = Digest.sha256Hex(bytes)
            let record = Record(path: "S/a/big", asset: Asset(id: "abc", size: 5, sha256: sha), size: 5, sha256: sha, device: "d")
            let saved = try store.modify(user: "u", items: checked([record]))
            #expect(try store.namesAsset(user: "u", assetID: "abc", within: "S/a"))
            #expect(try store.namesAsset(user: "u", assetID: "abc", within: "S"))
            #expect(try !store.namesAsset(user: "u", assetID: "abc", within: "S/b"))
            #expect(try !store.namesAsset(user: "v", assetID: "abc", within: "S"))
            #expect(try !store.namesAsset(user: "u", assetID: "other", within: "S"))
            // A tombstone names nothing.
            _ = try store.modify(user: "u", items: checked([tombstone("S/a/big", baseTag: savedTag(saved[0])!)]))
            #expect(try !store.namesAsset(user: "u", assetID: "abc", within: "S"))
        }
    }

    @Test(arguments: StoreKind.all)
    func manifestsComeBackThroughTheFeedTheLookUpAConflictAndAMove(kind: StoreKind) throws {
        try withStore(kind) { store in
            let file = ChunkedFile.random([300_000, 1000, 4_194_304])
            let saved = try store.modify(user: "u", items: checked([file.record("A/big"), fileRecord("A/small", "inline")]))
            guard case let .saved(record) = saved[0] else { Issue.record("expected saved, got \(saved[0])"); return }
            #expect(record.asset == file.asset && record.asset?.chunks?.count == 3)
            #expect(try store.changes(user: "u", after: 0, limit: unlimited).records.map(\.asset) == [file.asset, nil])
            #expect(try store.changes(user: "u", after: 0, limit: unlimited, within: "A").records.first?.asset == file.asset)
            for includeData in [false, true] {
                let listed = try store.records(user: "u", prefix: "A", after: nil, limit: unlimited, includeData: includeData).records
                #expect(listed.map(\.asset) == [file.asset, nil])
            }
            let stale = try store.modify(user: "u", items: checked([fileRecord("A/big", "edit of nothing")]))
            #expect(stale == [.conflict(record)])
            // A move copies the manifest, never content.
            let move = Record(path: "A/moved", size: file.size, sha256: file.hash, device: "laptop", movedFrom: "A/big")
            let moved = try store.modify(user: "u", items: checked([move, tombstone("A/big", baseTag: record.changeTag)]))
            guard case let .saved(copy) = moved[0] else { Issue.record("expected saved, got \(moved[0])"); return }
            #expect(copy.asset == file.asset && copy.data == nil)
            let small = try #require(savedTag(saved[1]))
            #expect(try store.changes(user: "u", after: small, limit: unlimited).records.map(\.asset) == [file.asset, nil])
            // An upload asset keeps its old form.
            let upload = Asset(id: "0123456789abcdef0123456789abcdef", size: 5, sha256: Digest.sha256Hex(Array("asset".utf8)))
            _ = try store.modify(user: "u", items: checked([Record(path: "A/upload", asset: upload, size: 5, sha256: upload.sha256, device: "d")]))
            #expect(try store.records(user: "u", prefix: "A/upload", after: nil, limit: unlimited, includeData: false).records.first?.asset == upload)
            #expect(try store.assetIDs() == [upload.id])
        }
    }

    @Test(arguments: StoreKind.all)
    func aPageOfManifestsStopsAtTheDataLimitLikeOneOfInlineContent(kind: StoreKind) throws {
        try withStore(kind) { store in
            // 100 chunks each: 3,600 bytes of manifest a record.
            let files = (0..<5).map { index in ChunkedFile(chunks: (0..<100).map { [UInt8(index), UInt8($0)] }) }
            _ = try store.modify(user: "u", items: checked(files.enumerated().map { $0.element.record("A/\($0.offset)") }))
            let page = try store.changes(user: "u", after: 0, limit: PageLimit(records: 100, dataBytes: 7_000))
            #expect(page.records.count == 2 && page.more)
        }
    }

    @Test(arguments: StoreKind.all)
    func chunkReferencesAreWhatLiveRecordsNameAndAManifestIsFoundByItsHash(kind: StoreKind) throws {
        // Without history: what only a replaced version named is named by nothing.
        try withStore(kind, policy: StorePolicy(keepsHistory: false)) { store in
            let a = ChunkedFile.random([300, 200]), b = ChunkedFile.random([100]), c = ChunkedFile.random([50]), d = ChunkedFile.random([60])
            let first = try store.modify(user: "u", items: checked([a.record("S/a"), b.record("T/b"), fileRecord("S/inline", "x")]))
            _ = try store.modify(user: "v", items: checked([c.record("S/c")]))
            let all = try store.chunkReferences(user: "u", after: 0)
            #expect(all.names == Set(a.names + b.names))
            let tags = first.compactMap(savedTag)
            #expect(all.head == tags.max())
            // Records changed since: only their chunks; a tombstone names none.
            let later = try store.modify(user: "u", items: checked([tombstone("T/b", baseTag: tags[1]), d.record("S/d")])).compactMap(savedTag)
            let since = try store.chunkReferences(user: "u", after: all.head)
            #expect(since.names == Set(d.names) && since.head == later.max())
            #expect(try store.chunkReferences(user: "u", after: 0).names == Set(a.names + d.names))
            #expect(try store.chunkReferences(user: "v", after: 0).names == Set(c.names))
            #expect(try store.chunkReferences(user: "w", after: 0) == ChunkReferences(names: [], head: 0))
            #expect(try store.chunkReferences(user: "u", after: since.head) == ChunkReferences(names: [], head: since.head))

            #expect(try store.manifest(user: "u", assetID: a.hash, within: nil) == a.refs)
            #expect(try store.manifest(user: "u", assetID: a.hash, within: "S") == a.refs)
            #expect(try store.manifest(user: "u", assetID: a.hash, within: "T") == nil)
            #expect(try store.manifest(user: "v", assetID: a.hash, within: nil) == nil)
            #expect(try store.manifest(user: "u", assetID: b.hash, within: nil) == nil)
            #expect(try store.namesAsset(user: "u", assetID: a.hash, within: "S"))
        }
    }

    @Test(arguments: StoreKind.all)
    func aFolderDigestCountsTheLiveRecordsBelowItAndItsHeadEverySave(kind: StoreKind) throws {
        try withStore(kind) { store in
            let nothing = DigestReply(folder: .empty("A"), children: [])
            #expect(try store.digests(user: "u", folder: "A", children: true) == nothing)
            let saved = try store.modify(user: "u", items: checked([fileRecord("A/b.txt", "abc"), fileRecord("A/sub/c", "c"),
                                                                    fileRecord("B/d", "d")])).compactMap(savedTag)
            let b = TreeDigest.entry(path: "A/b.txt", contentID: Digest.sha256Hex(Array("abc".utf8)))
            let c = TreeDigest.entry(path: "A/sub/c", contentID: Digest.sha256Hex(Array("c".utf8)))
            #expect(try store.digests(user: "u", folder: "A", children: true) == DigestReply(
                folder: FolderDigest(path: "A", digest: (b ^ c).hex, direct: b.hex, head: saved[1]),
                children: [FolderDigest(path: "A/sub", digest: c.hex, direct: c.hex, head: saved[1])]))
            #expect(try store.digests(user: "u", folder: "A/sub", children: false)
                    == DigestReply(folder: FolderDigest(path: "A/sub", digest: c.hex, direct: c.hex, head: saved[1])))
            // A delete takes its entry out and raises the head; the emptied folder keeps its row.
            let deleted = try #require(savedTag(try store.modify(user: "u", items: checked([tombstone("A/sub/c", baseTag: saved[1])]))[0]))
            let afterDelete = DigestReply(folder: FolderDigest(path: "A", digest: b.hex, direct: b.hex, head: deleted),
                                          children: [FolderDigest(path: "A/sub", digest: TreeDigest.empty.hex, direct: TreeDigest.empty.hex, head: deleted)])
            #expect(try store.digests(user: "u", folder: "A", children: true) == afterDelete)
            // A conflict changes nothing; nor does purging the tombstone: the head is never lowered.
            _ = try store.modify(user: "u", items: checked([fileRecord("A/b.txt", "stale", baseTag: saved[0] + 100)]))
            #expect(try store.sweepTombstones(savedBefore: Clock.now() + 1_000_000_000, limit: 10).removed == 1)
            #expect(try store.digests(user: "u", folder: "A", children: true) == afterDelete)
            // Another user's records count for nothing here, and a folder that never held one is empty.
            _ = try store.modify(user: "v", items: checked([fileRecord("A/sub/c", "c"), fileRecord("A/b.txt", "abc")]))
            #expect(try store.digests(user: "u", folder: "A", children: true) == afterDelete)
            #expect(try store.digests(user: "u", folder: "A/b.txt", children: true) == DigestReply(folder: .empty("A/b.txt"), children: []))
            #expect(try store.digests(user: "w", folder: "A", children: true) == nothing)
        }
    }

    @Test(arguments: StoreKind.all)
    func folderDigestsAfterRandomBatchesEqualThoseComputedFromTheRecords(kind: StoreKind) throws {
        try withStore(kind) { store in
            let seed: UInt64 = 0x5EED_0021_D16E_0001
            var workload = DigestWorkload(seed: seed)
            var seen: [String: Int] = [:]
            for round in 0..<40 {
                let (user, items) = try workload.batch(from: store)
                let outcomes = try store.modify(user: user, items: checked(items))
                for (item, outcome) in zip(items, outcomes) {
                    switch outcome {
                    case .saved: seen[item.movedFrom != nil ? "move" : item.deleted ? "delete" : item.type == "dir" ? "folder" : "save", default: 0] += 1
                    case .conflict: seen["conflict", default: 0] += 1
                    case .refused: seen["refused", default: 0] += 1
                    }
                }
                for user in DigestWorkload.users {
                    try expectStoredDigestsMatchRecords(store, user: user, "seed \(seed), batch \(round):")
                }
            }
            // The seed exercises every kind of change.
            #expect(["save", "delete", "folder", "move", "conflict", "refused"].allSatisfy { seen[$0, default: 0] > 0 }, "\(seen)")
        }
    }

    @Test(arguments: StoreKind.all)
    func aDatabaseFromBeforeDigestsGetsThemComputedFromItsRecords(kind: StoreKind) throws {
        let made = try kind.make()
        defer { withExtendedLifetime(made.keepAlive) {} }
        var workload = DigestWorkload(seed: 0x5EED_0021_D16E_0002)
        for _ in 0..<25 {
            let (user, items) = try workload.batch(from: made.store)
            _ = try made.store.modify(user: user, items: checked(items))
        }
        let before = try DigestWorkload.users.map { try storedDigests(made.store, user: $0) }
        #expect(before.allSatisfy { !$0.isEmpty })
        made.store.close()
        try made.forgetDigests()
        let reopened = try made.reopen()
        defer { reopened.close() }
        #expect(try DigestWorkload.users.map { try storedDigests(reopened, user: $0) } == before)
        for user in DigestWorkload.users { try expectStoredDigestsMatchRecords(reopened, user: user, "after the upgrade:") }
        // The usage of schema 5, counted from the records.
        for user in DigestWorkload.users {
            let expected = try expectedUsage(reopened, user: user)
            #expect(try reopened.usage(user: user) == StorageFigures(liveBytes: expected.live, historyBytes: 0, quotaBytes: nil) && expected.history == 0)
        }
        // And kept from there on.
        _ = try reopened.modify(user: "alice", items: checked([fileRecord("A/after/upgrade", "x")]))
        try expectStoredDigestsMatchRecords(reopened, user: "alice", "a save after the upgrade:")
    }

    @Test(arguments: StoreKind.all)
    func removingAUserRemovesTheirDigests(kind: StoreKind) throws {
        try withStore(kind) { store in
            for user in ["u", "v"] {
                _ = try store.addUser(user, at: Clock.now())
                _ = try store.modify(user: user, items: checked([fileRecord("A/x/1", "1")]))
            }
            try store.removeUser("u")
            #expect(try store.digests(user: "u", folder: "A", children: true) == DigestReply(folder: .empty("A"), children: []))
            try expectStoredDigestsMatchRecords(store, user: "v", "the user kept:")
            #expect(try store.digests(user: "v", folder: "A", children: false).folder.head > 0)
        }
    }

    @Test(arguments: StoreKind.all)
    func callsAfterCloseThrow(kind: StoreKind) throws {
        let made = try kind.make()
        defer { withExtendedLifetime(made.keepAlive) {} }
        made.store.close()
        #expect(throws: (any Error).self) { try made.store.changes(user: "u", after: 0, limit: unlimited) }
        #expect(throws: (any Error).self) { try made.store.modify(user: "u", items: checked([fileRecord("A/x", "x")])) }
    }
}
