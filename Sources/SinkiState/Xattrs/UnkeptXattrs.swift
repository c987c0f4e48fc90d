import SinkiRecord
import SinkiSupport

/// Extended attributes a write could not keep on this device's file system (issue 25), by path: the
/// names, and why. For those names the server's values stand in what the file here is taken to be
/// (`XattrSet.effective`), so a file system without them never sends their removal back; status lists
/// each path as skipped with the reason. Replaced by the next write of the path, gone with its file.
extension StateStore {
    static let unkeptXattrsSchema = """
        CREATE TABLE IF NOT EXISTS xattrs_unkept(
            path TEXT PRIMARY KEY,
            names TEXT NOT NULL,
            reason TEXT NOT NULL
        ) WITHOUT ROWID;
        """

    /// The names not kept at `path`.
    func unkeptXattrs(_ path: String) throws -> Set<String> {
        var names = Set<String>()
        try database.query("SELECT names FROM xattrs_unkept WHERE path = ?", path) { row in
            var reader = JSONReader(Array(row.text(0).utf8))
            try reader.readArray { names.insert(try $0.readString()) }
        }
        return names
    }

    /// Whether some attribute was not kept at `path`.
    func hasUnkeptXattrs(_ path: String) throws -> Bool {
        try database.scalar("SELECT count(*) FROM xattrs_unkept WHERE path = ?", path) ?? 0 > 0
    }

    /// Records what the last write of `path` could not keep (nil: it kept everything).
    func setUnkeptXattrs(_ path: String, _ shortfall: XattrShortfall?) throws {
        guard let shortfall, !shortfall.names.isEmpty else {
            try forgetUnkeptXattrs(path)
            return
        }
        var names = JSONWriter()
        names.beginArray()
        for name in shortfall.names { names.string(name) }
        names.endArray()
        try database.run("""
            INSERT INTO xattrs_unkept(path, names, reason) VALUES(?, ?, ?)
            ON CONFLICT(path) DO UPDATE SET names = excluded.names, reason = excluded.reason
            """, path, String(decoding: names.bytes, as: UTF8.self), shortfall.reason)
    }

    func forgetUnkeptXattrs(_ path: String) throws(SQLiteError) {
        try database.run("DELETE FROM xattrs_unkept WHERE path = ?", path)
    }

    /// The paths with attributes not kept, with what status says of each, in path order, at most `limit`;
    /// and how many there are.
    func unkeptXattrList(limit: Int) throws -> (entries: [(path: String, reason: String)], count: Int) {
        var entries: [(path: String, reason: String)] = []
        try database.query("SELECT path, names, reason FROM xattrs_unkept ORDER BY path LIMIT ?", limit) { row in
            var reader = JSONReader(Array(row.text(1).utf8))
            var names: [String] = []
            try reader.readArray { names.append(try $0.readString()) }
            entries.append((row.text(0), XattrShortfall(names: names, reason: row.text(2)).description))
        }
        let count = try database.scalar("SELECT count(*) FROM xattrs_unkept") ?? 0
        return (entries, Int(count))
    }
}

extension StateStore {
    /// Moves what was not kept at `from` and below it to `to` (the files were renamed there).
    func moveUnkeptXattrs(from: String, to: String) throws {
        var moving: [(path: String, names: String, reason: String)] = []
        try database.query("SELECT path, names, reason FROM xattrs_unkept WHERE path = ? OR (path >= ? AND path < ?)",
                           from, from + "/", from + "0") { moving.append(($0.text(0), $0.text(1), $0.text(2))) }
        for row in moving {
            let target = to + String(decoding: row.path.utf8.dropFirst(from.utf8.count), as: UTF8.self)
            try database.run("DELETE FROM xattrs_unkept WHERE path = ?", row.path)
            try database.run("""
                INSERT INTO xattrs_unkept(path, names, reason) VALUES(?, ?, ?)
                ON CONFLICT(path) DO UPDATE SET names = excluded.names, reason = excluded.reason
                """, target, row.names, row.reason)
        }
    }
}
