import SinkiRecord
import SinkiSupport

/// Every version kept, and each user's usage (schema 5; `VersionStore`, docs/server.md, "History"):
/// - `versions`: the records a save replaced, with the columns of `records` and `superseded_at` (when it
///   was replaced, the server's clock); found by path (`versions_path`), by tag for garbage collection
///   (`versions_feed`) and by age for expiry (`versions_expiry`).
/// - `chunk_refs(user, chunk, size, live, kept)`: how many current records and kept versions of the user
///   name each chunk, so that a chunk counts once in the usage however many versions share it.
/// - `usage(user, live_bytes, history_bytes)`: kept by `UsageLedger` in every write transaction.
/// - `users.quota`: bytes, NULL for none.
extension SQLiteRecordStore {
    static let historySchema = """
        CREATE TABLE versions (
            change_tag INTEGER PRIMARY KEY,
            user TEXT NOT NULL,
            path TEXT NOT NULL,
            type TEXT NOT NULL,
            asset_id TEXT,
            asset_size INTEGER,
            asset_sha256 TEXT,
            deleted INTEGER NOT NULL,
            base_tag INTEGER NOT NULL,
            size INTEGER NOT NULL,
            sha256 TEXT NOT NULL,
            mode INTEGER NOT NULL,
            modified_at INTEGER NOT NULL,
            device TEXT NOT NULL,
            saved_at INTEGER NOT NULL,
            moved_from TEXT,
            superseded_at INTEGER NOT NULL,
            asset_chunks BLOB,
            data BLOB
        );
        CREATE INDEX versions_path ON versions(user, path, change_tag);
        CREATE INDEX versions_feed ON versions(user, change_tag);
        CREATE INDEX versions_expiry ON versions(superseded_at);
        CREATE TABLE chunk_refs (
            user TEXT NOT NULL, chunk TEXT NOT NULL, size INTEGER NOT NULL, live INTEGER NOT NULL, kept INTEGER NOT NULL,
            PRIMARY KEY (user, chunk)
        ) WITHOUT ROWID;
        CREATE TABLE usage (user TEXT PRIMARY KEY, live_bytes INTEGER NOT NULL, history_bytes INTEGER NOT NULL) WITHOUT ROWID;
        ALTER TABLE users ADD COLUMN quota INTEGER;
        """

    /// What the records of a database from before history hold, counted into `usage` and `chunk_refs`.
    static func rebuildUsage(_ db: SQLiteDatabase) throws {
        var ledgers: [String: UsageLedger] = [:]
        try db.query("""
            SELECT user, path, length(data), CASE WHEN asset_chunks IS NULL THEN coalesce(asset_size, 0) ELSE 0 END, asset_chunks
            FROM records WHERE deleted = 0
            """) { row in
            let chunks = try row.optionalBlob(4).map { try Asset.chunks(stored: $0, path: row.text(1)) } ?? []
            ledgers[row.text(0), default: UsageLedger()].count(StoredContent(inlineBytes: row.int64(2), blobBytes: row.int64(3), chunks: chunks),
                                                               live: 1, kept: 0)
        }
        for (user, ledger) in ledgers { _ = try ledger.commit(in: UsageSQL(db: db, user: user, defaultQuota: nil)) }
    }

    /// `UsageTransaction` in SQLite, for one user inside the writer's transaction.
    struct UsageSQL: UsageTransaction {
        let db: SQLiteDatabase
        let user: String
        let defaultQuota: Int64?

        func countChunks(_ changes: [ChunkCountChange]) throws -> [ChunkCounts] {
            // One statement for the whole list (a version of a 1 GiB file names about a thousand chunks):
            // a row per chunk from a JSON array, each upserted, the counts after returned with the name.
            var list = JSONWriter(capacity: changes.count * 96)
            list.beginArray()
            for change in changes {
                list.beginArray()
                list.string(change.name)
                list.int(change.size)
                list.int(change.live)
                list.int(change.kept)
                list.endArray()
            }
            list.endArray()
            var counts: [String: ChunkCounts] = [:]
            counts.reserveCapacity(changes.count)
            try db.query("""
                INSERT INTO chunk_refs(user, chunk, size, live, kept)
                SELECT ?1, value ->> 0, value ->> 1, value ->> 2, value ->> 3 FROM json_each(?2) WHERE true
                ON CONFLICT(user, chunk) DO UPDATE SET live = max(0, live + excluded.live), kept = max(0, kept + excluded.kept)
                RETURNING chunk, live, kept
                """, user, String(decoding: list.bytes, as: UTF8.self)) { row in
                counts[row.text(0)] = ChunkCounts(live: row.int64(1), kept: row.int64(2))
            }
            // A chunk no current record nor kept version names any more is forgotten (a count gone wrong
            // below zero, too).
            let forgotten = counts.filter { $0.value.live <= 0 && $0.value.kept <= 0 }.map(\.key)
            if !forgotten.isEmpty {
                let delete = try db.prepare("DELETE FROM chunk_refs WHERE user = ? AND chunk = ?")
                for name in forgotten {
                    try delete.bind([user, name])
                    while try delete.step() {}
                    delete.reset()
                }
            }
            return changes.map { counts[$0.name] ?? ChunkCounts(live: 0, kept: 0) }
        }

        func addUsage(liveBytes: Int64, historyBytes: Int64) throws -> StorageFigures {
            var figures = StorageFigures(liveBytes: 0, historyBytes: 0, quotaBytes: nil)
            try db.query("""
                INSERT INTO usage(user, live_bytes, history_bytes) VALUES (?1, ?2, ?3)
                ON CONFLICT(user) DO UPDATE SET live_bytes = live_bytes + excluded.live_bytes, history_bytes = history_bytes + excluded.history_bytes
                RETURNING live_bytes, history_bytes, coalesce((SELECT quota FROM users WHERE name = ?1), ?4)
                """, user, liveBytes, historyBytes, defaultQuota) { row in
                figures = StorageFigures(liveBytes: row.int64(0), historyBytes: row.int64(1), quotaBytes: row.optionalInt64(2))
            }
            return figures
        }
    }

    // MARK: Reading versions

    /// A version's columns: a record's (`columns`), then its data (or NULL), `saved_at`, `superseded_at`.
    static func versionColumns(table: String, data: Bool, chunks: Bool) -> String {
        let record = chunks ? columns : columns.replacingOccurrences(of: "asset_chunks", with: "NULL")
        return record + (data ? ", data" : ", NULL") + ", saved_at, " + (table == "records" ? "NULL" : "superseded_at")
    }

    static func versionEntry(from row: Statement, hasData: Bool) throws -> VersionEntry {
        VersionEntry(record: try record(from: row, hasData: hasData), savedAt: row.int64(17), supersededAt: row.optionalInt64(18))
    }

    /// The bytewise range of `prefix` and everything below it, as the look-ups say it; parameters
    /// `first`, `first + 1`, `first + 2`.
    static func within(_ first: Int) -> String {
        "path >= ?\(first) AND path < ?\(first + 1) AND (path = ?\(first) OR path >= ?\(first + 2))"
    }

    static func range(_ prefix: String) -> [any SQLBindable] { [prefix, prefix + "0", prefix + "/"] }

    static func versions(_ db: SQLiteDatabase, user: String, path: String, before: Int64?, limit: Int) throws -> VersionList {
        let statement = try db.prepare("""
            SELECT \(versionColumns(table: "records", data: false, chunks: false)) FROM records WHERE user = ?1 AND path = ?2 AND change_tag < ?3
            UNION ALL
            SELECT \(versionColumns(table: "versions", data: false, chunks: false)) FROM versions WHERE user = ?1 AND path = ?2 AND change_tag < ?3
            ORDER BY 1 DESC LIMIT ?4
            """)
        defer { statement.reset() }
        try statement.bind([user, path, before ?? Int64.max, limit + 1])
        var out: [VersionEntry] = []
        while try statement.step() {
            if out.count == limit { return VersionList(versions: out, more: true) }
            out.append(try versionEntry(from: statement, hasData: false))
        }
        return VersionList(versions: out, more: false)
    }

    static func version(_ db: SQLiteDatabase, user: String, path: String, version: Int64) throws -> VersionEntry? {
        var found: VersionEntry?
        try db.query("""
            SELECT \(versionColumns(table: "records", data: true, chunks: true)) FROM records WHERE change_tag = ?1 AND user = ?2 AND path = ?3
            UNION ALL
            SELECT \(versionColumns(table: "versions", data: true, chunks: true)) FROM versions WHERE change_tag = ?1 AND user = ?2 AND path = ?3
            """, version, user, path) { found = try versionEntry(from: $0, hasData: true) }
        return found
    }

    /// The live version of each path at or below `prefix` at `at`, by path after `after`; of two a wrong
    /// clock made overlap, the later.
    static func held(_ db: SQLiteDatabase, user: String, prefix: String, at: Int64, after: String?, limit: Int?) throws -> VersionList {
        let statement = try db.prepare("""
            SELECT \(versionColumns(table: "records", data: false, chunks: false)) FROM records
            WHERE user = ?1 AND \(within(2)) AND path > ?5 AND saved_at <= ?6 AND deleted = 0
            UNION ALL
            SELECT \(versionColumns(table: "versions", data: false, chunks: false)) FROM versions
            WHERE user = ?1 AND \(within(2)) AND path > ?5 AND saved_at <= ?6 AND superseded_at > ?6 AND deleted = 0
            ORDER BY 2, 1 DESC LIMIT ?7
            """)
        defer { statement.reset() }
        try statement.bind([user] + range(prefix) + [after ?? "", at, limit.map { $0 + 1 } ?? -1])
        var out: [VersionEntry] = []
        while try statement.step() {
            let entry = try versionEntry(from: statement, hasData: false)
            if let last = out.last, last.record.path.utf8.elementsEqual(entry.record.path.utf8) { continue }
            if let limit, out.count == limit { return VersionList(versions: out, more: true) }
            out.append(entry)
        }
        return VersionList(versions: out, more: false)
    }

    public func versions(user: String, path: String, before: Int64?, limit: Int) throws -> VersionList {
        try reader().use { db in try Self.versions(db, user: user, path: path, before: before, limit: limit) }
    }

    public func version(user: String, path: String, version: Int64) throws -> VersionEntry? {
        try reader().use { db in try Self.version(db, user: user, path: path, version: version) }
    }

    public func folder(user: String, prefix: String, at: Int64, after: String?, limit: Int) throws -> VersionList {
        try reader().use { db in try Self.held(db, user: user, prefix: prefix, at: at, after: after, limit: limit) }
    }

    // MARK: Restoring and expiring

    public func restore(user: String, _ request: RestoreRequest, device: String) throws -> [RestoreChange] {
        do {
            let changes = try writer.use { db in
                try db.transaction {
                    let transaction = try SaveTransactionSQL(db, user: user, policy: policy)
                    let changes = try RestoreStep.run(request, user: user, device: device, in: transaction, now: Clock.now())
                    try transaction.finish()
                    // A dry run saves nothing: the transaction is rolled back with its answer.
                    if request.dryRun { throw DryRun(changes: changes) }
                    return changes
                }
            }
            checkpointer.wrote(bytes: changes.count * 512)
            return changes
        } catch let dryRun as DryRun {
            return dryRun.unsaved
        }
    }

    public func expireVersions(supersededBefore cutoff: Int64, limit: Int) throws -> VersionExpiry {
        try writer.use { db in
            try db.transaction {
                var rows: [ExpiringVersion] = []
                try db.query("""
                    SELECT change_tag, user, path, deleted, length(data), CASE WHEN asset_chunks IS NULL THEN coalesce(asset_size, 0) ELSE 0 END, asset_chunks
                    FROM versions WHERE superseded_at < ? ORDER BY superseded_at LIMIT ?
                    """, cutoff, limit) { row in
                    let chunks = try row.optionalBlob(6).map { try Asset.chunks(stored: $0, path: row.text(2)) } ?? []
                    rows.append(ExpiringVersion(tag: row.int64(0), user: row.text(1), deleted: row.bool(3),
                                                content: StoredContent(inlineBytes: row.int64(4), blobBytes: row.int64(5), chunks: chunks)))
                }
                let delete = try db.prepare("DELETE FROM versions WHERE change_tag = ?")
                for row in rows {
                    try delete.bind([row.tag])
                    while try delete.step() {}
                    delete.reset()
                }
                try ExpiringVersion.count(rows) { user in UsageSQL(db: db, user: user, defaultQuota: policy.defaultQuota) }
                return VersionExpiry(removed: rows.count, more: rows.count == limit)
            }
        }
    }

    public func usage(user: String) throws -> StorageFigures {
        try reader().use { db in
            var figures = StorageFigures(liveBytes: 0, historyBytes: 0, quotaBytes: nil)
            try db.query("SELECT live_bytes, history_bytes FROM usage WHERE user = ?", user) { row in
                figures.liveBytes = row.int64(0)
                figures.historyBytes = row.int64(1)
            }
            figures.quotaBytes = policy.defaultQuota
            try db.query("SELECT quota FROM users WHERE name = ? AND quota IS NOT NULL", user) { figures.quotaBytes = $0.optionalInt64(0) }
            return figures
        }
    }

    public func setQuota(user: String, bytes: Int64?) throws {
        try writer.use { db in
            try db.run("UPDATE users SET quota = ? WHERE name = ?", bytes, user)
            guard db.changes > 0 else { throw AccountError(.unknownUser, "no user \(quoted(user)) on this server") }
        }
    }
}

/// A restore that was only asked what it would do: thrown out of its transaction so that nothing is
/// saved, carrying its answer with the tags it would have had cleared.
struct DryRun: Error {
    var changes: [RestoreChange]

    var unsaved: [RestoreChange] {
        changes.map { change in
            var change = change
            change.record.changeTag = 0
            return change
        }
    }
}

/// A kept version past the history window, with what it held.
struct ExpiringVersion {
    var tag: Int64
    var user: String
    var deleted: Bool
    var content: StoredContent

    /// Takes what `rows` held out of their users' history usage.
    static func count<T: UsageTransaction>(_ rows: [ExpiringVersion], in transaction: (String) -> T) throws {
        var ledgers: [String: UsageLedger] = [:]
        for row in rows where !row.deleted { ledgers[row.user, default: UsageLedger()].count(row.content, live: 0, kept: -1) }
        for (user, ledger) in ledgers.sorted(by: { $0.key < $1.key }) { _ = try ledger.commit(in: transaction(user)) }
    }
}

extension SQLiteRecordStore.SaveTransactionSQL: HistoryTransaction {
    func chunks(of tag: Int64) throws -> [ChunkRef] {
        var chunks: [ChunkRef] = []
        try db.query("SELECT path, asset_chunks FROM records WHERE change_tag = ? AND asset_chunks IS NOT NULL", tag) { row in
            chunks = try Asset.chunks(stored: row.blob(1), path: row.text(0))
        }
        return chunks
    }

    func keepVersion(tag: Int64, supersededAt: Int64) throws {
        try db.run("""
            INSERT INTO versions (change_tag, user, path, type, asset_id, asset_size, asset_sha256, deleted, base_tag, size, sha256, mode,
                                  modified_at, device, saved_at, moved_from, superseded_at, asset_chunks, data, xattrs)
            SELECT change_tag, user, path, type, asset_id, asset_size, asset_sha256, deleted, base_tag, size, sha256, mode,
                   modified_at, device, saved_at, moved_from, ?2, asset_chunks, data, xattrs
            FROM records WHERE change_tag = ?1
            """, tag, supersededAt)
    }

    func countChunks(_ changes: [ChunkCountChange]) throws -> [ChunkCounts] {
        try SQLiteRecordStore.UsageSQL(db: db, user: user, defaultQuota: policy.defaultQuota).countChunks(changes)
    }

    func addUsage(liveBytes: Int64, historyBytes: Int64) throws -> StorageFigures {
        try SQLiteRecordStore.UsageSQL(db: db, user: user, defaultQuota: policy.defaultQuota).addUsage(liveBytes: liveBytes, historyBytes: historyBytes)
    }

    func version(path: String, version: Int64) throws -> VersionEntry? {
        try SQLiteRecordStore.version(db, user: user, path: path, version: version)
    }

    func held(prefix: String, at: Int64) throws -> [VersionEntry] {
        try SQLiteRecordStore.held(db, user: user, prefix: prefix, at: at, after: nil, limit: nil).versions
    }

    func currentRecords(prefix: String) throws -> [Record] {
        var out: [Record] = []
        let statement = try db.prepare("""
            SELECT \(SQLiteRecordStore.columns.replacingOccurrences(of: "asset_chunks", with: "NULL")) FROM records
            WHERE user = ?1 AND \(SQLiteRecordStore.within(2)) AND deleted = 0 ORDER BY path
            """)
        defer { statement.reset() }
        try statement.bind([user] + SQLiteRecordStore.range(prefix))
        while try statement.step() { out.append(try SQLiteRecordStore.record(from: statement, hasData: false)) }
        return out
    }
}
