import SinkiSupport

/// Schema 14: the digest of a file's extended attributes in each tree (`l_xattrs`, `s_xattrs`,
/// `r_xattrs`), the Remote record's attributes themselves (`r_xattr_data`), the unanswered saves' digests,
/// and the attributes a write could not keep (`xattrs_unkept`), so that a setfattr alone is a difference
/// between the trees (issue 25). Before it no tree held attributes, and none were synced.
enum XattrSchema {
    /// The columns (empty: no attributes, as every tree held them then), unless a step before made them.
    static func addColumns(_ database: SQLiteDatabase) throws {
        guard try database.scalar("SELECT count(*) FROM pragma_table_info('tree') WHERE name = 'l_xattrs'") == 0 else { return }
        try database.execute("""
            ALTER TABLE tree ADD COLUMN l_xattrs TEXT NOT NULL DEFAULT '';
            ALTER TABLE tree ADD COLUMN s_xattrs TEXT NOT NULL DEFAULT '';
            ALTER TABLE tree ADD COLUMN r_xattrs TEXT NOT NULL DEFAULT '';
            ALTER TABLE tree ADD COLUMN r_xattr_data BLOB;
            """)
    }

    /// From schema 13 (or an older one brought to it) with the columns added, in one transaction: the work indexes and the per-root
    /// counts, whose conditions now include them, made again; the unanswered saves with a digest.
    /// What files hold already is read once at the start (`Replica.setXattrPolicy`: the patterns in use
    /// are not the ones Local was read with), without reading their bytes again.
    static func upgrade(_ store: StateStore) throws {
        let database = store.database
        try store.transaction {
            try database.execute("""
                DROP INDEX IF EXISTS tree_local_work; DROP INDEX IF EXISTS tree_remote_work; DROP INDEX IF EXISTS tree_new_content;
                DROP TRIGGER IF EXISTS tree_counted_in; DROP TRIGGER IF EXISTS tree_counted_out; DROP TRIGGER IF EXISTS tree_counted_again;
                ALTER TABLE sent RENAME TO sent_before_xattrs;
                """)
            try database.execute(StateStore.treeSchema + StateStore.sentSchema + StateStore.rootTotalsSchema + StateStore.unkeptXattrsSchema
                                 + "DELETE FROM root_totals;" + StateStore.rootTotalsFill + """
                INSERT OR IGNORE INTO sent(path, kind, hash, perm) SELECT path, kind, hash, perm FROM sent_before_xattrs;
                DROP TABLE sent_before_xattrs;
                DELETE FROM meta WHERE key = '\(MetaKey.xattrPatterns)';
                """)
        }
    }
}
