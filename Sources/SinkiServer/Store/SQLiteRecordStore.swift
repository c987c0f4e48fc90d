import Dispatch
import SinkiRecord
import SinkiSupport
import Synchronization

/// A store whose database is not one this server can use, or that broke a rule it keeps.
public struct RecordStoreError: Error, Sendable, CustomStringConvertible {
    public var path: String
    public var message: String
    public var description: String { "record store \(path): \(message)" }
}

/// A store call after `close()`.
public struct StoreClosedError: Error, Sendable, CustomStringConvertible {
    public var path: String
    public var description: String { "record store \(path) is closed" }
}

/// The default record store: one SQLite database (`records.db`, WAL) in the server's data folder.
///
/// On disk:
/// - `meta(key, value)`: `store_id` (random, made with the database), `last_tag` (the last changeTag
///   drawn (`ChangeTags`), kept here so that tags are never reused even when the newest record goes
///   away), `history_floor`
///   (see `historyFloor()`).
/// - `records`: one row per (user, path) at its latest version. `change_tag` is the row id, so the feed
///   index `(user, change_tag)` leads straight to the row; `(user, path)` is unique. Inline content is
///   the compressed bytes exactly as the writer sent them, in the last column so that reading the other
///   columns never walks its overflow pages. `saved_at` (server clock) is for tombstone retention.
///   `asset_chunks` is a manifest asset's chunks (`ManifestCoding`: 36 bytes each), NULL for any other
///   record; added by schema 3 after `data`, which reading it skips (a manifest record has no data, and
///   an inline one's NULL manifest is known from the row's header). `records_asset` finds the records
///   naming an asset. `xattrs`: the record's extended attributes as given (`ExtendedAttributes.encoded`),
///   NULL for none; schema 6, in `versions` too.
/// - `folder_digests`: per (user, folder) the digests of the live records below it and its head
///   (`FolderDigestTable`), updated in the modify's transaction; schema 4, computed from the records
///   when an older database is opened.
/// - `versions`, `chunk_refs`, `usage` and `users.quota`: the history and each user's usage, schema 5
///   (`SQLiteRecordStore+History.swift`).
///
/// One writer connection behind a lock serialises commits, which is also what keeps changeTags in commit
/// order; readers use a small pool of their own connections and never wait for a commit (WAL). Copying
/// the WAL back into the database (a checkpoint, with an fsync) happens on a connection and a queue of
/// its own, so that a commit does not pay for it: in SQLite's default it runs inside every commit that
/// crosses 1,000 pages, which for a 1,000-record batch of 4 KiB files is nearly every one.
public final class SQLiteRecordStore: ServerStore {
    public let storeID: String
    public let path: String
    let writer: DatabaseSlot
    private let readers: [DatabaseSlot]
    private let nextReader = Atomic<Int>(0)
    let checkpointer: Checkpointer
    public let policy: StorePolicy

    /// 1: records; 2: users and device tokens (`SQLiteRecordStore+Accounts.swift`); 3: manifests of
    /// chunks (`asset_chunks`) and the index of records by asset; 4: folder digests; 5: kept versions,
    /// usage and quotas; 6: extended attributes (`xattrs`) of records and versions.
    static let schemaVersion = 6

    /// SQLite has no XOR operator; `(a | b) - (a & b)` is exact on 64-bit integers (`a & b` holds only
    /// bits of `a | b`, so the difference never leaves the range and never turns into a real).
    static let digestSQL = FolderDigestTable.SQL(FolderDigestTable.Dialect(
        user: "user", text: "TEXT", integer: "INTEGER", tableOptions: " WITHOUT ROWID", parameter: { "?\($0)" },
        xor: { "((\($0) | \($1)) - (\($0) & \($1)))" }, max: { "max(\($0), \($1))" }))

    /// Opens (creating if needed) the database at `path`; `readers` read connections serve feeds and
    /// look-ups alongside the writer. `policy`: what a save keeps, and the quota of users with none of their own.
    public init(path: String, readers: Int = 4, policy: StorePolicy = StorePolicy()) throws {
        self.path = path
        self.policy = policy
        let db = try SQLiteDatabase(path: path)
        storeID = try Self.prepareSchema(db)
        try db.execute("PRAGMA wal_autocheckpoint = 0")
        writer = DatabaseSlot(db)
        checkpointer = Checkpointer(try SQLiteDatabase(path: path))
        var pool: [DatabaseSlot] = []
        for _ in 0..<max(1, readers) { pool.append(DatabaseSlot(try SQLiteDatabase(path: path, readOnly: true))) }
        self.readers = pool
    }

    private static func prepareSchema(_ db: SQLiteDatabase) throws -> String {
        try db.transaction {
            let version = db.userVersion
            if version > schemaVersion {
                throw RecordStoreError(path: db.path, message: "schema version \(version) is newer than this server's \(schemaVersion)")
            }
            if version < 1 {
                try db.execute("""
                    CREATE TABLE meta (key TEXT PRIMARY KEY, value ANY NOT NULL) WITHOUT ROWID;
                    CREATE TABLE records (
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
                        data BLOB
                    );
                    CREATE UNIQUE INDEX records_path ON records(user, path);
                    CREATE INDEX records_feed ON records(user, change_tag);
                    """)
                try db.run("INSERT INTO meta(key, value) VALUES ('store_id', ?), ('last_tag', 0), ('history_floor', 0)",
                           RandomID.hex(bytes: 8))
            }
            if version < 2 { try db.execute(accountsSchema) }
            if version < 3 { try db.execute(manifestSchema) }
            if version < 4 {
                try db.execute(digestSQL.schema)
                try rebuildDigests(db)
            }
            if version < 5 {
                try db.execute(historySchema)
                try rebuildUsage(db)
            }
            if version < 6 { try db.execute(xattrsSchema) }
            try db.execute(retentionIndex)
            if version < schemaVersion { try db.setUserVersion(schemaVersion) }
            var id: String?
            try db.query("SELECT value FROM meta WHERE key = 'store_id'") { id = $0.text(0) }
            guard let id, !id.isEmpty else {
                throw RecordStoreError(path: db.path, message: "the meta table has no store_id")
            }
            return id
        }
    }

    /// Schema 3: a manifest asset's chunks, and records found by the asset they name (the asset route,
    /// narrowed tokens).
    static let manifestSchema = """
        ALTER TABLE records ADD COLUMN asset_chunks BLOB;
        CREATE INDEX records_asset ON records(user, asset_id) WHERE asset_id IS NOT NULL;
        """

    /// Schema 6: a record's extended attributes (issue 25), kept with every version.
    static let xattrsSchema = """
        ALTER TABLE records ADD COLUMN xattrs BLOB;
        ALTER TABLE versions ADD COLUMN xattrs BLOB;
        """

    /// Computes every folder's digests from the records, for a database that had none.
    private static func rebuildDigests(_ db: SQLiteDatabase) throws {
        var rebuild = FolderDigestTable.Rebuild { user, deltas in try saveDigests(db, user: user, deltas) }
        try db.query("SELECT user, path, deleted, sha256, change_tag FROM records ORDER BY user, path") { row in
            try rebuild.add(user: row.text(0), path: row.text(1), deleted: row.bool(2), sha256: row.text(3), tag: row.int64(4))
        }
        try rebuild.finish()
    }

    // MARK: Writing

    static let insertSQL = """
        INSERT INTO records (change_tag, user, path, type, asset_id, asset_size, asset_sha256, deleted, base_tag,
                             size, sha256, mode, modified_at, device, saved_at, moved_from, data, asset_chunks, xattrs)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """
    static let updateSQL = """
        UPDATE records SET change_tag = ?, user = ?, path = ?, type = ?, asset_id = ?, asset_size = ?, asset_sha256 = ?,
                           deleted = ?, base_tag = ?, size = ?, sha256 = ?, mode = ?, modified_at = ?, device = ?,
                           saved_at = ?, moved_from = ?, data = ?, asset_chunks = ?, xattrs = ?
        WHERE change_tag = ?
        """

    public func modify(user: String, items: [CheckedRecord]) throws -> [StoreOutcome] {
        if items.isEmpty { return [] }
        let outcomes = try writer.use { db in
            try db.transaction {
                let transaction = try SaveTransactionSQL(db, user: user, policy: policy)
                let result = try SaveStep.apply(items, user: user, in: transaction, now: Clock.now())
                try transaction.finish()
                return result.outcomes
            }
        }
        checkpointer.wrote(bytes: items.reduce(0) { $0 + 256 + ($1.record.data?.count ?? 0) + ($1.record.asset?.chunks?.count ?? 0) * ManifestCoding.entryBytes })
        return outcomes
    }

    /// `SaveStep`'s reads and writes in SQLite, for one user inside the writer's transaction. Tags come
    /// from `meta.last_tag`, written back once by `finish()`.
    final class SaveTransactionSQL: SaveTransaction {
        let db: SQLiteDatabase
        let user: String
        let policy: StorePolicy
        var keepsHistory: Bool { policy.keepsHistory }
        private let firstTag: Int64
        private var tag: Int64

        init(_ db: SQLiteDatabase, user: String, policy: StorePolicy) throws {
            self.db = db
            self.user = user
            self.policy = policy
            firstTag = try db.scalar("SELECT value FROM meta WHERE key = 'last_tag'") ?? 0
            tag = firstTag
        }

        func current(path: String) throws -> CurrentVersion? {
            var found: CurrentVersion?
            try db.query("""
                SELECT change_tag, deleted, sha256, length(data), CASE WHEN asset_chunks IS NULL THEN coalesce(asset_size, 0) ELSE 0 END,
                       asset_chunks IS NOT NULL
                FROM records WHERE user = ? AND path = ?
                """, user, path) { row in
                found = CurrentVersion(tag: row.int64(0), deleted: row.bool(1), sha256: row.text(2), inlineBytes: row.int64(3),
                                       blobBytes: row.int64(4), hasChunks: row.bool(5))
            }
            return found
        }

        func record(tag: Int64) throws -> Record { try SQLiteRecordStore.fetch(db, changeTag: tag) }

        func liveContent(path: String) throws -> Record? { try SQLiteRecordStore.content(db, user: user, path: path) }

        func nextTag() throws -> Int64 {
            tag = ChangeTags.next(after: tag)
            return tag
        }

        func write(_ record: Record, replacing: Int64, savedAt: Int64) throws {
            let values: [any SQLBindable] = [
                record.changeTag, user, record.path, record.type, record.asset?.id, record.asset?.size, record.asset?.sha256,
                record.deleted, record.baseTag, record.size, record.sha256, record.mode, record.modifiedAt,
                record.device, savedAt, record.deleted ? nil : record.movedFrom, record.data, record.asset?.storedChunks,
                record.xattrs.stored,
            ]
            let statement = try db.prepare(replacing == 0 ? SQLiteRecordStore.insertSQL : SQLiteRecordStore.updateSQL)
            try statement.bind(replacing == 0 ? values : values + [replacing])
            while try statement.step() {}
            statement.reset()
        }

        func saveDigests(_ deltas: FolderDeltas) throws { try SQLiteRecordStore.saveDigests(db, user: user, deltas) }

        /// Keeps the tag counter where the batch left it.
        func finish() throws {
            if tag != firstTag { try db.run("UPDATE meta SET value = ? WHERE key = 'last_tag'", tag) }
        }
    }

    /// XORs a batch's changes into the user's folder rows, one upsert per folder.
    static func saveDigests(_ db: SQLiteDatabase, user: String, _ deltas: FolderDeltas) throws {
        if deltas.isEmpty { return }
        let statement = try db.prepare(digestSQL.upsert)
        for row in FolderDigestTable.upserts(user: user, deltas) {
            try statement.bind([row.user, row.parent, row.path] as [any SQLBindable] + row.words.map { $0 as any SQLBindable } + [row.head])
            while try statement.step() {}
            statement.reset()
        }
    }

    // MARK: Reading

    /// Columns read into a Record, `data` last when asked for (see the type comment).
    static let columns = "change_tag, path, type, asset_id, asset_size, asset_sha256, deleted, base_tag, size, sha256, mode, modified_at, device, moved_from, asset_chunks, xattrs"

    static func record(from row: Statement, hasData: Bool) throws -> Record {
        var record = Record(path: row.text(1), type: row.text(2))
        record.changeTag = row.int64(0)
        if let id = row.optionalText(3) {
            record.asset = Asset(id: id, size: row.int64(4), sha256: row.text(5))
            if let stored = row.optionalBlob(14) { record.asset?.chunks = try Asset.chunks(stored: stored, path: record.path) }
        }
        record.deleted = row.bool(6)
        record.baseTag = row.int64(7)
        record.size = row.int64(8)
        record.sha256 = row.text(9)
        record.mode = UInt32(truncatingIfNeeded: row.int64(10))
        record.modifiedAt = row.int64(11)
        record.device = row.text(12)
        record.movedFrom = row.optionalText(13)
        record.xattrs = try ExtendedAttributes(stored: row.optionalBlob(15), path: record.path)
        if hasData { record.data = row.optionalBlob(16) }
        return record
    }

    /// The current content of a live record, for a move that copies it.
    static func content(_ db: SQLiteDatabase, user: String, path: String) throws -> Record? {
        var found: Record?
        try db.query("SELECT \(columns), data FROM records WHERE user = ? AND path = ? AND deleted = 0", user, path) { row in
            found = try record(from: row, hasData: true)
        }
        return found
    }

    static func fetch(_ db: SQLiteDatabase, changeTag: Int64) throws -> Record {
        var found: Record?
        try db.query("SELECT \(columns), data FROM records WHERE change_tag = ?", changeTag) { found = try record(from: $0, hasData: true) }
        guard let found else {
            throw RecordStoreError(path: db.path, message: "bug: record \(changeTag) vanished inside a transaction")
        }
        return found
    }

    /// Reads rows into a page: stops at `limit.records`, or once the data passes `limit.dataBytes`;
    /// `more` says whether another row was there.
    private static func page(_ db: SQLiteDatabase, _ sql: String, _ arguments: [any SQLBindable], limit: PageLimit,
                             hasData: Bool) throws -> (records: [Record], more: Bool) {
        let statement = try db.prepare(sql)
        defer { statement.reset() }
        try statement.bind(arguments)
        var records: [Record] = []
        records.reserveCapacity(min(limit.records, 1024))
        var dataBytes = 0
        while try statement.step() {
            if records.count >= limit.records || dataBytes > limit.dataBytes { return (records, true) }
            let record = try record(from: statement, hasData: hasData)
            dataBytes += record.pageBytes
            records.append(record)
        }
        return (records, false)
    }

    public func changes(user: String, after tag: Int64, limit: PageLimit) throws -> ChangeBatch {
        try reader().use { db in
            let (records, more) = try Self.page(
                db, "SELECT \(Self.columns), data FROM records WHERE user = ? AND change_tag > ? ORDER BY change_tag LIMIT ?",
                [user, tag, limit.records + 1], limit: limit, hasData: true)
            return ChangeBatch(records: records, lastTag: records.last?.changeTag ?? tag, more: more)
        }
    }

    public func changes(user: String, after tag: Int64, limit: PageLimit, within prefix: String?) throws -> ChangeBatch {
        guard let prefix else { return try changes(user: user, after: tag, limit: limit) }
        return try reader().use { db in
            // The same bytewise range as a look-up (see `records`), on the feed's order.
            let (records, more) = try Self.page(
                db, """
                    SELECT \(Self.columns), data FROM records
                    WHERE user = ?1 AND change_tag > ?2 AND path >= ?3 AND path < ?4 AND (path = ?3 OR path >= ?5)
                    ORDER BY change_tag LIMIT ?6
                    """,
                [user, tag, prefix, prefix + "0", prefix + "/", limit.records + 1], limit: limit, hasData: true)
            return ChangeBatch(records: records, lastTag: records.last?.changeTag ?? tag, more: more)
        }
    }

    public func namesAsset(user: String, assetID: String, within prefix: String) throws -> Bool {
        try reader().use { db in
            // A kept version's asset may be read as a current record's is (`sinkid cat --version`).
            try db.scalar("""
                SELECT 1 FROM records WHERE user = ?1 AND asset_id = ?2 AND deleted = 0
                AND path >= ?3 AND path < ?4 AND (path = ?3 OR path >= ?5)
                UNION ALL
                SELECT 1 FROM versions WHERE user = ?1 AND asset_id = ?2 AND deleted = 0
                AND path >= ?3 AND path < ?4 AND (path = ?3 OR path >= ?5) LIMIT 1
                """, user, assetID, prefix, prefix + "0", prefix + "/") != nil
        }
    }

    public func manifest(user: String, assetID: String, within prefix: String?) throws -> [ChunkRef]? {
        try reader().use { db in
            var found: [ChunkRef]?
            let narrowed = prefix.map { [$0, $0 + "0", $0 + "/"] } ?? ["", "", ""]
            // A live record's first, then a kept version's (`sinkid cat --version`).
            try db.query("""
                SELECT path, asset_chunks FROM (
                    SELECT 0 AS kept, path, asset_chunks FROM records WHERE user = ?1 AND asset_id = ?2 AND deleted = 0 AND asset_chunks IS NOT NULL
                    AND (?3 = '' OR (path >= ?3 AND path < ?4 AND (path = ?3 OR path >= ?5)))
                    UNION ALL
                    SELECT 1, path, asset_chunks FROM versions WHERE user = ?1 AND asset_id = ?2 AND deleted = 0 AND asset_chunks IS NOT NULL
                    AND (?3 = '' OR (path >= ?3 AND path < ?4 AND (path = ?3 OR path >= ?5)))
                ) ORDER BY kept LIMIT 1
                """, user, assetID, narrowed[0], narrowed[1], narrowed[2]) { row in
                found = try Asset.chunks(stored: row.blob(1), path: row.text(0))
            }
            return found
        }
    }

    public func chunkReferences(user: String, after tag: Int64) throws -> ChunkReferences {
        try reader().use { db in
            // The head first: every record at or below it is committed, so the list read next holds it.
            let head = try db.scalar("SELECT max(change_tag) FROM records WHERE user = ?", user) ?? 0
            var names = Set<String>()
            // Kept versions hold their chunks until they expire.
            try db.query("""
                SELECT path, asset_chunks FROM records WHERE user = ?1 AND change_tag > ?2 AND deleted = 0 AND asset_chunks IS NOT NULL
                UNION ALL
                SELECT path, asset_chunks FROM versions WHERE user = ?1 AND change_tag > ?2 AND deleted = 0 AND asset_chunks IS NOT NULL
                """, user, tag) { row in
                for chunk in try Asset.chunks(stored: row.blob(1), path: row.text(0)) { names.insert(chunk.sha256) }
            }
            return ChunkReferences(names: names, head: max(head, tag))
        }
    }

    public func records(user: String, prefix: String?, after: String?, limit: PageLimit, includeData: Bool) throws -> RecordListing {
        let columns = includeData ? Self.columns + ", data" : Self.columns
        return try reader().use { db in
            let result: (records: [Record], more: Bool)
            if let prefix {
                // The bytewise range [prefix, prefix + "0") holds the prefix itself, everything below
                // `prefix/` ('0' follows '/'), and siblings such as `prefix-x` that the second test drops.
                result = try Self.page(
                    db, """
                        SELECT \(columns) FROM records
                        WHERE user = ?1 AND path >= ?2 AND path < ?3 AND (path = ?2 OR path >= ?4) AND path > ?5
                        ORDER BY path LIMIT ?6
                        """,
                    [user, prefix, prefix + "0", prefix + "/", after ?? "", limit.records + 1], limit: limit, hasData: includeData)
            } else {
                result = try Self.page(
                    db, "SELECT \(columns) FROM records WHERE user = ? AND path > ? ORDER BY path LIMIT ?",
                    [user, after ?? "", limit.records + 1], limit: limit, hasData: includeData)
            }
            return RecordListing(records: result.records, more: result.more)
        }
    }

    public func headTag(user: String) throws -> Int64 {
        try reader().use { db in try db.scalar("SELECT max(change_tag) FROM records WHERE user = ?", user) ?? 0 }
    }

    public func digests(user: String, folder: String, children: Bool) throws -> DigestReply {
        try reader().use { db in
            var reading = FolderDigestTable.Reading()
            try db.query(children ? Self.digestSQL.withChildren : Self.digestSQL.own, user, FolderDigestTable.parent(of: folder), folder) { row in
                reading.add(kind: row.int64(0), path: row.text(1)) { row.int64(Int32($0 + 2)) }
            }
            return reading.reply(folder: folder, children: children)
        }
    }

    public func historyFloor() throws -> Int64 {
        try reader().use { db in try db.scalar("SELECT value FROM meta WHERE key = 'history_floor'") ?? 0 }
    }

    public func close() {
        checkpointer.close()
        writer.close()
        for slot in readers { slot.close() }
    }

    /// A read connection: round robin, so that each of the server's threads usually finds its own free.
    func reader() -> DatabaseSlot {
        let index = UInt(bitPattern: nextReader.wrappingAdd(1, ordering: .relaxed).oldValue)
        return readers[Int(index % UInt(readers.count))]
    }

    /// Runs passive checkpoints (never waiting for readers or the writer) once enough has been committed
    /// since the last one; the writer has automatic checkpoints turned off.
    final class Checkpointer: Sendable {
        /// About SQLite's own default (1,000 pages of 4 KiB).
        static let threshold = 4 << 20

        private let connection: DatabaseSlot
        private let queue = DispatchQueue(label: "sinki-checkpoint")
        private let pending = Mutex<(bytes: Int, scheduled: Bool)>((0, false))

        init(_ database: sending SQLiteDatabase) { connection = DatabaseSlot(database) }

        /// A commit wrote about `bytes` to the WAL.
        func wrote(bytes: Int) {
            let schedule = pending.withLock { state -> Bool in
                state.bytes += bytes
                guard state.bytes >= Self.threshold, !state.scheduled else { return false }
                state = (0, true)
                return true
            }
            guard schedule else { return }
            queue.async { [self] in
                pending.withLock { $0.scheduled = false }
                // A failed checkpoint only leaves the WAL longer; the next one, or closing, catches up.
                try? connection.use { db in try db.execute("PRAGMA wal_checkpoint(PASSIVE)") }
            }
        }

        /// Waits for a checkpoint under way; closing the last connection checkpoints the rest.
        func close() {
            queue.sync {}
            connection.close()
        }
    }

    final class DatabaseSlot: Sendable {
        private let database: Mutex<SQLiteDatabase?>
        private let path: String

        init(_ database: sending SQLiteDatabase) {
            path = database.path
            self.database = Mutex(database)
        }

        /// Runs `body` with the connection, holding it for that time.
        func use<T: Sendable>(_ body: (SQLiteDatabase) throws -> T) throws -> T {
            try database.withLock { db in
                guard let db else { throw StoreClosedError(path: path) }
                return try body(db)
            }
        }

        func close() { database.withLock { $0 = nil } }
    }
}
