import SinkiRecord
import SinkiSupport

/// Queries on the files table.
extension StateStore {
    static let fileColumns = "path, kind, present, size, mtime, ctime, inode, mode, sha256, type, tag, synced_sha256, synced_deleted, moved_from"

    static func readFile(_ row: Statement, offset o: Int32 = 0) -> KnownFile {
        KnownFile(path: row.text(o), kind: RecordKind(code: row.int64(o + 1)), present: row.bool(o + 2), size: row.int64(o + 3),
                  mtime: row.int64(o + 4), ctime: row.int64(o + 5), inode: UInt64(bitPattern: row.int64(o + 6)),
                  mode: UInt32(row.int64(o + 7)), sha256: row.text(o + 8), type: row.text(o + 9), tag: row.int64(o + 10),
                  syncedSHA256: row.optionalText(o + 11), syncedDeleted: row.bool(o + 12), movedFrom: row.optionalText(o + 13))
    }

    public func file(_ path: String) throws(SQLiteError) -> KnownFile? {
        let statement = try database.prepare("SELECT \(Self.fileColumns) FROM files WHERE path = ?")
        try statement.bind([path])
        defer { statement.reset() }
        return try statement.step() ? Self.readFile(statement) : nil
    }

    public func saveFile(_ file: KnownFile) throws(SQLiteError) {
        fileWrites &+= 1
        try database.run("""
            INSERT INTO files(path, kind, present, size, mtime, ctime, inode, mode, sha256, type, tag, synced_sha256, synced_deleted, moved_from)
            VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(path) DO UPDATE SET kind = excluded.kind, present = excluded.present, size = excluded.size,
                mtime = excluded.mtime, ctime = excluded.ctime, inode = excluded.inode, mode = excluded.mode,
                sha256 = excluded.sha256, type = excluded.type, tag = excluded.tag,
                synced_sha256 = excluded.synced_sha256, synced_deleted = excluded.synced_deleted, moved_from = excluded.moved_from
            """, file.path, file.kind.code, file.present, file.size, file.mtime, file.ctime, UInt64(file.inode), file.mode,
            file.sha256, file.type, file.tag, file.syncedSHA256, file.syncedDeleted, file.movedFrom)
        // A row that agrees with version N holds it or a newer one: an unapplied change up to N is settled.
        if file.tag > 0 { try settleUnapplied(file.path, upTo: file.tag) }
    }

    public func removeFile(_ path: String) throws(SQLiteError) {
        fileWrites &+= 1
        try database.run("DELETE FROM files WHERE path = ?", path)
    }

    /// Every row at `path` or below it, in path order.
    public func files(under path: String) throws -> [KnownFile] {
        var out: [KnownFile] = []
        // '/' + 1 is '0': the range [path/, path0) holds exactly the paths below `path`.
        try database.query("SELECT \(Self.fileColumns) FROM files WHERE path = ? OR (path >= ? AND path < ?) ORDER BY path",
                           path, path + "/", path + "0") { out.append(Self.readFile($0)) }
        return out
    }

    /// Rows below root `root` with paths after `after` and up to `last` (to the root's end when nil),
    /// in bytewise path order: one page of a full comparison with the server.
    public func files(root: String, after: String, through last: String?) throws -> [KnownFile] {
        var out: [KnownFile] = []
        try database.query("""
            SELECT \(Self.fileColumns) FROM files WHERE path >= ? AND path < ? AND path > ? AND path <= ? ORDER BY path
            """, root + "/", root + "0", after, last ?? root + "0") { out.append(Self.readFile($0)) }
        return out
    }

    /// Rows present on disk at `path` or below, keyed by path (for reconciling a scan).
    /// What a walk compares with the disk, for every present row at or below `path`, keyed by the path
    /// after `dropping` bytes (the root's name and its slash: the walk's relative paths). Five numbers
    /// a row, no text but the key: at a million files the full rows took hundreds of MiB and most of a
    /// restart's time, while only the few that differ are needed whole (`file(_:)`).
    public func presentStats(under path: String, dropping: Int) throws -> [String: KnownStat] {
        var out: [String: KnownStat] = [:]
        let estimate = try database.scalar("SELECT count(*) FROM files WHERE path >= ? AND path < ?", path, path + "0") ?? 0
        out.reserveCapacity(Int(estimate) + 1)
        try database.query("SELECT path, kind, size, mtime, ctime, inode, mode FROM files WHERE present = 1 AND (path = ? OR (path >= ? AND path < ?))",
                           path, path + "/", path + "0") { row in
            let full = row.text(0)
            let key = full.utf8.count > dropping ? String(full.utf8.dropFirst(dropping))! : ""
            out[key] = KnownStat(kind: RecordKind(code: row.int64(1)), size: row.int64(2), mtime: row.int64(3), ctime: row.int64(4),
                                 inode: UInt64(bitPattern: row.int64(5)), mode: UInt32(row.int64(6)))
        }
        return out
    }

    public func presentFiles(under path: String) throws -> [String: KnownFile] {
        var out: [String: KnownFile] = [:]
        let estimate = try database.scalar("SELECT count(*) FROM files WHERE path >= ? AND path < ?", path, path + "0") ?? 0
        out.reserveCapacity(Int(estimate) + 1)
        try database.query("SELECT \(Self.fileColumns) FROM files WHERE present = 1 AND (path = ? OR (path >= ? AND path < ?))",
                           path, path + "/", path + "0") { row in
            let file = Self.readFile(row)
            out[file.path] = file
        }
        return out
    }

    /// Counts of files present, and their bytes, below a root.
    public func totals(root: String) throws -> (files: Int, bytes: Int64) {
        try StatusQueries.totals(database, root: root)
    }
}
