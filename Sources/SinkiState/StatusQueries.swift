import SinkiRecord
import SinkiSupport

/// A local change waiting in the outbox, with what its files row says about it.
public struct PendingRow: Sendable, Equatable {
    public var path: String
    public var queuedAt: Int64
    public var attempts: Int
    /// Why the server refused it (it then waits for `sinkid retry`).
    public var lastError: String?
    /// The files row: present on disk, and the tag last agreed with the server (nil: no row).
    public var present: Bool?
    public var tag: Int64?
}

/// What `sinkid status` reads from a state database: by the running agent's replica, or by the
/// command line itself when no agent runs (then on a read-only connection).
public enum StatusQueries {
    /// Opens a state database for reading only; nothing is created or migrated.
    public static func openReadOnly(_ path: String) throws(SQLiteError) -> SQLiteDatabase {
        try SQLiteDatabase(path: path, readOnly: true)
    }

    /// Outbox entries: refused ones first, then oldest first; at most `limit`. Each part walks its own
    /// partial index (`outbox_refused`, `outbox_order`) from its start, so the cost follows `limit`, not
    /// the outbox.
    public static func pending(_ database: SQLiteDatabase, limit: Int) throws -> [PendingRow] {
        var rows: [PendingRow] = []
        for refused in [true, false] where rows.count < limit {
            try database.query("""
                SELECT o.path, o.queued_at, o.attempts, o.last_error, f.present, f.tag
                FROM outbox o LEFT JOIN files f ON f.path = o.path
                WHERE o.last_error IS \(refused ? "NOT NULL" : "NULL")
                ORDER BY o.queued_at, o.path LIMIT ?
                """, limit - rows.count) { row in
                let hasRow = !row.isNull(4)
                rows.append(PendingRow(path: row.text(0), queuedAt: row.int64(1), attempts: row.int(2), lastError: row.optionalText(3),
                                       present: hasRow ? row.bool(4) : nil, tag: hasRow ? row.int64(5) : nil))
            }
        }
        return rows
    }

    /// Whether the database keeps `root_totals` (one an older sinkid wrote, read without migrating, does not).
    static func hasRootTotals(_ database: SQLiteDatabase) throws -> Bool {
        try database.scalar("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'root_totals'") != nil
    }

    /// Outbox entries in all, and how many of them the server refused.
    public static func counts(_ database: SQLiteDatabase) throws -> (pending: Int, refused: Int) {
        var result = (0, 0)
        let sql = try hasRootTotals(database) ? "SELECT coalesce(sum(outbox), 0), coalesce(sum(refused), 0) FROM root_totals"
            : "SELECT count(*), count(last_error) FROM outbox"
        try database.query(sql) { row in result = (row.int(0), row.int(1)) }
        return result
    }

    /// Remote changes not applied, by path, at most `limit`, and how many there are in all and per root.
    public static func notApplied(_ database: SQLiteDatabase, limit: Int) throws -> (changes: [UnappliedChange], count: Int, byRoot: [String: Int]) {
        // A database last opened by an older sinkid (read here without migrating) has no such table.
        guard try database.scalar("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'unapplied'") != nil else { return ([], 0, [:]) }
        let changes = try StateStore.unappliedChanges(database, limit: limit)
        var byRoot: [String: Int] = [:]
        var count = 0
        try database.query("SELECT substr(path, 1, instr(path, '/') - 1), count(*) FROM unapplied GROUP BY 1") { row in
            byRoot[row.text(0)] = row.int(1)
            count += row.int(1)
        }
        return (changes, count, byRoot)
    }

    /// Outbox entries per root name.
    public static func pendingByRoot(_ database: SQLiteDatabase) throws -> [String: Int] {
        var out: [String: Int] = [:]
        let sql = try hasRootTotals(database) ? "SELECT root, outbox FROM root_totals WHERE outbox > 0"
            : "SELECT substr(path, 1, instr(path, '/') - 1), count(*) FROM outbox GROUP BY 1"
        try database.query(sql) { row in out[row.text(0)] = row.int(1) }
        return out
    }

    /// Files present below a root and their bytes (directories not counted).
    public static func totals(_ database: SQLiteDatabase, root: String) throws -> (files: Int, bytes: Int64) {
        var result = (0, Int64(0))
        if try hasRootTotals(database) {
            try database.query("SELECT files, bytes FROM root_totals WHERE root = ?", root) { row in result = (row.int(0), row.int64(1)) }
            return result
        }
        try database.query("SELECT count(*), coalesce(sum(size), 0) FROM files WHERE present = 1 AND kind != 1 AND path >= ? AND path < ?",
                           root + "/", root + "0") { row in result = (row.int(0), row.int64(1)) }
        return result
    }

    /// The root names the database holds paths for, sorted.
    public static func rootNames(_ database: SQLiteDatabase) throws -> [String] {
        var names: [String] = []
        let sql = try hasRootTotals(database) ? "SELECT root FROM root_totals ORDER BY 1" : """
            SELECT DISTINCT substr(path, 1, instr(path, '/') - 1) FROM
            (SELECT path FROM files UNION SELECT path FROM outbox) ORDER BY 1
            """
        try database.query(sql) { row in
            let name = row.text(0)
            if !name.isEmpty { names.append(name) }
        }
        return names
    }

    /// The change-feed token applied so far and the server it belongs to.
    public static func feed(_ database: SQLiteDatabase) throws -> (token: String?, server: String?) {
        var token: String?, server: String?
        try database.query("SELECT key, value FROM meta WHERE key IN (?, ?)", MetaKey.feedToken, MetaKey.feedServer) { row in
            if row.text(0) == MetaKey.feedToken { token = row.text(1) } else { server = row.text(1) }
        }
        return (token, server)
    }

    /// Puts outbox entries the server refused (at or below `path`, or all) back in line to be sent;
    /// returns their paths. Their attempt counts are kept.
    public static func requeueRefused(_ database: SQLiteDatabase, under path: String?) throws -> [String] {
        var paths: [String] = []
        try database.transaction {
            let filter = path == nil ? "" : " AND (path = ?1 OR (path >= ?1 || '/' AND path < ?1 || '0'))"
            let arguments: [any SQLBindable] = path.map { [$0] } ?? []
            let select = try database.prepare("SELECT path FROM outbox WHERE last_error IS NOT NULL" + filter + " ORDER BY path")
            try select.bind(arguments)
            defer { select.reset() }
            while try select.step() { paths.append(select.text(0)) }
            for found in paths { try database.run("UPDATE outbox SET last_error = NULL WHERE path = ?", found) }
        }
        return paths
    }
}

extension PendingRow {
    /// What the change is, for people: never on the server, deleted, or changed.
    public var kind: String {
        guard let present else { return "modify" }
        if !present { return "delete" }
        return tag == 0 ? "create" : "modify"
    }
}
