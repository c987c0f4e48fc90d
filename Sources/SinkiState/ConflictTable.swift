import SinkiRecord
import SinkiSupport

/// A conflict the `ask` rule left for `sinkid resolve`: both versions kept aside, nothing
/// overwritten, the local change held back from the server until it is settled.
public struct WaitingConflict: Sendable, Equatable {
    public var path: String
    /// When it was first found.
    public var detectedAt: Int64
    /// The version on this machine when it was found.
    public var local: ConflictVersion
    /// The latest version from the server (a newer one replaces it while the conflict waits).
    public var remote: ConflictVersion
    /// The remote record's tag, type and mode: what `--keep local` bases on, what `--keep remote` writes.
    public var remoteTag: Int64
    public var remoteType: String
    public var remoteMode: UInt32
    /// Its record on the server, which every device of the user lists (`SharedConflict`): 0 while not
    /// saved yet, the record's tag once saved, `notShared` when it cannot be (another device's record
    /// holds the path, or the token may not write there). A shared one whose record is gone from the
    /// server was settled on another device.
    public var sharedTag: Int64

    /// `sharedTag` of a conflict kept on this device alone.
    public static let notShared: Int64 = -1

    public init(path: String, detectedAt: Int64, local: ConflictVersion, remote: ConflictVersion, remoteTag: Int64, remoteType: String,
                remoteMode: UInt32, sharedTag: Int64 = 0) {
        self.path = path
        self.detectedAt = detectedAt
        self.local = local
        self.remote = remote
        self.remoteTag = remoteTag
        self.remoteType = remoteType
        self.remoteMode = remoteMode
        self.sharedTag = sharedTag
    }

    /// The remote version as a record without content (its bytes are in `remote.copy`).
    public var remoteRecord: Record {
        Record(path: path, type: remoteType, deleted: remote.deleted, changeTag: remoteTag, size: remote.deleted ? 0 : remote.size,
               sha256: remote.deleted ? "" : remote.sha256, mode: remoteMode, modifiedAt: remote.modifiedAt, device: remote.device)
    }
}

/// Queries on the `conflicts` table.
extension StateStore {
    static let conflictsSchema = """
        CREATE TABLE IF NOT EXISTS conflicts(
            path TEXT PRIMARY KEY,
            detected_at INTEGER NOT NULL,
            local_device TEXT NOT NULL, local_deleted INTEGER NOT NULL, local_size INTEGER NOT NULL,
            local_sha256 TEXT NOT NULL, local_mtime INTEGER NOT NULL, local_copy TEXT,
            remote_device TEXT NOT NULL, remote_deleted INTEGER NOT NULL, remote_size INTEGER NOT NULL,
            remote_sha256 TEXT NOT NULL, remote_mtime INTEGER NOT NULL, remote_copy TEXT,
            remote_tag INTEGER NOT NULL, remote_type TEXT NOT NULL, remote_mode INTEGER NOT NULL,
            shared_tag INTEGER NOT NULL DEFAULT 0
        ) WITHOUT ROWID;
        """

    static let conflictColumns = """
        path, detected_at, local_device, local_deleted, local_size, local_sha256, local_mtime, local_copy,
        remote_device, remote_deleted, remote_size, remote_sha256, remote_mtime, remote_copy, remote_tag, remote_type, remote_mode, shared_tag
        """

    static func readConflict(_ row: Statement) -> WaitingConflict {
        WaitingConflict(
            path: row.text(0), detectedAt: row.int64(1),
            local: ConflictVersion(device: row.text(2), deleted: row.bool(3), size: row.int64(4), sha256: row.text(5), modifiedAt: row.int64(6),
                                copy: row.optionalText(7)),
            remote: ConflictVersion(device: row.text(8), deleted: row.bool(9), size: row.int64(10), sha256: row.text(11), modifiedAt: row.int64(12),
                                 copy: row.optionalText(13)),
            remoteTag: row.int64(14), remoteType: row.text(15), remoteMode: UInt32(truncatingIfNeeded: row.int64(16)), sharedTag: row.int64(17))
    }

    public func saveConflict(_ conflict: WaitingConflict) throws(SQLiteError) {
        let local = conflict.local, remote = conflict.remote
        try database.run("INSERT OR REPLACE INTO conflicts(\(Self.conflictColumns)) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         conflict.path, conflict.detectedAt, local.device, local.deleted, local.size, local.sha256, local.modifiedAt, local.copy,
                         remote.device, remote.deleted, remote.size, remote.sha256, remote.modifiedAt, remote.copy,
                         conflict.remoteTag, conflict.remoteType, conflict.remoteMode, conflict.sharedTag)
    }

    /// Notes the tag of the conflict's record on the server (or `WaitingConflict.notShared`).
    public func setConflictShared(_ path: String, tag: Int64) throws(SQLiteError) {
        try database.run("UPDATE conflicts SET shared_tag = ? WHERE path = ?", tag, path)
    }

    public func conflict(_ path: String) throws(SQLiteError) -> WaitingConflict? {
        let statement = try database.prepare("SELECT \(Self.conflictColumns) FROM conflicts WHERE path = ?")
        try statement.bind([path])
        defer { statement.reset() }
        return try statement.step() ? Self.readConflict(statement) : nil
    }

    public func removeConflict(_ path: String) throws(SQLiteError) {
        try database.run("DELETE FROM conflicts WHERE path = ?", path)
    }

    /// Every waiting conflict, oldest first.
    public func conflicts() throws -> [WaitingConflict] {
        try StatusQueries.conflicts(database)
    }
}

extension StatusQueries {
    /// Conflicts waiting for `sinkid resolve`, oldest first; none in a database from before the table.
    public static func conflicts(_ database: SQLiteDatabase) throws -> [WaitingConflict] {
        guard try database.scalar("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'conflicts'") != nil else { return [] }
        var out: [WaitingConflict] = []
        try database.query("SELECT \(StateStore.conflictColumns) FROM conflicts ORDER BY detected_at, path") { out.append(StateStore.readConflict($0)) }
        return out
    }
}
