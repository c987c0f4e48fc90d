import SinkiSupport

/// The `tree` table: one row per path that any of the three trees knows, each tree a group of
/// columns (`l_`: Local, `s_`: Synced, `r_`: Remote). One row rather than three tables so that "the
/// trees differ here" is a condition on one row, which SQLite keeps in partial indexes in the same
/// transaction as every write: the work is found by an index walk, never kept as a list, and
/// "nothing differs anywhere" is two empty indexes.
///
/// A kind column is NULL where the tree holds nothing (no file on disk; agreed deleted; a tombstone).
/// Hashes are empty for folders and for nothing, so that equal nodes are equal columns. A path the
/// ignore rules leave out (`ignored`) keeps its entries but is no work: neither sent nor written.
extension StateStore {
    /// Local differs from Synced: a change here to send (the `local_work` index). A file's kept mode
    /// (`l_perm`, `KeptMode`) and the digest of its extended attributes (`l_xattrs`, `XattrSet`) are
    /// part of what it is: a chmod or a setfattr alone is a change.
    static let localDiffers = "ignored = 0 AND NOT (\(localSame()))"
    /// Remote differs from Synced (a newer tag, or other content, mode or extended attributes): a
    /// change there to bring here, or agreement to record (the `remote_work` index).
    static let remoteDiffers = "ignored = 0 AND NOT (\(remoteSame()))"

    /// Local holds what Synced holds, in SQL over the columns named with `row` before them (`NEW.`,
    /// or nothing: the work indexes' conditions must read as the queries that use them say them).
    static func localSame(_ row: String = "") -> String {
        "\(row)l_kind IS \(row)s_kind AND \(row)l_hash = \(row)s_hash AND \(row)l_perm = \(row)s_perm AND \(row)l_xattrs = \(row)s_xattrs"
    }

    /// Remote holds what Synced holds, at its tag (columns named as in `localSame`).
    static func remoteSame(_ row: String = "") -> String {
        "\(row)r_tag = \(row)s_tag AND \(row)r_kind IS \(row)s_kind AND \(row)r_hash = \(row)s_hash AND \(row)r_perm = \(row)s_perm"
            + " AND \(row)r_xattrs = \(row)s_xattrs"
    }

    static let treeSchema = """
        CREATE TABLE IF NOT EXISTS tree(
            path TEXT PRIMARY KEY,
            l_kind INTEGER,
            l_hash TEXT NOT NULL DEFAULT '',
            l_size INTEGER NOT NULL DEFAULT 0,
            l_mtime INTEGER NOT NULL DEFAULT 0,
            l_ctime INTEGER NOT NULL DEFAULT 0,
            l_inode INTEGER NOT NULL DEFAULT 0,
            l_mode INTEGER NOT NULL DEFAULT 0,
            l_type TEXT NOT NULL DEFAULT '',
            s_tag INTEGER NOT NULL DEFAULT 0,
            s_kind INTEGER,
            s_hash TEXT NOT NULL DEFAULT '',
            r_tag INTEGER NOT NULL DEFAULT 0,
            r_kind INTEGER,
            r_hash TEXT NOT NULL DEFAULT '',
            r_size INTEGER NOT NULL DEFAULT 0,
            r_type TEXT NOT NULL DEFAULT '',
            r_mode INTEGER NOT NULL DEFAULT 0,
            r_mtime INTEGER NOT NULL DEFAULT 0,
            r_device TEXT NOT NULL DEFAULT '',
            r_moved_from TEXT,
            r_asset TEXT,
            r_asset_manifest INTEGER NOT NULL DEFAULT 0,
            ignored INTEGER NOT NULL DEFAULT 0,
            l_perm INTEGER NOT NULL DEFAULT 0,
            s_perm INTEGER NOT NULL DEFAULT 0,
            r_perm INTEGER NOT NULL DEFAULT 0,
            r_incomplete INTEGER NOT NULL DEFAULT 0,
            l_xattrs TEXT NOT NULL DEFAULT '',
            s_xattrs TEXT NOT NULL DEFAULT '',
            r_xattrs TEXT NOT NULL DEFAULT '',
            r_xattr_data BLOB
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS tree_local_work ON tree(path) WHERE \(localDiffers);
        CREATE INDEX IF NOT EXISTS tree_remote_work ON tree(path) WHERE \(remoteDiffers);
        -- Local rename sources found by content: files whose synced content is gone from disk.
        CREATE INDEX IF NOT EXISTS tree_gone ON tree(s_hash) WHERE l_kind IS NULL AND s_kind IN (0, 2);
        -- A peer's renames, by source: the source's delete here waits for the rename that takes it.
        CREATE INDEX IF NOT EXISTS tree_moved_from ON tree(r_moved_from) WHERE r_moved_from IS NOT NULL;
        -- New local content, by its name: a path gone from disk finds the rename made here that took it.
        CREATE INDEX IF NOT EXISTS tree_new_content ON tree(l_hash) WHERE l_kind IN (0, 2) AND NOT (\(localSame()));
        -- Local files holding a manifest's chunks, found by their content identity (large files only).
        CREATE INDEX IF NOT EXISTS tree_content ON tree(l_hash) WHERE l_kind = 0 AND l_size > \(ContentID.wholeFileLimit);
        """

    /// The saves this agent sent and has recorded no answer to, by path: an observation ("I sent
    /// this"), written before the save goes and dropped with its outcome. Remote holding one of them is
    /// this agent's own save whose answer was lost (docs/planner.md, "The base").
    static let sentSchema = """
        CREATE TABLE IF NOT EXISTS sent(
            path TEXT NOT NULL,
            kind INTEGER NOT NULL,
            hash TEXT NOT NULL,
            perm INTEGER NOT NULL DEFAULT 0,
            xattrs TEXT NOT NULL DEFAULT '',
            PRIMARY KEY(path, kind, hash, perm, xattrs)
        ) WITHOUT ROWID;
        """

    /// The digests of the Remote tree's folders, as the server keeps them (`TreeDigest`), updated in
    /// the transaction of every Remote write.
    static let remoteFoldersSchema = """
        CREATE TABLE IF NOT EXISTS remote_folders(
            path TEXT PRIMARY KEY,
            parent TEXT,
            digest BLOB NOT NULL,
            direct BLOB NOT NULL,
            head INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS remote_folders_parent ON remote_folders(parent, path) WHERE parent IS NOT NULL;
        """

    /// A path's root name, in SQL: what comes before its first slash.
    private static func rootOf(_ column: String) -> String { "substr(\(column), 1, instr(\(column), '/') - 1)" }
    /// A row that counts as a file present (folders are not counted), as 0 or 1.
    private static func counted(_ row: String) -> String { "(\(row).l_kind IS NOT NULL AND \(row).l_kind != 1)" }
    private static func local(_ row: String) -> String { "(\(row).ignored = 0 AND NOT (\(localSame(row + "."))))" }
    private static func remote(_ row: String) -> String { "(\(row).ignored = 0 AND NOT (\(remoteSame(row + "."))))" }

    /// The bytes a row's Remote file brings: its size when Remote differs from Synced with content
    /// the disk does not hold (a chmod, a delete, a folder or content already here bring none).
    static func toFetch(_ row: String) -> String {
        "(CASE WHEN \(remote(row)) AND \(row).r_kind IS 0 AND \(row).r_hash != \(row).l_hash THEN \(row).r_size ELSE 0 END)"
    }

    /// Per root, what `sinkid status` counts (files present and their bytes; paths whose Local, or
    /// Remote, differs from Synced; the bytes those remote changes bring), kept by triggers in the
    /// transaction of every write: a status costs a look-up whatever the number of files (issue 15).
    static let rootTotalsSchema = """
        CREATE TABLE IF NOT EXISTS root_totals(
            root TEXT PRIMARY KEY,
            files INTEGER NOT NULL DEFAULT 0,
            bytes INTEGER NOT NULL DEFAULT 0,
            local_changes INTEGER NOT NULL DEFAULT 0,
            remote_changes INTEGER NOT NULL DEFAULT 0,
            remote_bytes INTEGER NOT NULL DEFAULT 0
        ) WITHOUT ROWID;
        CREATE TRIGGER IF NOT EXISTS tree_counted_in AFTER INSERT ON tree BEGIN
            INSERT INTO root_totals(root, files, bytes, local_changes, remote_changes, remote_bytes)
            VALUES(\(rootOf("NEW.path")), \(counted("NEW")), \(counted("NEW")) * NEW.l_size, \(local("NEW")), \(remote("NEW")), \(toFetch("NEW")))
            ON CONFLICT(root) DO UPDATE SET files = files + excluded.files, bytes = bytes + excluded.bytes,
                local_changes = local_changes + excluded.local_changes, remote_changes = remote_changes + excluded.remote_changes,
                remote_bytes = remote_bytes + excluded.remote_bytes;
        END;
        CREATE TRIGGER IF NOT EXISTS tree_counted_out AFTER DELETE ON tree BEGIN
            UPDATE root_totals SET files = files - \(counted("OLD")), bytes = bytes - \(counted("OLD")) * OLD.l_size,
                local_changes = local_changes - \(local("OLD")), remote_changes = remote_changes - \(remote("OLD")),
                remote_bytes = remote_bytes - \(toFetch("OLD"))
            WHERE root = \(rootOf("OLD.path"));
        END;
        CREATE TRIGGER IF NOT EXISTS tree_counted_again AFTER UPDATE ON tree
        WHEN \(counted("OLD")) != \(counted("NEW")) OR OLD.l_size != NEW.l_size OR \(local("OLD")) != \(local("NEW"))
            OR \(remote("OLD")) != \(remote("NEW")) OR \(toFetch("OLD")) != \(toFetch("NEW")) BEGIN
            UPDATE root_totals SET files = files + \(counted("NEW")) - \(counted("OLD")),
                bytes = bytes + \(counted("NEW")) * NEW.l_size - \(counted("OLD")) * OLD.l_size,
                local_changes = local_changes + \(local("NEW")) - \(local("OLD")),
                remote_changes = remote_changes + \(remote("NEW")) - \(remote("OLD")),
                remote_bytes = remote_bytes + \(toFetch("NEW")) - \(toFetch("OLD"))
            WHERE root = \(rootOf("NEW.path"));
        END;
        """
}
