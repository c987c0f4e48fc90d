import SinkiSupport

/// An upload in flight to a tus server, as the state database keeps it: the file's identity when the
/// upload began, and the client's `TusUploadState` (encoded), so a later run resumes it.
public struct TusUploadEntry: Sendable, Equatable {
    /// The file (an absolute path for `sinkid upload`; a record path for the agent).
    public var path: String
    /// The tus endpoint it goes to.
    public var endpoint: String
    public var size: Int64
    public var mtime: Int64
    public var inode: UInt64
    /// Hex SHA-256 of the content, when known (the agent knows it; `sinkid upload` does not hash).
    public var sha256: String
    /// `TusUploadState.encoded`.
    public var state: String
    public var updatedAt: Int64

    public init(path: String, endpoint: String, size: Int64, mtime: Int64, inode: UInt64, sha256: String = "", state: String,
                updatedAt: Int64 = Clock.now()) {
        self.path = path
        self.endpoint = endpoint
        self.size = size
        self.mtime = mtime
        self.inode = inode
        self.sha256 = sha256
        self.state = state
        self.updatedAt = updatedAt
    }

    /// Whether the file still is the one the upload began with.
    public func matches(size: Int64, mtime: Int64, inode: UInt64) -> Bool {
        self.size == size && self.mtime == mtime && self.inode == inode
    }
}

/// Queries on the `tus_uploads` table (one row per file and endpoint).
extension StateStore {
    static let tusUploadsSchema = """
        CREATE TABLE IF NOT EXISTS tus_uploads(path TEXT NOT NULL, endpoint TEXT NOT NULL, size INTEGER NOT NULL,
            mtime INTEGER NOT NULL, inode INTEGER NOT NULL, sha256 TEXT NOT NULL DEFAULT '', state TEXT NOT NULL,
            updated_at INTEGER NOT NULL, PRIMARY KEY(path, endpoint)) WITHOUT ROWID;
        """

    public func tusUpload(path: String, endpoint: String) throws(SQLiteError) -> TusUploadEntry? {
        let statement = try database.prepare("SELECT size, mtime, inode, sha256, state, updated_at FROM tus_uploads WHERE path = ? AND endpoint = ?")
        try statement.bind([path, endpoint])
        defer { statement.reset() }
        guard try statement.step() else { return nil }
        return TusUploadEntry(path: path, endpoint: endpoint, size: statement.int64(0), mtime: statement.int64(1),
                              inode: UInt64(bitPattern: statement.int64(2)), sha256: statement.text(3), state: statement.text(4),
                              updatedAt: statement.int64(5))
    }

    public func saveTusUpload(_ entry: TusUploadEntry) throws(SQLiteError) {
        try database.run("""
            INSERT INTO tus_uploads(path, endpoint, size, mtime, inode, sha256, state, updated_at) VALUES(?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(path, endpoint) DO UPDATE SET size = excluded.size, mtime = excluded.mtime, inode = excluded.inode,
                sha256 = excluded.sha256, state = excluded.state, updated_at = excluded.updated_at
            """, entry.path, entry.endpoint, entry.size, entry.mtime, entry.inode, entry.sha256, entry.state, entry.updatedAt)
    }

    public func removeTusUpload(path: String, endpoint: String) throws(SQLiteError) {
        try database.run("DELETE FROM tus_uploads WHERE path = ? AND endpoint = ?", path, endpoint)
    }

    /// Every upload in flight, oldest first (for status).
    public func tusUploads() throws -> [TusUploadEntry] {
        var out: [TusUploadEntry] = []
        try database.query("SELECT path, endpoint, size, mtime, inode, sha256, state, updated_at FROM tus_uploads ORDER BY updated_at") { row in
            out.append(TusUploadEntry(path: row.text(0), endpoint: row.text(1), size: row.int64(2), mtime: row.int64(3),
                                      inode: UInt64(bitPattern: row.int64(4)), sha256: row.text(5), state: row.text(6), updatedAt: row.int64(7)))
        }
        return out
    }
}
