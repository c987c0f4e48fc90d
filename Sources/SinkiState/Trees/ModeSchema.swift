import SinkiSupport

/// Schema 11: a file's kept mode (`KeptMode`) in each tree (`l_perm`, `s_perm`, `r_perm`) and in the
/// unanswered saves, so that a chmod alone is a difference between the trees (issue 25). Before it,
/// the trees compared content only and a mode went along with the next content change.
enum ModeSchema {
    /// From schema 10, in one transaction: the columns, filled from the modes the trees already hold;
    /// the work indexes and the per-root counts, whose conditions now include the modes, made again.
    static func upgrade(_ store: StateStore) throws {
        let database = store.database
        try store.transaction {
            try database.execute("""
                ALTER TABLE tree ADD COLUMN l_perm INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE tree ADD COLUMN s_perm INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE tree ADD COLUMN r_perm INTEGER NOT NULL DEFAULT 0;
                DROP INDEX IF EXISTS tree_local_work; DROP INDEX IF EXISTS tree_remote_work; DROP INDEX IF EXISTS tree_new_content;
                DROP TRIGGER IF EXISTS tree_counted_in; DROP TRIGGER IF EXISTS tree_counted_out; DROP TRIGGER IF EXISTS tree_counted_again;
                ALTER TABLE sent RENAME TO sent_before_modes;
                """)
            try fill(database)
            try database.execute(StateStore.treeSchema + StateStore.sentSchema + StateStore.rootTotalsSchema + "DELETE FROM root_totals;"
                                 + StateStore.rootTotalsFill)
            // An unanswered save of a file went with the mode the disk had then, as Local still says.
            try database.run("""
                INSERT OR IGNORE INTO sent(path, kind, hash, perm)
                SELECT s.path, s.kind, s.hash, CASE WHEN s.kind = 0 THEN coalesce((SELECT l_perm FROM tree t WHERE t.path = s.path AND t.l_kind = 0), ?)
                    ELSE 0 END FROM sent_before_modes s
                """, KeptMode.ofRecord(0))
            try database.execute("DROP TABLE sent_before_modes")
        }
    }

    /// Sets the three trees' kept modes from the modes they hold: Local's and Remote's from their own,
    /// Synced's from the version agreed on (Remote's when Remote is it, else Local's when it holds the
    /// agreed content; a plain file's otherwise). A chmod made before the upgrade and never sent is
    /// then a local change, as it should have been.
    static func fill(_ database: SQLiteDatabase) throws {
        let mask = KeptMode.mask, plain = KeptMode.ofRecord(0)
        try database.run("""
            UPDATE tree SET
                l_perm = CASE WHEN l_kind = 0 THEN l_mode & ? ELSE 0 END,
                r_perm = CASE WHEN r_kind = 0 THEN (CASE WHEN r_mode & 511 = 0 THEN 420 ELSE r_mode END) & ? ELSE 0 END
            """, mask, mask)
        try database.run("""
            UPDATE tree SET s_perm = CASE WHEN s_kind IS NOT 0 THEN 0
                WHEN r_tag = s_tag AND r_kind = 0 AND r_hash = s_hash THEN r_perm
                WHEN l_kind = 0 AND l_hash = s_hash THEN l_perm
                ELSE ? END
            """, plain)
    }
}
