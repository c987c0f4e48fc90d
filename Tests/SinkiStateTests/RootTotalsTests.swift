import SinkiRecord
import SinkiState
import SinkiSupport
import SinkiTestSupport
import Testing

/// `sinkid status`'s counts come from counters the database keeps in step with every write; they
/// must always equal a count of the tables themselves.
@Suite struct RootTotalsTests {
    /// The counts walked from the tables, as status used to read them.
    func counted(_ store: StateStore, _ root: String) throws -> [Int64] {
        let range = [root + "/", root + "0"]
        let files = try store.database.scalar("SELECT count(*) FROM files WHERE present = 1 AND kind != 1 AND path >= ? AND path < ?", range[0], range[1]) ?? -1
        let bytes = try store.database.scalar("SELECT coalesce(sum(size), 0) FROM files WHERE present = 1 AND kind != 1 AND path >= ? AND path < ?", range[0], range[1]) ?? -1
        let outbox = try store.database.scalar("SELECT count(*) FROM outbox WHERE path >= ? AND path < ?", range[0], range[1]) ?? -1
        let refused = try store.database.scalar("SELECT count(*) FROM outbox WHERE last_error IS NOT NULL AND path >= ? AND path < ?", range[0], range[1]) ?? -1
        return [files, bytes, outbox, refused]
    }

    func kept(_ store: StateStore, _ root: String) throws -> [Int64] {
        let totals = try store.totals(root: root)
        let byRoot = try StatusQueries.pendingByRoot(store.database)[root] ?? 0
        let refused = try store.database.scalar("SELECT refused FROM root_totals WHERE root = ?", root) ?? 0
        return [Int64(totals.files), totals.bytes, Int64(byRoot), refused]
    }

    @Test func countersFollowEveryKindOfWrite() throws {
        let directory = TemporaryDirectory("sinki-root-totals")
        let store = try StateStore(path: directory.child("state.db"))
        var random = SeededRandom(seed: 15)
        let roots = ["Saves", "Photos"]
        for step in 0..<2_000 {
            let root = roots[random.below(2)]
            let path = "\(root)/d\(random.below(5))/f\(random.below(40))"
            switch random.below(6) {
            case 0, 1:
                let kind: RecordKind = random.below(5) == 0 ? .directory : .file
                try store.saveFile(KnownFile(path: path, kind: kind, present: random.below(4) != 0, size: Int64(random.below(10_000))))
            case 2: try store.removeFile(path)
            case 3: try store.enqueue(path, now: Int64(step))
            case 4: try store.refuse(path, reason: "refused \(step)")
            default: try store.dequeue(path)
            }
            if step % 100 == 0 {
                for root in roots { #expect(try kept(store, root) == counted(store, root), "after step \(step)") }
            }
        }
        for root in roots { #expect(try kept(store, root) == counted(store, root)) }
        let counts = try StatusQueries.counts(store.database)
        #expect(Int64(counts.pending) == (try store.database.scalar("SELECT count(*) FROM outbox")))
        #expect(Int64(counts.refused) == (try store.database.scalar("SELECT count(last_error) FROM outbox")))
    }

    @Test func aDatabaseWithoutCountersIsCountedOnceWhenOpened() throws {
        let directory = TemporaryDirectory("sinki-root-totals-fill")
        let path = directory.child("state.db")
        do {
            let store = try StateStore(path: path)
            for index in 0..<50 { try store.saveFile(KnownFile(path: "Saves/f\(index)", kind: .file, present: true, size: 10)) }
            try store.enqueue("Saves/f1")
            try store.refuse("Saves/f1", reason: "no")
            // As a sinkid before the counters left it.
            try store.database.execute("""
                DROP TRIGGER root_totals_file_added; DROP TRIGGER root_totals_file_removed; DROP TRIGGER root_totals_file_changed;
                DROP TRIGGER root_totals_queued; DROP TRIGGER root_totals_dequeued; DROP TRIGGER root_totals_refusal;
                DROP TABLE root_totals; PRAGMA user_version = 6
                """)
        }
        let store = try StateStore(path: path)
        #expect(try kept(store, "Saves") == [50, 500, 1, 1])
        #expect(try StatusQueries.rootNames(store.database) == ["Saves"])
    }
}
