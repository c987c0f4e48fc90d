import SinkiRecord
import SinkiSupport

/// Reading the `tree` table, and writing each tree's columns on their own: the local observer writes
/// Local, the feed reader Remote, the executor Synced (and what its own I/O made of Local).
extension StateStore {
    static let treeColumns = """
        path, l_kind, l_hash, l_size, l_mtime, l_ctime, l_inode, l_mode, l_type, s_tag, s_kind, s_hash,
        r_tag, r_kind, r_hash, r_size, r_type, r_mode, r_mtime, r_device, r_moved_from, r_asset, r_asset_manifest,
        l_perm, s_perm, r_perm, r_incomplete, l_xattrs, s_xattrs, r_xattrs, r_xattr_data
        """

    static func readRow(_ row: Statement, offset o: Int32 = 0) -> TreeRow {
        var out = TreeRow(path: row.text(o))
        if !row.isNull(o + 1) {
            out.local = LocalFacts(kind: RecordKind(code: row.int64(o + 1)), hash: row.text(o + 2), size: row.int64(o + 3),
                                   mtime: row.int64(o + 4), ctime: row.int64(o + 5), inode: UInt64(bitPattern: row.int64(o + 6)),
                                   mode: UInt32(truncatingIfNeeded: row.int64(o + 7)), type: row.text(o + 8),
                                   perm: UInt32(truncatingIfNeeded: row.int64(o + 23)), xattrs: row.text(o + 27))
        }
        let syncedTag = row.int64(o + 9)
        if syncedTag != 0 || !row.isNull(o + 10) {
            out.synced = SyncedFacts(tag: syncedTag, kind: row.isNull(o + 10) ? nil : RecordKind(code: row.int64(o + 10)), hash: row.text(o + 11),
                                     perm: UInt32(truncatingIfNeeded: row.int64(o + 24)), xattrs: row.text(o + 28))
        }
        let remoteTag = row.int64(o + 12)
        if remoteTag != 0 {
            out.remote = RemoteFacts(tag: remoteTag, kind: row.isNull(o + 13) ? nil : RecordKind(code: row.int64(o + 13)), hash: row.text(o + 14),
                                     size: row.int64(o + 15), type: row.text(o + 16), mode: UInt32(truncatingIfNeeded: row.int64(o + 17)),
                                     mtime: row.int64(o + 18), device: row.text(o + 19), movedFrom: row.optionalText(o + 20),
                                     assetID: row.optionalText(o + 21), assetIsManifest: row.bool(o + 22),
                                     perm: UInt32(truncatingIfNeeded: row.int64(o + 25)), incomplete: row.bool(o + 26),
                                     xattrs: row.optionalBlob(o + 30).flatMap(ExtendedAttributes.init(encoded:)) ?? .none,
                                     xattrDigest: row.text(o + 29))
        }
        return out
    }

    public func row(_ path: String) throws(SQLiteError) -> TreeRow? {
        let statement = try database.prepare("SELECT \(Self.treeColumns) FROM tree WHERE path = ?")
        try statement.bind([path])
        defer { statement.reset() }
        return try statement.step() ? Self.readRow(statement) : nil
    }

    /// The row at `path` or an empty one.
    public func rowOrEmpty(_ path: String) throws(SQLiteError) -> TreeRow { try row(path) ?? TreeRow(path: path) }

    /// Every row at `path` or below it, in bytewise path order.
    public func rows(under path: String) throws -> [TreeRow] {
        var out: [TreeRow] = []
        // '/' + 1 is '0': the range [path/, path0) holds exactly the paths below `path`.
        try database.query("SELECT \(Self.treeColumns) FROM tree WHERE path = ? OR (path >= ? AND path < ?) ORDER BY path",
                           path, path + "/", path + "0") { out.append(Self.readRow($0)) }
        return out
    }

    /// Rows strictly below `path` whose Local holds something, in bytewise path order.
    public func presentRows(below path: String) throws -> [TreeRow] {
        var out: [TreeRow] = []
        try database.query("SELECT \(Self.treeColumns) FROM tree WHERE path >= ? AND path < ? AND l_kind IS NOT NULL ORDER BY path",
                           path + "/", path + "0") { out.append(Self.readRow($0)) }
        return out
    }

    /// Rows below root `root` after `after` and up to `last` (to the root's end when nil), in bytewise
    /// path order: one page of a full comparison with the server.
    public func rows(root: String, after: String, through last: String?) throws -> [TreeRow] {
        var out: [TreeRow] = []
        try database.query("SELECT \(Self.treeColumns) FROM tree WHERE path >= ? AND path < ? AND path > ? AND path <= ? ORDER BY path",
                           root + "/", root + "0", after, last ?? root + "0") { out.append(Self.readRow($0)) }
        return out
    }

    // MARK: Writing one tree

    /// Sets the Local tree's entry for `path` (nil: nothing on disk).
    public func setLocal(_ path: String, _ local: LocalFacts?) throws(SQLiteError) {
        treeWrites &+= 1
        if let local {
            try database.run("""
                INSERT INTO tree(path, l_kind, l_hash, l_size, l_mtime, l_ctime, l_inode, l_mode, l_type, l_perm, l_xattrs)
                VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT(path) DO UPDATE SET l_kind = excluded.l_kind, l_hash = excluded.l_hash, l_size = excluded.l_size,
                    l_mtime = excluded.l_mtime, l_ctime = excluded.l_ctime, l_inode = excluded.l_inode, l_mode = excluded.l_mode,
                    l_type = excluded.l_type, l_perm = excluded.l_perm, l_xattrs = excluded.l_xattrs
                """, path, local.kind.code, local.hash, local.size, local.mtime, local.ctime, local.inode, local.mode, local.type, local.perm,
                local.xattrs)
        } else {
            try database.run("""
                UPDATE tree SET l_kind = NULL, l_hash = '', l_size = 0, l_mtime = 0, l_ctime = 0, l_inode = 0, l_mode = 0, l_perm = 0,
                    l_xattrs = '' WHERE path = ?
                """, path)
            // What this device could not keep of the path's attributes goes with the file.
            try forgetUnkeptXattrs(path)
            try dropIfEmpty(path)
        }
    }

    /// Sets the Synced tree's entry for `path` (nil: agreed on nothing).
    public func setSynced(_ path: String, _ synced: SyncedFacts?) throws(SQLiteError) {
        treeWrites &+= 1
        let synced = synced ?? SyncedFacts(tag: 0, kind: nil)
        try database.run("""
            INSERT INTO tree(path, s_tag, s_kind, s_hash, s_perm, s_xattrs) VALUES(?, ?, ?, ?, ?, ?)
            ON CONFLICT(path) DO UPDATE SET s_tag = excluded.s_tag, s_kind = excluded.s_kind, s_hash = excluded.s_hash, s_perm = excluded.s_perm,
                s_xattrs = excluded.s_xattrs
            """, path, synced.tag, synced.kind?.code, synced.hash, synced.perm, synced.xattrs)
        if synced.tag == 0 && synced.kind == nil { try dropIfEmpty(path) }
    }

    /// Writes the Remote columns of `path` as they are (the digests are the caller's: `RemoteTree`).
    func writeRemote(_ path: String, _ remote: RemoteFacts?) throws(SQLiteError) {
        treeWrites &+= 1
        if let remote {
            try database.run("""
                INSERT INTO tree(path, r_tag, r_kind, r_hash, r_size, r_type, r_mode, r_mtime, r_device, r_moved_from, r_asset, r_asset_manifest,
                    r_perm, r_incomplete, r_xattrs, r_xattr_data)
                VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT(path) DO UPDATE SET \(Self.remoteAssignments)
                """, path, remote.tag, remote.kind?.code, remote.hash, remote.size, remote.type, remote.mode, remote.mtime, remote.device,
                remote.movedFrom, remote.assetID, remote.assetIsManifest, remote.perm, remote.incomplete, remote.xattrDigest,
                remote.xattrs.isEmpty ? nil : remote.xattrs.encoded)
        } else {
            try database.run("""
                UPDATE tree SET r_tag = 0, r_kind = NULL, r_hash = '', r_size = 0, r_type = '', r_mode = 0, r_mtime = 0, r_device = '',
                    r_moved_from = NULL, r_asset = NULL, r_asset_manifest = 0, r_perm = 0, r_incomplete = 0, r_xattrs = '', r_xattr_data = NULL
                    WHERE path = ?
                """, path)
            try dropIfEmpty(path)
        }
    }

    private static let remoteAssignments = """
        r_tag = excluded.r_tag, r_kind = excluded.r_kind, r_hash = excluded.r_hash,
            r_size = excluded.r_size, r_type = excluded.r_type, r_mode = excluded.r_mode, r_mtime = excluded.r_mtime,
            r_device = excluded.r_device, r_moved_from = excluded.r_moved_from, r_asset = excluded.r_asset,
            r_asset_manifest = excluded.r_asset_manifest, r_perm = excluded.r_perm, r_incomplete = excluded.r_incomplete,
            r_xattrs = excluded.r_xattrs, r_xattr_data = excluded.r_xattr_data
        """

    /// Writes the Remote columns of `path` and its Synced entry, both `remote`: a save the server
    /// took, in one row write rather than two (each write of a row keeps the tree's work indexes).
    func writeRemoteAndSynced(_ path: String, _ remote: RemoteFacts) throws(SQLiteError) {
        treeWrites &+= 1
        let synced = SyncedFacts(remote)
        try database.run("""
            INSERT INTO tree(path, r_tag, r_kind, r_hash, r_size, r_type, r_mode, r_mtime, r_device, r_moved_from, r_asset, r_asset_manifest,
                r_perm, r_incomplete, r_xattrs, r_xattr_data, s_tag, s_kind, s_hash, s_perm, s_xattrs)
            VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(path) DO UPDATE SET \(Self.remoteAssignments),
                s_tag = excluded.s_tag, s_kind = excluded.s_kind, s_hash = excluded.s_hash, s_perm = excluded.s_perm, s_xattrs = excluded.s_xattrs
            """, path, remote.tag, remote.kind?.code, remote.hash, remote.size, remote.type, remote.mode, remote.mtime, remote.device,
            remote.movedFrom, remote.assetID, remote.assetIsManifest, remote.perm, remote.incomplete, remote.xattrDigest,
            remote.xattrs.isEmpty ? nil : remote.xattrs.encoded, synced.tag, synced.kind?.code, synced.hash, synced.perm, synced.xattrs)
    }

    /// Marks `path` as left out by the ignore rules (its entries stay; it is no work) or not.
    public func setIgnored(_ path: String, _ ignored: Bool) throws(SQLiteError) {
        treeWrites &+= 1
        try database.run("UPDATE tree SET ignored = ? WHERE path = ? AND ignored != ?", ignored, path, ignored)
    }

    /// Whether the ignore rules leave `path` out.
    public func isIgnoredRow(_ path: String) throws(SQLiteError) -> Bool {
        try database.scalar("SELECT ignored FROM tree WHERE path = ?", path) == 1
    }

    /// A row no tree holds anything for goes.
    private func dropIfEmpty(_ path: String) throws(SQLiteError) {
        try database.run("DELETE FROM tree WHERE path = ? AND l_kind IS NULL AND s_tag = 0 AND s_kind IS NULL AND r_tag = 0", path)
    }

    // MARK: What a walk compares

    /// Per present Local entry below `path`, what a walk compares with the disk, keyed by the path
    /// with its first `dropping` bytes cut (the root's name and slash), so that a walk of a million
    /// entries looks each up without making a million record paths.
    public func presentStats(under path: String, dropping: Int) throws -> [String: LocalFacts] {
        var out: [String: LocalFacts] = [:]
        try database.query("""
            SELECT path, l_kind, l_size, l_mtime, l_ctime, l_inode, l_mode FROM tree
            WHERE path >= ? AND path < ? AND l_kind IS NOT NULL
            """, path + "/", path + "0") { row in
            let full = row.text(0)
            let key = String(decoding: full.utf8.dropFirst(dropping), as: UTF8.self)
            out[key] = LocalFacts(kind: RecordKind(code: row.int64(1)), size: row.int64(2), mtime: row.int64(3), ctime: row.int64(4),
                                  inode: UInt64(bitPattern: row.int64(5)), mode: UInt32(truncatingIfNeeded: row.int64(6)))
        }
        return out
    }

    /// Files present below a root and their bytes (folders not counted).
    public func totals(root: String) throws -> (files: Int, bytes: Int64) {
        try StatusQueries.totals(database, root: root)
    }
}
