import SinkiRecord
import SinkiSupport

/// Every version kept, and each user's usage, as in SQLite (`SQLiteRecordStore+History.swift`; schema
/// 5): `versions`, `chunk_refs`, `usage` and `users.quota`. Every write of a user's history or usage runs
/// under the user's lock (`lockUser`), as a modify does.
extension PostgresStore {
    static let historySchema = """
        CREATE TABLE versions (
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
            superseded_at BIGINT NOT NULL,
            asset_chunks BYTEA,
            data BYTEA
        );
        ALTER TABLE versions ALTER COLUMN data SET STORAGE EXTERNAL;
        ALTER TABLE versions ALTER COLUMN asset_chunks SET STORAGE EXTERNAL;
        CREATE INDEX versions_path ON versions(owner, path, change_tag);
        CREATE INDEX versions_feed ON versions(owner, change_tag);
        CREATE INDEX versions_expiry ON versions(superseded_at);
        CREATE TABLE chunk_refs (
            owner TEXT COLLATE "C" NOT NULL, chunk TEXT NOT NULL, size BIGINT NOT NULL, live BIGINT NOT NULL, kept BIGINT NOT NULL,
            PRIMARY KEY (owner, chunk)
        );
        CREATE TABLE usage (owner TEXT COLLATE "C" PRIMARY KEY, live_bytes BIGINT NOT NULL, history_bytes BIGINT NOT NULL);
        ALTER TABLE users ADD COLUMN quota BIGINT;
        """

    /// What the records of a database from before history hold, counted into `usage` and `chunk_refs`,
    /// a page of records at a time.
    static func rebuildUsage(_ db: PGConnection) throws {
        var ledgers: [String: UsageLedger] = [:]
        var after: Int64 = 0
        while true {
            let rows = try db.query("""
                SELECT change_tag, owner, path, COALESCE(octet_length(data), 0),
                       CASE WHEN asset_chunks IS NULL THEN COALESCE(asset_size, 0) ELSE 0 END, asset_chunks
                FROM records WHERE NOT deleted AND change_tag > $1 ORDER BY change_tag LIMIT $2
                """, [after, rebuildPage])
            for row in 0..<rows.count {
                let path = try rows.text(row, 2)
                let chunks = try rows.optionalBytes(row, 5).map { try Asset.chunks(stored: $0, path: path) } ?? []
                ledgers[try rows.text(row, 1), default: UsageLedger()]
                    .count(StoredContent(inlineBytes: try rows.int64(row, 3), blobBytes: try rows.int64(row, 4), chunks: chunks), live: 1, kept: 0)
                after = try rows.int64(row, 0)
            }
            guard rows.count == rebuildPage else { break }
        }
        for (user, ledger) in ledgers { _ = try ledger.commit(in: UsageSQL(db: db, user: user, defaultQuota: nil)) }
    }

    /// `UsageTransaction` in PostgreSQL, for one user inside a transaction holding the user's lock.
    struct UsageSQL: UsageTransaction {
        let db: PGConnection
        let user: String
        let defaultQuota: Int64?

        /// Hex names and numbers need no quoting inside an array literal.
        private static func array(_ items: [String]) -> String { "{" + items.joined(separator: ",") + "}" }

        func countChunks(_ changes: [ChunkCountChange]) throws -> [ChunkCounts] {
            // One statement for the whole batch (a 1 GiB file names about a thousand chunks). A new row
            // takes the change as it is; a negative count there (a count already wrong) is dropped below.
            let rows = try db.query("""
                INSERT INTO chunk_refs(owner, chunk, size, live, kept)
                SELECT $1, u.chunk, u.size, u.live, u.kept FROM unnest($2::text[], $3::bigint[], $4::bigint[], $5::bigint[]) AS u(chunk, size, live, kept)
                ON CONFLICT (owner, chunk) DO UPDATE
                SET live = GREATEST(0, chunk_refs.live + excluded.live), kept = GREATEST(0, chunk_refs.kept + excluded.kept)
                RETURNING chunk, live, kept
                """, [user, Self.array(changes.map(\.name)), Self.array(changes.map { String($0.size) }),
                      Self.array(changes.map { String($0.live) }), Self.array(changes.map { String($0.kept) })])
            var counts: [String: ChunkCounts] = [:]
            for row in 0..<rows.count {
                counts[try rows.text(row, 0)] = ChunkCounts(live: try rows.int64(row, 1), kept: try rows.int64(row, 2))
            }
            let forgotten = counts.filter { $0.value.live <= 0 && $0.value.kept <= 0 }.map(\.key)
            if !forgotten.isEmpty {
                try db.execute("DELETE FROM chunk_refs WHERE owner = $1 AND chunk = ANY($2::text[])", [user, Self.array(forgotten)])
            }
            return changes.map { counts[$0.name] ?? ChunkCounts(live: 0, kept: 0) }
        }

        func addUsage(liveBytes: Int64, historyBytes: Int64) throws -> StorageFigures {
            let rows = try db.query("""
                INSERT INTO usage(owner, live_bytes, history_bytes) VALUES ($1, $2, $3)
                ON CONFLICT (owner) DO UPDATE
                SET live_bytes = usage.live_bytes + excluded.live_bytes, history_bytes = usage.history_bytes + excluded.history_bytes
                RETURNING live_bytes, history_bytes, COALESCE((SELECT quota FROM users WHERE name = $1), $4)
                """, [user, liveBytes, historyBytes, defaultQuota])
            return StorageFigures(liveBytes: try rows.int64(0, 0), historyBytes: try rows.int64(0, 1), quotaBytes: try rows.optionalInt64(0, 2))
        }
    }

    // MARK: Reading versions

    /// A version's columns: a record's (`columns`), then its data (or NULL), `saved_at`, `superseded_at`.
    static func versionColumns(table: String, data: Bool, chunks: Bool) -> String {
        let record = chunks ? columns : columns.replacingOccurrences(of: "asset_chunks", with: "NULL::bytea")
        return record + (data ? ", data" : ", NULL::bytea") + ", saved_at, " + (table == "records" ? "NULL::bigint" : "superseded_at")
    }

    static func versionEntry(_ rows: PGResult, _ row: Int, hasData: Bool) throws -> VersionEntry {
        VersionEntry(record: try record(rows, row, hasData: hasData), savedAt: try rows.int64(row, 17), supersededAt: try rows.optionalInt64(row, 18))
    }

    /// The bytewise range of a prefix and everything below it; parameters `first` to `first + 2`.
    static func within(_ first: Int) -> String {
        "path >= $\(first) AND path < $\(first + 1) AND (path = $\(first) OR path >= $\(first + 2))"
    }

    static func range(_ prefix: String) -> [any PGBindable] { [prefix, prefix + "0", prefix + "/"] }

    static func versions(_ db: PGConnection, user: String, path: String, before: Int64?, limit: Int) throws -> VersionList {
        let rows = try db.query("""
            SELECT \(versionColumns(table: "records", data: false, chunks: false)) FROM records WHERE owner = $1 AND path = $2 AND change_tag < $3
            UNION ALL
            SELECT \(versionColumns(table: "versions", data: false, chunks: false)) FROM versions WHERE owner = $1 AND path = $2 AND change_tag < $3
            ORDER BY 1 DESC LIMIT $4
            """, [user, path, before ?? Int64.max, limit + 1])
        var out: [VersionEntry] = []
        for row in 0..<min(rows.count, limit) { out.append(try versionEntry(rows, row, hasData: false)) }
        return VersionList(versions: out, more: rows.count > limit)
    }

    static func version(_ db: PGConnection, user: String, path: String, version: Int64) throws -> VersionEntry? {
        let rows = try db.query("""
            SELECT \(versionColumns(table: "records", data: true, chunks: true)) FROM records WHERE change_tag = $1 AND owner = $2 AND path = $3
            UNION ALL
            SELECT \(versionColumns(table: "versions", data: true, chunks: true)) FROM versions WHERE change_tag = $1 AND owner = $2 AND path = $3
            """, [version, user, path])
        return rows.count == 0 ? nil : try versionEntry(rows, 0, hasData: true)
    }

    /// The live version of each path at or below `prefix` at `at`, by path after `after`; of two a wrong
    /// clock made overlap, the later.
    static func held(_ db: PGConnection, user: String, prefix: String, at: Int64, after: String?, limit: Int?) throws -> VersionList {
        let rows = try db.query("""
            SELECT \(versionColumns(table: "records", data: false, chunks: false)) FROM records
            WHERE owner = $1 AND \(within(2)) AND path > $5 AND saved_at <= $6 AND NOT deleted
            UNION ALL
            SELECT \(versionColumns(table: "versions", data: false, chunks: false)) FROM versions
            WHERE owner = $1 AND \(within(2)) AND path > $5 AND saved_at <= $6 AND superseded_at > $6 AND NOT deleted
            ORDER BY 2, 1 DESC LIMIT $7
            """, [user] + range(prefix) + [after ?? "", at, limit.map { $0 + 1 } ?? Int.max])
        var out: [VersionEntry] = []
        for row in 0..<rows.count {
            let entry = try versionEntry(rows, row, hasData: false)
            if let last = out.last, last.record.path.utf8.elementsEqual(entry.record.path.utf8) { continue }
            if let limit, out.count == limit { return VersionList(versions: out, more: true) }
            out.append(entry)
        }
        return VersionList(versions: out, more: false)
    }

    public func versions(user: String, path: String, before: Int64?, limit: Int) throws -> VersionList {
        try pool.use { db in try Self.versions(db, user: user, path: path, before: before, limit: limit) }
    }

    public func version(user: String, path: String, version: Int64) throws -> VersionEntry? {
        try pool.use { db in try Self.version(db, user: user, path: path, version: version) }
    }

    public func folder(user: String, prefix: String, at: Int64, after: String?, limit: Int) throws -> VersionList {
        try pool.use { db in try Self.held(db, user: user, prefix: prefix, at: at, after: after, limit: limit) }
    }

    // MARK: Restoring and expiring

    public func restore(user: String, _ request: RestoreRequest, device: String) throws -> [RestoreChange] {
        do {
            let changes = try pool.use { db in
                try db.transaction {
                    try Self.lockUser(db, user)
                    let changes = try RestoreStep.run(request, user: user, device: device,
                                                      in: SaveTransactionSQL(db, user: user, policy: policy), now: Clock.now())
                    if request.dryRun { throw DryRun(changes: changes) }
                    if !changes.isEmpty { try db.execute("SELECT pg_notify($1, $2)", [PGChangeSignal.channel, user]) }
                    return changes
                }
            }
            if let last = changes.map(\.record.changeTag).max() { afterCommit?(user, last) }
            return changes
        } catch let dryRun as DryRun {
            return dryRun.unsaved
        }
    }

    public func expireVersions(supersededBefore cutoff: Int64, limit: Int) throws -> VersionExpiry {
        try pool.use { db in
            // User by user, under the user's lock as a modify takes it, so that the usage is not written
            // by two transactions at once.
            let owners = try db.query("SELECT DISTINCT owner FROM versions WHERE superseded_at < $1", [cutoff])
            var removed = 0
            for row in 0..<owners.count where removed < limit {
                let owner = try owners.text(row, 0)
                removed += try db.transaction { () throws -> Int in
                    try Self.lockUser(db, owner)
                    let gone = try db.query("""
                        DELETE FROM versions WHERE change_tag IN
                            (SELECT change_tag FROM versions WHERE owner = $1 AND superseded_at < $2 ORDER BY superseded_at LIMIT $3)
                        RETURNING change_tag, path, deleted, COALESCE(octet_length(data), 0),
                                  CASE WHEN asset_chunks IS NULL THEN COALESCE(asset_size, 0) ELSE 0 END, asset_chunks
                        """, [owner, cutoff, limit - removed])
                    var rows: [ExpiringVersion] = []
                    for index in 0..<gone.count {
                        let path = try gone.text(index, 1)
                        let chunks = try gone.optionalBytes(index, 5).map { try Asset.chunks(stored: $0, path: path) } ?? []
                        rows.append(ExpiringVersion(tag: try gone.int64(index, 0), user: owner, deleted: try gone.bool(index, 2),
                                                    content: StoredContent(inlineBytes: try gone.int64(index, 3), blobBytes: try gone.int64(index, 4),
                                                                           chunks: chunks)))
                    }
                    try ExpiringVersion.count(rows) { user in UsageSQL(db: db, user: user, defaultQuota: policy.defaultQuota) }
                    return rows.count
                }
            }
            return VersionExpiry(removed: removed, more: removed == limit)
        }
    }

    public func usage(user: String) throws -> StorageFigures {
        try pool.use { db in
            let rows = try db.query("""
                SELECT (SELECT live_bytes FROM usage WHERE owner = $1), (SELECT history_bytes FROM usage WHERE owner = $1),
                       COALESCE((SELECT quota FROM users WHERE name = $1), $2)
                """, [user, policy.defaultQuota])
            return StorageFigures(liveBytes: try rows.optionalInt64(0, 0) ?? 0, historyBytes: try rows.optionalInt64(0, 1) ?? 0,
                                  quotaBytes: try rows.optionalInt64(0, 2))
        }
    }

    public func setQuota(user: String, bytes: Int64?) throws {
        try pool.use { db in
            guard try db.query("UPDATE users SET quota = $1 WHERE name = $2", [bytes, user]).affected > 0 else {
                throw AccountError(.unknownUser, "no user \(quoted(user)) on this server")
            }
        }
    }
}

extension PostgresStore.SaveTransactionSQL: HistoryTransaction {
    func chunks(of tag: Int64) throws -> [ChunkRef] {
        let rows = try db.query("SELECT path, asset_chunks FROM records WHERE change_tag = $1 AND asset_chunks IS NOT NULL", [tag])
        guard rows.count > 0, let stored = try rows.optionalBytes(0, 1) else { return [] }
        return try Asset.chunks(stored: stored, path: try rows.text(0, 0))
    }

    func keepVersion(tag: Int64, supersededAt: Int64) throws {
        try db.execute("""
            INSERT INTO versions (change_tag, owner, path, type, asset_id, asset_size, asset_sha256, deleted, base_tag, size, sha256, mode,
                                  modified_at, device, saved_at, moved_from, superseded_at, asset_chunks, data, xattrs)
            SELECT change_tag, owner, path, type, asset_id, asset_size, asset_sha256, deleted, base_tag, size, sha256, mode,
                   modified_at, device, saved_at, moved_from, $2, asset_chunks, data, xattrs
            FROM records WHERE change_tag = $1
            """, [tag, supersededAt])
    }

    func countChunks(_ changes: [ChunkCountChange]) throws -> [ChunkCounts] {
        try PostgresStore.UsageSQL(db: db, user: user, defaultQuota: policy.defaultQuota).countChunks(changes)
    }

    func addUsage(liveBytes: Int64, historyBytes: Int64) throws -> StorageFigures {
        try PostgresStore.UsageSQL(db: db, user: user, defaultQuota: policy.defaultQuota).addUsage(liveBytes: liveBytes, historyBytes: historyBytes)
    }

    func version(path: String, version: Int64) throws -> VersionEntry? {
        try PostgresStore.version(db, user: user, path: path, version: version)
    }

    func held(prefix: String, at: Int64) throws -> [VersionEntry] {
        try PostgresStore.held(db, user: user, prefix: prefix, at: at, after: nil, limit: nil).versions
    }

    func currentRecords(prefix: String) throws -> [Record] {
        let rows = try db.query("""
            SELECT \(PostgresStore.columns.replacingOccurrences(of: "asset_chunks", with: "NULL::bytea")) FROM records
            WHERE owner = $1 AND \(PostgresStore.within(2)) AND NOT deleted ORDER BY path
            """, [user] + PostgresStore.range(prefix))
        return try (0..<rows.count).map { try PostgresStore.record(rows, $0, hasData: false) }
    }
}
