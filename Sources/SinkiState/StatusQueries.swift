import SinkiRecord
import SinkiSupport

/// A local change to send: a path whose Local entry differs from Synced.
public struct PendingRow: Sendable, Equatable {
    public var path: String
    /// On disk now.
    public var present: Bool
    /// The version last agreed with the server (0: none).
    public var tag: Int64
    /// The agreed version was live (false: never agreed, or agreed deleted).
    public var syncedLive: Bool
    /// When the file on disk was last modified (0 for a delete).
    public var modifiedAt: Int64

    /// What the change is, for people: new to the server, deleted, or changed.
    public var kind: String {
        if !present { return "delete" }
        return syncedLive ? "modify" : "create"
    }
}

/// What `sinkid status` reads from a state database: by the running agent's replica, or by the
/// command line itself when no agent runs (then on a read-only connection).
public enum StatusQueries {
    /// Opens a state database for reading only; nothing is created or migrated.
    public static func openReadOnly(_ path: String) throws(SQLiteError) -> SQLiteDatabase {
        try SQLiteDatabase(path: path, readOnly: true)
    }

    /// Whether the database holds the three trees (one an older sinkid wrote, read without migrating,
    /// does not: it shows nothing pending then).
    static func hasTrees(_ database: SQLiteDatabase) throws -> Bool {
        try database.scalar("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tree'") != nil
    }

    /// The first local changes to send, by path, at most `limit` (a walk of the `tree_local_work`
    /// index from its start: the cost follows `limit`).
    public static func pending(_ database: SQLiteDatabase, limit: Int) throws -> [PendingRow] {
        guard try hasTrees(database) else { return [] }
        var rows: [PendingRow] = []
        try database.query("""
            SELECT path, l_kind IS NOT NULL, s_tag, s_kind IS NOT NULL, l_mtime FROM tree INDEXED BY tree_local_work
            WHERE \(StateStore.localDiffers) ORDER BY path LIMIT ?
            """, limit) { row in
            rows.append(PendingRow(path: row.text(0), present: row.bool(1), tag: row.int64(2), syncedLive: row.bool(3), modifiedAt: row.int64(4)))
        }
        return rows
    }

    /// Paths whose Local differs from Synced, and whose Remote does, in all.
    public static func counts(_ database: SQLiteDatabase) throws -> (local: Int, remote: Int) {
        guard try hasTrees(database) else { return (0, 0) }
        var result = (0, 0)
        try database.query("SELECT coalesce(sum(local_changes), 0), coalesce(sum(remote_changes), 0) FROM root_totals") { row in
            result = (row.int(0), row.int(1))
        }
        return result
    }

    /// The bytes the remote changes still to apply bring, in all (schema 12 on; the agent's own
    /// database, which it has upgraded).
    public static func remoteBytes(_ database: SQLiteDatabase) throws -> Int64 {
        guard try hasTrees(database) else { return 0 }
        return try database.scalar("SELECT coalesce(sum(remote_bytes), 0) FROM root_totals") ?? 0
    }

    /// Per root name: files present and their bytes, local and remote changes.
    public static func byRoot(_ database: SQLiteDatabase) throws -> [String: (files: Int, bytes: Int64, local: Int, remote: Int)] {
        guard try hasTrees(database) else { return [:] }
        var out: [String: (files: Int, bytes: Int64, local: Int, remote: Int)] = [:]
        try database.query("SELECT root, files, bytes, local_changes, remote_changes FROM root_totals") { row in
            out[row.text(0)] = (row.int(1), row.int64(2), row.int(3), row.int(4))
        }
        return out
    }

    /// Files present below a root and their bytes (folders not counted).
    public static func totals(_ database: SQLiteDatabase, root: String) throws -> (files: Int, bytes: Int64) {
        guard let totals = try byRoot(database)[root] else { return (0, 0) }
        return (totals.files, totals.bytes)
    }

    /// The root names the database holds paths for, sorted.
    public static func rootNames(_ database: SQLiteDatabase) throws -> [String] {
        guard try hasTrees(database) else { return [] }
        var names: [String] = []
        try database.query("SELECT root FROM root_totals ORDER BY 1") { row in
            let name = row.text(0)
            if !name.isEmpty { names.append(name) }
        }
        return names
    }

    /// The change-feed token read so far and the server it belongs to.
    public static func feed(_ database: SQLiteDatabase) throws -> (token: String?, server: String?) {
        var token: String?, server: String?
        try database.query("SELECT key, value FROM meta WHERE key IN (?, ?)", MetaKey.feedToken, MetaKey.feedServer) { row in
            if row.text(0) == MetaKey.feedToken { token = row.text(1) } else { server = row.text(1) }
        }
        return (token, server)
    }

    /// The last full comparison with the server, if any ran.
    public static func lastVerify(_ database: SQLiteDatabase) throws -> VerifyRecord? {
        var values: [String: String] = [:]
        try database.query("SELECT key, value FROM meta WHERE key LIKE 'verify.%'") { values[$0.text(0)] = $0.text(1) }
        guard let at = values[MetaKey.verifyAt].flatMap({ Int64($0) }), let result = values[MetaKey.verifyResult] else { return nil }
        let differing = values[MetaKey.verifyDiffering].map { $0.split(separator: "\n").map(String.init) } ?? []
        return VerifyRecord(finishedAt: at, result: result, repaired: values[MetaKey.verifyRepaired].flatMap { Int($0) } ?? 0,
                            differing: differing, detail: values[MetaKey.verifyDetail])
    }
}
