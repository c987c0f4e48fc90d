import SinkiRecord
import SinkiSupport
import SinkiTestSupport
import Testing
@testable import SinkiState

/// The `tree` table and what SQLite keeps in step with it: the work indexes hold exactly the paths
/// where the three trees differ, and `root_totals` counts what the rows say, after any mix of writes.
@Suite struct TreeStoreTests {
    /// What the work indexes must hold, worked out from the rows themselves.
    private func differs(_ row: TreeRow) -> Bool {
        let syncedTag = row.synced?.tag ?? 0, syncedKind = row.synced?.kind, syncedHash = row.synced?.hash ?? ""
        let syncedPerm = row.synced?.perm ?? 0, syncedXattrs = row.synced?.xattrs ?? ""
        let local = !(row.local?.kind == syncedKind && (row.local?.hash ?? "") == syncedHash && (row.local?.perm ?? 0) == syncedPerm
            && (row.local?.xattrs ?? "") == syncedXattrs)
        let remote = !((row.remote?.tag ?? 0) == syncedTag && row.remote?.kind == syncedKind && (row.remote?.hash ?? "") == syncedHash
            && (row.remote?.perm ?? 0) == syncedPerm && (row.remote?.xattrDigest ?? "") == syncedXattrs)
        return local || remote
    }

    private func allWork(_ store: StateStore) throws -> [String] {
        var out: [String] = [], cursor = ""
        while true {
            let page = try store.workPage(after: cursor, limit: 7)
            guard let last = page.last else { return out }
            out += page
            cursor = last
        }
    }

    /// A push's saves are recorded in one row write each (`observeSaved`, issue 22 item 4): the rows
    /// and the folder digests must be exactly what observing each save and then agreeing on it gave,
    /// also where the feed brought the save, or a newer version, before its answer.
    @Test func savesRecordedTogetherLeaveWhatOneByOneLeft() throws {
        let directory = TemporaryDirectory("sinki-tree-saved")
        let together = try StateStore(path: directory.child("together.db"))
        let oneByOne = try StateStore(path: directory.child("one-by-one.db"))
        let names = ["a", "a/b", "a/b/c", "a/d", "e", "e/f/g", "h"]
        var generator = SeededRandom(seed: 22)
        var tag: Int64 = 0
        for round in 1...300 {
            var batch: [(path: String, facts: RemoteFacts)] = []
            for name in names where generator.below(2) == 0 {
                tag += 1
                let kind: RecordKind? = [RecordKind.file, .directory, nil][generator.below(3)]
                let facts = RemoteFacts(tag: tag, kind: kind, hash: kind == .file ? "h\(generator.below(4))" : "", size: 9)
                batch.append(("R/" + name, facts))
                // Sometimes the feed was first: with this very save, or with a newer version.
                if generator.below(4) == 0 {
                    let first = generator.below(2) == 0 ? facts : RemoteFacts(tag: tag + 1, kind: .file, hash: "newer", size: 5)
                    if first.tag > tag { tag += 1 }
                    for store in [together, oneByOne] { try store.observeRemote([("R/" + name, first)]) }
                }
            }
            try together.transaction { try together.observeSaved(batch) }
            try oneByOne.transaction {
                for (path, facts) in batch {
                    try oneByOne.observeRemote([(path, facts)])
                    try oneByOne.setSynced(path, SyncedFacts(facts))
                }
            }
            for name in names {
                #expect(try together.row("R/" + name) == oneByOne.row("R/" + name), "R/\(name) after round \(round)")
            }
            for folder in ["R", "R/a", "R/a/b", "R/e", "R/e/f"] {
                #expect(try together.remoteFolder(folder) == oneByOne.remoteFolder(folder), "\(folder) after round \(round)")
            }
        }
    }

    @Test func theWorkIndexesHoldExactlyThePathsWhereTheTreesDiffer() throws {
        let directory = TemporaryDirectory("sinki-tree-store")
        let store = try StateStore(path: directory.child("state.db"))
        // NFC and NFD spellings are two paths; so are names that sort around '/'.
        let names = ["a", "a/b", "a/b/c", "a.txt", "a0", "caf\u{E9}", "cafe\u{301}", "z/y", "z/y/x", "m"]
        let kinds: [RecordKind?] = [.file, .directory, .symlink, nil]
        let hashes = ["", "h1", "h2"]
        // A file's kept mode is part of what it is: a chmod alone is work (issue 25).
        let perms: [UInt32] = [0o644, 0o755]
        // So are its extended attributes: a setfattr alone is work too (issue 25, item 2).
        let xattrSets = [ExtendedAttributes.none, ExtendedAttributes([.init(name: "user.test", value: [1])])]
        var generator = SeededRandom(seed: 21)
        var tag: Int64 = 0
        for step in 1...3000 {
            let path = "R/" + names[generator.below(names.count)]
            let kind = kinds[generator.below(kinds.count)]
            let hash = kind == .directory || kind == nil ? "" : hashes[generator.below(hashes.count)]
            let perm = perms[generator.below(perms.count)]
            let xattrs = xattrSets[generator.below(xattrSets.count)]
            switch generator.below(3) {
            case 0:
                try store.setLocal(path, kind.map {
                    LocalFacts(kind: $0, hash: hash, size: Int64(hash.count), perm: perm, xattrs: XattrSet.digest(xattrs))
                })
            case 1:
                tag += 1
                try store.observeRemote([(path, RemoteFacts(tag: tag, kind: kind, hash: hash, size: Int64(hash.count) * 1000 + 7, perm: perm,
                                                            xattrs: xattrs))])
                // The record's set itself comes back with Remote (a file's only), to be written and carried.
                #expect(try store.row(path)?.remote?.xattrs == (kind == .file ? xattrs : .none))
            default:
                let row = try store.rowOrEmpty(path)
                // Agreeing on what Remote holds, or on nothing.
                try store.setSynced(path, generator.below(2) == 0 ? row.remote.map(SyncedFacts.init) : nil)
            }
            guard step % 50 == 0 else { continue }
            let rows = try store.rows(root: "R", after: "", through: nil)
            let expected = rows.filter(differs).map(\.path)
            #expect(try allWork(store).map { Array($0.utf8) } == expected.map { Array($0.utf8) }, "after step \(step)")
            #expect(store.hasWork == !expected.isEmpty)
            #expect(try store.hasWork(under: "R/a") == expected.contains { $0 == "R/a" || $0.hasPrefix("R/a/") })
            let files = rows.filter { $0.local != nil && $0.local?.kind != .directory }
            let totals = try store.totals(root: "R")
            #expect(totals.files == files.count && totals.bytes == files.reduce(0) { $0 + $1.local!.size }, "after step \(step)")
            // The bytes still to bring (issue 25, item 7): remote files where Remote differs, with content not on disk.
            let bringing = rows.filter { row in
                guard let remote = row.remote, remote.kind == .file, remote.hash != (row.local?.hash ?? "") else { return false }
                let synced = row.synced
                return !(remote.tag == (synced?.tag ?? 0) && remote.kind == synced?.kind && remote.hash == (synced?.hash ?? "")
                    && remote.perm == (synced?.perm ?? 0) && remote.xattrDigest == (synced?.xattrs ?? ""))
            }
            #expect(try StatusQueries.remoteBytes(store.database) == bringing.reduce(0) { $0 + $1.remote!.size }, "after step \(step)")
        }
    }

    @Test func aPathIsAKeyByItsBytes() {
        var set = PathSet()
        #expect(set.insert("R/caf\u{E9}").inserted)
        #expect(set.insert("R/cafe\u{301}").inserted, "Swift's String would call these one")
        #expect(!set.insert("R/caf\u{E9}").inserted)
        #expect(set.count == 2)
        set.remove("R/caf\u{E9}")
        #expect(set.contains("R/cafe\u{301}") && !set.contains("R/caf\u{E9}"))
    }
}

/// Schema 12: the Remote tree keeps whether the server lacked chunks of its version (issue 24 item 2),
/// written and read with the rest of Remote; a schema 11 database gains the column in place.
@Suite struct IncompleteRemoteTests {
    @Test func theRemoteTreeKeepsIncompleteAndASchemaElevenDatabaseUpgrades() throws {
        let directory = TemporaryDirectory("sinki-tree-incomplete")
        let path = directory.child("state.db")
        do {
            let store = try StateStore(path: path)
            var record = Record(path: "R/big.bin", asset: Asset(manifestHash: String(repeating: "a", count: 64), chunks: []),
                                changeTag: 7, size: 300_000, sha256: String(repeating: "a", count: 64))
            record.incomplete = true
            try store.transaction { _ = try store.observeRemote([("R/big.bin", RemoteFacts(record))]) }
            #expect(try store.row("R/big.bin")?.remote?.incomplete == true)
            let entries = try #require(try store.row("R/big.bin")).planEntries(at: try RecordPath(validating: "R/big.bin"))
            #expect(entries.remote?.incomplete == true)
            record.incomplete = false
            record.changeTag = 8
            try store.transaction { _ = try store.observeRemote([("R/big.bin", RemoteFacts(record))]) }
            #expect(try store.row("R/big.bin")?.remote?.incomplete == false)
            // As schema 11 left it: no column (nor what schema 13 added).
            try store.database.execute(OldStateSchemas.thirteen + "ALTER TABLE tree DROP COLUMN r_incomplete; PRAGMA user_version = 11;")
        }
        let upgraded = try StateStore(path: path)
        #expect(upgraded.database.userVersion == StateStore.schemaVersion)
        #expect(try upgraded.row("R/big.bin")?.remote?.tag == 8)
        #expect(try upgraded.row("R/big.bin")?.remote?.incomplete == false)
    }
}
