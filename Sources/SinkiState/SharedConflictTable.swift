import SinkiRecord
import SinkiSupport

/// A conflict the `ask` rule left, as the server holds it for every device of the user: its record in
/// the reserved namespace (`SharedConflict`), as this agent last read it. An observation of the
/// server, like the Remote tree: written in the transaction that moves the feed token, or from the
/// answer to this agent's own save of it.
public struct SharedConflictRow: Sendable, Equatable {
    /// The path in conflict (`SaveGames/player1.save`), not the record's.
    public var path: String
    /// The conflict record's changeTag on the server.
    public var tag: Int64
    /// The version the record carries, kept aside on the device that found the conflict: its facts.
    public var device: String
    public var size: Int64
    public var sha256: String
    public var mode: UInt32
    public var modifiedAt: Int64
    public var type: String
    /// When this agent first read it (nanoseconds since the epoch).
    public var seenAt: Int64
    /// Settled here (`sinkid resolve`, or both sides came to agree): the record's tombstone is to be
    /// sent, and until the server has it the conflict is no longer listed here.
    public var settled: Bool

    public init(path: String, tag: Int64, device: String, size: Int64, sha256: String, mode: UInt32, modifiedAt: Int64, type: String,
                seenAt: Int64, settled: Bool = false) {
        self.path = path
        self.tag = tag
        self.device = device
        self.size = size
        self.sha256 = sha256
        self.mode = mode
        self.modifiedAt = modifiedAt
        self.type = type
        self.seenAt = seenAt
        self.settled = settled
    }

    /// The row for a conflict record read from the server (nil for a tombstone or a record outside
    /// the namespace).
    init?(_ record: Record, seenAt: Int64) {
        guard !record.deleted, let path = SharedConflict.conflictPath(of: record.path) else { return nil }
        self.init(path: path, tag: record.changeTag, device: record.device, size: record.size, sha256: record.sha256, mode: record.mode,
                  modifiedAt: record.modifiedAt, type: record.type, seenAt: seenAt)
    }

    /// The version it carries, as `sinkid conflicts` lists a side.
    public var version: ConflictVersion {
        ConflictVersion(device: device, deleted: false, size: size, sha256: sha256, modifiedAt: modifiedAt, copy: nil)
    }
}

extension StateStore {
    static let sharedConflictsSchema = """
        CREATE TABLE IF NOT EXISTS shared_conflicts(
            path TEXT PRIMARY KEY,
            tag INTEGER NOT NULL,
            device TEXT NOT NULL,
            size INTEGER NOT NULL,
            sha256 TEXT NOT NULL,
            mode INTEGER NOT NULL,
            mtime INTEGER NOT NULL,
            type TEXT NOT NULL,
            seen_at INTEGER NOT NULL,
            settled INTEGER NOT NULL DEFAULT 0
        ) WITHOUT ROWID;
        """

    static let sharedConflictColumns = "path, tag, device, size, sha256, mode, mtime, type, seen_at, settled"

    static func readSharedConflict(_ row: Statement) -> SharedConflictRow {
        SharedConflictRow(path: row.text(0), tag: row.int64(1), device: row.text(2), size: row.int64(3), sha256: row.text(4),
                          mode: UInt32(truncatingIfNeeded: row.int64(5)), modifiedAt: row.int64(6), type: row.text(7), seenAt: row.int64(8),
                          settled: row.bool(9))
    }

    public func sharedConflict(_ path: String) throws(SQLiteError) -> SharedConflictRow? {
        let statement = try database.prepare("SELECT \(Self.sharedConflictColumns) FROM shared_conflicts WHERE path = ?")
        try statement.bind([path])
        defer { statement.reset() }
        return try statement.step() ? Self.readSharedConflict(statement) : nil
    }

    /// Every conflict record read from the server and not settled here, oldest first.
    public func sharedConflicts(includingSettled: Bool = false) throws -> [SharedConflictRow] {
        var out: [SharedConflictRow] = []
        try database.query("SELECT \(Self.sharedConflictColumns) FROM shared_conflicts \(includingSettled ? "" : "WHERE settled = 0 ")ORDER BY seen_at, path") {
            out.append(Self.readSharedConflict($0))
        }
        return out
    }

    /// Records what the server holds for `path`'s conflict: `row`, or nothing (its tombstone). A row
    /// already known keeps when it was first seen; one settled here stays settled while the server
    /// still holds that very version.
    public func observeSharedConflict(_ path: String, _ row: SharedConflictRow?) throws(SQLiteError) {
        guard var row else {
            try database.run("DELETE FROM shared_conflicts WHERE path = ?", path)
            return
        }
        if let known = try sharedConflict(path) {
            row.seenAt = known.seenAt
            row.settled = known.settled && known.tag == row.tag
        }
        try database.run("INSERT OR REPLACE INTO shared_conflicts(\(Self.sharedConflictColumns)) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         row.path, row.tag, row.device, row.size, row.sha256, Int64(row.mode), row.modifiedAt, row.type, row.seenAt, row.settled)
    }

    /// Marks `path`'s conflict record settled here: its tombstone is to be sent.
    public func settleSharedConflict(_ path: String) throws(SQLiteError) {
        try database.run("UPDATE shared_conflicts SET settled = 1 WHERE path = ?", path)
    }
}
