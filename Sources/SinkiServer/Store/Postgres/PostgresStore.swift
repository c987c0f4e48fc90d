import SinkiRecord
import SinkiSupport

/// The server's store in a PostgreSQL database (`sinkid serve --database postgresql://...`): the same
/// contract and conformance suite as `SQLiteRecordStore`, for a server whose records should live in a
/// database server. Blobs stay in the data folder's `uploads/`.
///
/// In the database (schema version in `schema_version`, migrated at open under an advisory lock so
/// that two servers starting at once do not both create it):
/// - `store(store_id)`: the random id made with the schema.
/// - `change_tags`: the sequence change tags are drawn from (one for the whole store, so a tag names
///   one record across users, as in SQLite). `CACHE 1`, PostgreSQL's default: every connection draws
///   from the same counter, so a later draw is always higher. Moved forward to the save's time by each
///   draw (`ChangeTags`, `reserveTags`), so that a tag tells nothing of other users' saves.
/// - `meta(key, value)`: `history_floor`, `revocations`, both `bigint`.
/// - `records`: one row per (owner, path), as in SQLite; `path` is `COLLATE "C"`, so comparisons and
///   order are bytewise (UTF-8 byte order), which the prefix ranges and listings rely on. Schema 3
///   adds `asset_chunks` (a manifest, `ManifestCoding`, stored uncompressed) and `records_asset`.
/// - `folder_digests`: per (owner, folder) the digests of the live records below it and its head
///   (`FolderDigestTable`), updated in the modify's transaction, under the user's lock, by upserts that
///   XOR in the statement; schema 4, computed from the records when an older database is opened.
/// - `users`, `tokens`, `token_chains`: as in SQLite (`SQLiteRecordStore+Accounts.swift`).
/// - `versions`, `chunk_refs`, `usage`, `users.quota`: the history and each user's usage, schema 5
///   (`PostgresStore+History.swift`).
/// - `xattrs` in `records` and `versions`: a record's extended attributes as given
///   (`ExtendedAttributes.encoded`), NULL for none; schema 6.
///
/// Tags are in commit order for each user, which is all a reader (one user's feed) sees: a modify (and
/// a sweep) first takes its user's transaction lock (`pg_advisory_xact_lock(userLockClass,
/// hashtext(owner))`) and holds it until it has committed, so of two modifies of one user the second
/// draws its tags after the first is committed, and higher. A reader that saw tag N of a user can
/// therefore never later see a committed tag of that user below N. Users do not wait for each other
/// (two whose names hash alike only share the lock), so their commits, and the disk flushes behind
/// them, go on side by side; schema 1 had one counter row for everyone, which put every save of every
/// user in one line behind the flush of the one before.
public final class PostgresStore: ServerStore {
    public let storeID: String
    /// The database's URL without its password.
    public let database: String
    let pool: PGPool
    /// The full URL (with any password), for the listening connection of `changeSignal`.
    private let url: String
    /// Called after a modify that saved records commits, with the user and the last tag it saved (not
    /// under any lock): where a `NOTIFY` for other server processes would go.
    let afterCommit: (@Sendable (_ user: String, _ lastTag: Int64) -> Void)?
    public let policy: StorePolicy

    /// 1: records, users and device tokens. 2: tags from a sequence under per-user locks. 3: manifests
    /// of chunks (`asset_chunks`) and the index of records by asset. 4: folder digests. 5: kept versions,
    /// usage and quotas. 6: extended attributes (`xattrs`) of records and versions.
    static let schemaVersion = 6

    static let digestSQL = FolderDigestTable.SQL(FolderDigestTable.Dialect(
        user: "owner", text: "TEXT COLLATE \"C\"", integer: "BIGINT", tableOptions: "", parameter: { "$\($0)" },
        xor: { "\($0) # \($1)" }, max: { "GREATEST(\($0), \($1))" }))

    /// How many records the rebuild of the digests reads at a time.
    static let rebuildPage = 10_000

    /// The first key of the per-user transaction locks (the second is the hash of the user's name);
    /// the schema lock is a one-key lock, whose key space is apart from the two-key one.
    static let userLockClass: Int32 = 7193452
    /// The first key of the store-wide lock a draw of change tags holds for its instant (`reserveTags`).
    static let tagLockClass: Int32 = 7193453

    /// Connects to `url` with `connections` connections (one per server thread is plenty), creating or
    /// migrating the schema. `policy`: what a save keeps, and the quota of users with none of their own.
    public init(url: String, connections: Int = 4, policy: StorePolicy = StorePolicy(),
                afterCommit: (@Sendable (_ user: String, _ lastTag: Int64) -> Void)? = nil) throws {
        self.policy = policy
        pool = try PGPool(url: url, size: connections)
        database = pool.database
        self.url = url
        self.afterCommit = afterCommit
        do {
            storeID = try pool.use { db in try Self.prepareSchema(db) }
        } catch {
            pool.close()
            throw error
        }
    }

    private static func prepareSchema(_ db: PGConnection) throws -> String {
        let encoding = try db.query("SHOW server_encoding")
        guard try encoding.text(0, 0) == "UTF8" else {
            throw RecordStoreError(path: db.database, message: "the database's encoding is \(try encoding.text(0, 0)); sinki needs UTF8 (CREATE DATABASE ... ENCODING 'UTF8' TEMPLATE template0)")
        }
        return try db.transaction {
            // Any constant will do: it only has to be the same for every sinki server on this database.
            try db.execute("SELECT pg_advisory_xact_lock(7193451)")
            let exists = try db.query("SELECT to_regclass('schema_version') IS NOT NULL")
            let version = try exists.bool(0, 0) ? try db.scalar("SELECT max(version) FROM schema_version") ?? 0 : 0
            if version > schemaVersion {
                throw RecordStoreError(path: db.database, message: "schema version \(version) is newer than this server's \(schemaVersion)")
            }
            if version < 1 {
                try db.execute(schema)
                try db.execute("INSERT INTO store(store_id) VALUES ($1)", [RandomID.hex(bytes: 8)])
                try db.execute("INSERT INTO schema_version(version) VALUES (1)")
            }
            if version < 2 {
                // The sequence goes on from the counter row it replaces.
                try db.execute("""
                    CREATE SEQUENCE change_tags AS BIGINT CACHE 1;
                    SELECT setval('change_tags', GREATEST((SELECT value FROM meta WHERE key = 'last_tag'),
                                                          (SELECT COALESCE(max(change_tag), 0) FROM records)) + 1, false);
                    DELETE FROM meta WHERE key = 'last_tag';
                    UPDATE schema_version SET version = 2;
                    """)
            }
            if version < 3 {
                // Hashes do not compress: EXTERNAL keeps PostgreSQL from trying.
                try db.execute("""
                    ALTER TABLE records ADD COLUMN asset_chunks BYTEA;
                    ALTER TABLE records ALTER COLUMN asset_chunks SET STORAGE EXTERNAL;
                    CREATE INDEX records_asset ON records(owner, asset_id) WHERE asset_id IS NOT NULL;
                    UPDATE schema_version SET version = 3;
                    """)
            }
            if version < 4 {
                try db.execute(digestSQL.schema)
                try rebuildDigests(db)
                try db.execute("UPDATE schema_version SET version = 4")
            }
            if version < 5 {
                try db.execute(historySchema)
                try rebuildUsage(db)
                try db.execute("UPDATE schema_version SET version = 5")
            }
            if version < 6 {
                // A record's extended attributes (issue 25), kept with every version.
                try db.execute("""
                    ALTER TABLE records ADD COLUMN xattrs BYTEA;
                    ALTER TABLE versions ADD COLUMN xattrs BYTEA;
                    UPDATE schema_version SET version = 6;
                    """)
            }
            let id = try db.query("SELECT store_id FROM store")
            guard id.count == 1, let storeID = id.optionalText(0, 0), !storeID.isEmpty else {
                throw RecordStoreError(path: db.database, message: "the store table does not hold exactly one store_id")
            }
            return storeID
        }
    }

    static let schema = """
        CREATE TABLE schema_version (version INTEGER NOT NULL);
        CREATE TABLE store (store_id TEXT NOT NULL);
        CREATE TABLE meta (key TEXT PRIMARY KEY, value BIGINT NOT NULL);
        INSERT INTO meta(key, value) VALUES ('last_tag', 0), ('history_floor', 0), ('revocations', 0);
        CREATE TABLE records (
            change_tag BIGINT PRIMARY KEY,
            owner TEXT COLLATE "C" NOT NULL,
            path TEXT COLLATE "C" NOT NULL,
            type TEXT NOT NULL,
            asset_id TEXT,
            asset_size BIGINT,
            asset_sha256 TEXT,
            deleted BOOLEAN NOT NULL,
            base_tag BIGINT NOT NULL,
            size BIGINT NOT NULL,
            sha256 TEXT NOT NULL,
            mode BIGINT NOT NULL,
            modified_at BIGINT NOT NULL,
            device TEXT NOT NULL,
            saved_at BIGINT NOT NULL,
            moved_from TEXT,
            data BYTEA
        );
        -- The data is zlib already: EXTERNAL keeps PostgreSQL from trying to compress it again.
        ALTER TABLE records ALTER COLUMN data SET STORAGE EXTERNAL;
        CREATE UNIQUE INDEX records_path ON records(owner, path);
        CREATE INDEX records_feed ON records(owner, change_tag);
        CREATE INDEX records_tombstones ON records(saved_at) WHERE deleted;
        CREATE TABLE users (name TEXT COLLATE "C" PRIMARY KEY, created_at BIGINT NOT NULL);
        CREATE TABLE tokens (
            id TEXT COLLATE "C" PRIMARY KEY,
            owner TEXT COLLATE "C" NOT NULL,
            device TEXT NOT NULL,
            secret_hash BYTEA NOT NULL,
            parent_id TEXT,
            chain_id TEXT NOT NULL,
            read_only BOOLEAN NOT NULL,
            prefix TEXT,
            max_upload_bytes BIGINT,
            max_uploads BIGINT,
            expires_at BIGINT,
            created_at BIGINT NOT NULL,
            last_used_at BIGINT,
            revoked_at BIGINT,
            revoked_count BIGINT
        );
        CREATE INDEX tokens_user ON tokens(owner, created_at);
        CREATE INDEX tokens_parent ON tokens(parent_id) WHERE parent_id IS NOT NULL;
        CREATE INDEX tokens_chain ON tokens(chain_id);
        CREATE INDEX tokens_revoked ON tokens(revoked_count) WHERE revoked_count IS NOT NULL;
        CREATE TABLE token_chains (chain_id TEXT PRIMARY KEY, uploads_used BIGINT NOT NULL);
        """

    /// Computes every folder's digests from the records, for a database that had none: page by page
    /// in (owner, path) order, so that a million records are never in memory at once.
    private static func rebuildDigests(_ db: PGConnection) throws {
        var rebuild = FolderDigestTable.Rebuild { user, deltas in try saveDigests(db, user: user, deltas) }
        var after = ("", "")
        while true {
            let rows = try db.query("""
                SELECT owner, path, deleted, sha256, change_tag FROM records WHERE (owner, path) > ($1, $2) ORDER BY owner, path LIMIT $3
                """, [after.0, after.1, rebuildPage])
            for row in 0..<rows.count {
                try rebuild.add(user: try rows.text(row, 0), path: try rows.text(row, 1), deleted: try rows.bool(row, 2),
                                sha256: try rows.text(row, 3), tag: try rows.int64(row, 4))
            }
            guard rows.count == rebuildPage else { break }
            after = (try rows.text(rows.count - 1, 0), try rows.text(rows.count - 1, 1))
        }
        try rebuild.finish()
    }

    // MARK: Writing

    static let insertSQL = """
        INSERT INTO records (change_tag, owner, path, type, asset_id, asset_size, asset_sha256, deleted, base_tag,
                             size, sha256, mode, modified_at, device, saved_at, moved_from, data, asset_chunks, xattrs)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)
        """
    static let updateSQL = """
        UPDATE records SET change_tag = $1, owner = $2, path = $3, type = $4, asset_id = $5, asset_size = $6,
                           asset_sha256 = $7, deleted = $8, base_tag = $9, size = $10, sha256 = $11, mode = $12,
                           modified_at = $13, device = $14, saved_at = $15, moved_from = $16, data = $17, asset_chunks = $18,
                           xattrs = $19
        WHERE change_tag = $20
        """

    public func modify(user: String, items: [CheckedRecord]) throws -> [StoreOutcome] {
        if items.isEmpty { return [] }
        let result = try pool.use { db in
            try db.transaction {
                // The user's lock orders their commits (see the type comment); held until COMMIT.
                try Self.lockUser(db, user)
                let result = try SaveStep.apply(items, user: user, in: SaveTransactionSQL(db, user: user, policy: policy, expected: items.count),
                                                now: Clock.now())
                if result.lastTag != nil {
                    // Inside the transaction: PostgreSQL delivers it at commit, and only then.
                    try db.execute("SELECT pg_notify($1, $2)", [PGChangeSignal.channel, user])
                }
                return result
            }
        }
        if let lastTag = result.lastTag { afterCommit?(user, lastTag) }
        return result.outcomes
    }

    /// `SaveStep`'s reads and writes in PostgreSQL, for one user inside a transaction that holds the
    /// user's lock. Tags come from the `change_tags` sequence, drawn `expected` at a time (`reserveTags`).
    final class SaveTransactionSQL: SaveTransaction {
        let db: PGConnection
        let user: String
        let policy: StorePolicy
        var keepsHistory: Bool { policy.keepsHistory }
        private let expected: Int
        private var reserved: ClosedRange<Int64>.Iterator?

        init(_ db: PGConnection, user: String, policy: StorePolicy, expected: Int = 16) {
            self.db = db
            self.user = user
            self.policy = policy
            self.expected = max(1, expected)
        }

        func current(path: String) throws -> CurrentVersion? {
            let rows = try db.query("""
                SELECT change_tag, deleted, sha256, COALESCE(octet_length(data), 0),
                       CASE WHEN asset_chunks IS NULL THEN COALESCE(asset_size, 0) ELSE 0 END, asset_chunks IS NOT NULL
                FROM records WHERE owner = $1 AND path = $2
                """, [user, path])
            guard rows.count > 0 else { return nil }
            return CurrentVersion(tag: try rows.int64(0, 0), deleted: try rows.bool(0, 1), sha256: try rows.text(0, 2),
                                  inlineBytes: try rows.int64(0, 3), blobBytes: try rows.int64(0, 4), hasChunks: try rows.bool(0, 5))
        }

        func record(tag: Int64) throws -> Record { try PostgresStore.fetch(db, changeTag: tag) }

        func liveContent(path: String) throws -> Record? { try PostgresStore.content(db, user: user, path: path) }

        func nextTag() throws -> Int64 {
            if let tag = reserved?.next() { return tag }
            var drawn = try PostgresStore.reserveTags(db, count: expected)
            guard let tag = drawn.next() else { throw RecordStoreError(path: db.database, message: "bug: no change tag reserved") }
            reserved = drawn
            return tag
        }

        func write(_ record: Record, replacing: Int64, savedAt: Int64) throws {
            let values: [any PGBindable] = [
                record.changeTag, user, record.path, record.type, record.asset?.id, record.asset?.size, record.asset?.sha256,
                record.deleted, record.baseTag, record.size, record.sha256, record.mode, record.modifiedAt,
                record.device, savedAt, record.deleted ? nil : record.movedFrom, record.data, record.asset?.storedChunks,
                record.xattrs.stored,
            ]
            try db.execute(replacing == 0 ? PostgresStore.insertSQL : PostgresStore.updateSQL, replacing == 0 ? values : values + [replacing])
        }

        func saveDigests(_ deltas: FolderDeltas) throws { try PostgresStore.saveDigests(db, user: user, deltas) }
    }

    /// Draws `count` consecutive change tags (`ChangeTags`: from the save's time, or above the last tag
    /// drawn by any server when that is later) under a store-wide lock held for this draw only, not to
    /// the commit: the sequence is only ever moved forward, so no tag is drawn twice, and users do not
    /// wait for each other's commits. The user's own lock, held to the commit, keeps each user's tags
    /// in commit order as before. Tags drawn and not used are a gap, which tells nothing either.
    static func reserveTags(_ db: PGConnection, count: Int) throws -> ClosedRange<Int64>.Iterator {
        try db.execute("SELECT pg_advisory_lock(\(tagLockClass), 0)")
        defer { _ = try? db.execute("SELECT pg_advisory_unlock(\(tagLockClass), 0)") }
        guard let drawn = try db.scalar("SELECT nextval('change_tags')") else {
            throw RecordStoreError(path: db.database, message: "the change_tags sequence gave no value")
        }
        let first = ChangeTags.next(after: drawn - 1)
        let last = first + Int64(max(1, count)) - 1
        if last > drawn { try db.execute("SELECT setval('change_tags', $1)", [last]) }
        return (first...last).makeIterator()
    }

    /// Takes `user`'s transaction lock: modifies and sweeps of one user one after the other.
    static func lockUser(_ db: PGConnection, _ user: String) throws(PostgresError) {
        try db.execute("SELECT pg_advisory_xact_lock(\(userLockClass), hashtext($1))", [user])
    }

    /// XORs a batch's changes into the user's folder rows, one upsert per folder. Under the user's lock
    /// no other modify of the user runs, and the XOR in the statement would keep the rows right even
    /// without it.
    static func saveDigests(_ db: PGConnection, user: String, _ deltas: FolderDeltas) throws {
        for row in FolderDigestTable.upserts(user: user, deltas) {
            try db.execute(digestSQL.upsert, [row.user, row.parent, row.path] as [any PGBindable] + row.words.map { $0 as any PGBindable } + [row.head])
        }
    }

    /// Other servers on this database announce their commits through `NOTIFY` (`PGChangeSignal`).
    public func changeSignal(logger: Logger) -> (any ChangeSignal)? { PGChangeSignal(url: url, logger: logger) }

    // MARK: Reading

    /// Columns read into a Record, `data` last when asked for, as in SQLite.
    static let columns = "change_tag, path, type, asset_id, asset_size, asset_sha256, deleted, base_tag, size, sha256, mode, modified_at, device, moved_from, asset_chunks, xattrs"

    static func record(_ rows: PGResult, _ row: Int, hasData: Bool) throws -> Record {
        var record = Record(path: try rows.text(row, 1), type: try rows.text(row, 2))
        record.changeTag = try rows.int64(row, 0)
        if let id = rows.optionalText(row, 3) {
            record.asset = Asset(id: id, size: try rows.int64(row, 4), sha256: try rows.text(row, 5))
            if let stored = try rows.optionalBytes(row, 14) { record.asset?.chunks = try Asset.chunks(stored: stored, path: record.path) }
        }
        record.deleted = try rows.bool(row, 6)
        record.baseTag = try rows.int64(row, 7)
        record.size = try rows.int64(row, 8)
        record.sha256 = try rows.text(row, 9)
        record.mode = UInt32(truncatingIfNeeded: try rows.int64(row, 10))
        record.modifiedAt = try rows.int64(row, 11)
        record.device = try rows.text(row, 12)
        record.movedFrom = rows.optionalText(row, 13)
        record.xattrs = try ExtendedAttributes(stored: try rows.optionalBytes(row, 15), path: record.path)
        if hasData { record.data = try rows.optionalBytes(row, 16) }
        return record
    }

    /// The current content of a live record, for a move that copies it.
    static func content(_ db: PGConnection, user: String, path: String) throws -> Record? {
        let rows = try db.query("SELECT \(columns), data FROM records WHERE owner = $1 AND path = $2 AND NOT deleted", [user, path])
        return rows.count == 0 ? nil : try record(rows, 0, hasData: true)
    }

    static func fetch(_ db: PGConnection, changeTag: Int64) throws -> Record {
        let rows = try db.query("SELECT \(columns), data FROM records WHERE change_tag = $1", [changeTag])
        guard rows.count > 0 else {
            throw RecordStoreError(path: db.database, message: "bug: record \(changeTag) vanished inside a transaction")
        }
        return try record(rows, 0, hasData: true)
    }

    /// Reads rows into a page: stops at `limit.records`, or once the data passes `limit.dataBytes`;
    /// `more` says whether another row was there. The statement asks for one row more than the limit.
    private static func page(_ db: PGConnection, _ sql: String, _ arguments: [any PGBindable], limit: PageLimit,
                             hasData: Bool) throws -> (records: [Record], more: Bool) {
        let rows = try db.query(sql, arguments)
        var records: [Record] = []
        records.reserveCapacity(min(limit.records, rows.count))
        var dataBytes = 0
        for row in 0..<rows.count {
            if records.count >= limit.records || dataBytes > limit.dataBytes { return (records, true) }
            let record = try record(rows, row, hasData: hasData)
            dataBytes += record.pageBytes
            records.append(record)
        }
        return (records, false)
    }

    public func changes(user: String, after tag: Int64, limit: PageLimit) throws -> ChangeBatch {
        try pool.use { db in
            let (records, more) = try Self.page(
                db, "SELECT \(Self.columns), data FROM records WHERE owner = $1 AND change_tag > $2 ORDER BY change_tag LIMIT $3",
                [user, tag, limit.records + 1], limit: limit, hasData: true)
            return ChangeBatch(records: records, lastTag: records.last?.changeTag ?? tag, more: more)
        }
    }

    public func changes(user: String, after tag: Int64, limit: PageLimit, within prefix: String?) throws -> ChangeBatch {
        guard let prefix else { return try changes(user: user, after: tag, limit: limit) }
        return try pool.use { db in
            // The same bytewise range as a look-up (see `records`), on the feed's order.
            let (records, more) = try Self.page(
                db, """
                    SELECT \(Self.columns), data FROM records
                    WHERE owner = $1 AND change_tag > $2 AND path >= $3 AND path < $4 AND (path = $3 OR path >= $5)
                    ORDER BY change_tag LIMIT $6
                    """,
                [user, tag, prefix, prefix + "0", prefix + "/", limit.records + 1], limit: limit, hasData: true)
            return ChangeBatch(records: records, lastTag: records.last?.changeTag ?? tag, more: more)
        }
    }

    public func namesAsset(user: String, assetID: String, within prefix: String) throws -> Bool {
        try pool.use { db in
            // A kept version's asset may be read as a current record's is (`sinkid cat --version`).
            try db.query("""
                SELECT 1 FROM records WHERE owner = $1 AND asset_id = $2 AND NOT deleted
                AND path >= $3 AND path < $4 AND (path = $3 OR path >= $5)
                UNION ALL
                SELECT 1 FROM versions WHERE owner = $1 AND asset_id = $2 AND NOT deleted
                AND path >= $3 AND path < $4 AND (path = $3 OR path >= $5) LIMIT 1
                """, [user, assetID, prefix, prefix + "0", prefix + "/"]).count > 0
        }
    }

    public func manifest(user: String, assetID: String, within prefix: String?) throws -> [ChunkRef]? {
        try pool.use { db in
            // A live record's first, then a kept version's (`sinkid cat --version`).
            let narrowed = prefix.map { [$0, $0 + "0", $0 + "/"] } ?? ["", "", ""]
            let rows = try db.query("""
                SELECT path, asset_chunks FROM (
                    SELECT 0 AS kept, path, asset_chunks FROM records WHERE owner = $1 AND asset_id = $2 AND NOT deleted AND asset_chunks IS NOT NULL
                    AND ($3 = '' OR (path >= $3 AND path < $4 AND (path = $3 OR path >= $5)))
                    UNION ALL
                    SELECT 1, path, asset_chunks FROM versions WHERE owner = $1 AND asset_id = $2 AND NOT deleted AND asset_chunks IS NOT NULL
                    AND ($3 = '' OR (path >= $3 AND path < $4 AND (path = $3 OR path >= $5)))
                ) found ORDER BY kept LIMIT 1
                """, [user, assetID, narrowed[0], narrowed[1], narrowed[2]])
            guard rows.count > 0, let stored = try rows.optionalBytes(0, 1) else { return nil }
            return try Asset.chunks(stored: stored, path: try rows.text(0, 0))
        }
    }

    public func chunkReferences(user: String, after tag: Int64) throws -> ChunkReferences {
        try pool.use { db in
            // The head first: a modify draws its tags under the user's lock and holds it to its commit, so
            // every record of the user at or below the head is committed, and the list read next holds it.
            let head = try db.scalar("SELECT max(change_tag) FROM records WHERE owner = $1", user) ?? 0
            // Kept versions hold their chunks until they expire.
            let rows = try db.query("""
                SELECT path, asset_chunks FROM records WHERE owner = $1 AND change_tag > $2 AND NOT deleted AND asset_chunks IS NOT NULL
                UNION ALL
                SELECT path, asset_chunks FROM versions WHERE owner = $1 AND change_tag > $2 AND NOT deleted AND asset_chunks IS NOT NULL
                """, [user, tag])
            var names = Set<String>()
            for row in 0..<rows.count {
                guard let stored = try rows.optionalBytes(row, 1) else { continue }
                for chunk in try Asset.chunks(stored: stored, path: try rows.text(row, 0)) { names.insert(chunk.sha256) }
            }
            return ChunkReferences(names: names, head: max(head, tag))
        }
    }

    public func records(user: String, prefix: String?, after: String?, limit: PageLimit, includeData: Bool) throws -> RecordListing {
        let columns = includeData ? Self.columns + ", data" : Self.columns
        return try pool.use { db in
            let result: (records: [Record], more: Bool)
            if let prefix {
                // The bytewise range [prefix, prefix + "0") holds the prefix itself, everything below
                // `prefix/` ('0' follows '/'), and siblings such as `prefix-x` that the second test drops.
                result = try Self.page(
                    db, """
                        SELECT \(columns) FROM records
                        WHERE owner = $1 AND path >= $2 AND path < $3 AND (path = $2 OR path >= $4) AND path > $5
                        ORDER BY path LIMIT $6
                        """,
                    [user, prefix, prefix + "0", prefix + "/", after ?? "", limit.records + 1], limit: limit, hasData: includeData)
            } else {
                result = try Self.page(
                    db, "SELECT \(columns) FROM records WHERE owner = $1 AND path > $2 ORDER BY path LIMIT $3",
                    [user, after ?? "", limit.records + 1], limit: limit, hasData: includeData)
            }
            return RecordListing(records: result.records, more: result.more)
        }
    }

    public func headTag(user: String) throws -> Int64 {
        try pool.use { db in try db.scalar("SELECT max(change_tag) FROM records WHERE owner = $1", user) ?? 0 }
    }

    public func historyFloor() throws -> Int64 {
        try pool.use { db in try db.scalar("SELECT value FROM meta WHERE key = 'history_floor'") ?? 0 }
    }

    public func digests(user: String, folder: String, children: Bool) throws -> DigestReply {
        try pool.use { db in
            let rows = try db.query(children ? Self.digestSQL.withChildren : Self.digestSQL.own, [user, FolderDigestTable.parent(of: folder), folder])
            var reading = FolderDigestTable.Reading()
            for row in 0..<rows.count {
                try reading.add(kind: try rows.int64(row, 0), path: try rows.text(row, 1)) { try rows.int64(row, $0 + 2) }
            }
            return reading.reply(folder: folder, children: children)
        }
    }

    /// Folder digests stay as they are, as in SQLite.
    public func sweepTombstones(savedBefore cutoff: Int64, limit: Int) throws -> TombstoneSweep {
        try pool.use { db in
            // User by user, each under the user's lock, as a modify takes it: a tombstone being replaced
            // by a new save is not deleted under it.
            let owners = try db.query("SELECT DISTINCT owner FROM records WHERE deleted AND saved_at < $1", [cutoff])
            var removed = 0
            var floor = try db.scalar("SELECT value FROM meta WHERE key = 'history_floor'") ?? 0
            for row in 0..<owners.count where removed < limit {
                let owner = try owners.text(row, 0)
                let (count, highest) = try db.transaction { () throws -> (Int, Int64) in
                    try Self.lockUser(db, owner)
                    let gone = try db.query("""
                        DELETE FROM records WHERE change_tag IN
                            (SELECT change_tag FROM records WHERE owner = $1 AND deleted AND saved_at < $2 ORDER BY saved_at LIMIT $3)
                        RETURNING change_tag
                        """, [owner, cutoff, limit - removed])
                    var highest: Int64 = 0
                    for row in 0..<gone.count { highest = max(highest, try gone.int64(row, 0)) }
                    // A change token at or above the highest tag removed has seen every removed tombstone.
                    if gone.count > 0 {
                        try db.execute("UPDATE meta SET value = GREATEST(value, $1) WHERE key = 'history_floor'", [highest])
                    }
                    return (gone.count, highest)
                }
                removed += count
                floor = max(floor, highest)
            }
            return TombstoneSweep(removed: removed, floor: floor, more: removed == limit)
        }
    }

    public func assetIDs() throws -> Set<String> {
        try pool.use { db in
            let rows = try db.query("""
                SELECT DISTINCT asset_id FROM records WHERE asset_id IS NOT NULL AND asset_chunks IS NULL
                UNION SELECT DISTINCT asset_id FROM versions WHERE asset_id IS NOT NULL AND asset_chunks IS NULL
                """)
            var ids = Set<String>()
            for row in 0..<rows.count { ids.insert(try rows.text(row, 0)) }
            return ids
        }
    }

    public func close() { pool.close() }
}
