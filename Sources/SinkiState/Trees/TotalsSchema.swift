import SinkiSupport

/// Schema 13 (issue 25, items 6 and 7): per root, the bytes the remote changes still to apply bring
/// (`root_totals.remote_bytes`, for a download's totals in status); the server's conflict records as
/// this agent read them (`shared_conflicts`), and the tag of each waiting conflict's own record
/// (`conflicts.shared_tag`).
enum TotalsSchema {
    /// The new columns, before anything that counts into them runs (schema 10's upgrade remakes the
    /// counting triggers with them).
    static func addTotalsColumn(_ database: SQLiteDatabase) throws {
        if try database.scalar("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'conflicts'") == 1,
           try database.scalar("SELECT count(*) FROM pragma_table_info('conflicts') WHERE name = 'shared_tag'") == 0 {
            try database.execute("ALTER TABLE conflicts ADD COLUMN shared_tag INTEGER NOT NULL DEFAULT 0")
        }
        guard try database.scalar("SELECT count(*) FROM pragma_table_info('root_totals') WHERE name = 'remote_bytes'") == 0,
              try database.scalar("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'root_totals'") == 1 else { return }
        try database.execute("ALTER TABLE root_totals ADD COLUMN remote_bytes INTEGER NOT NULL DEFAULT 0")
    }

    /// From schema 12 (or an older one brought to it), in one transaction: the column, the triggers
    /// that keep it, the counts made again, and the new table.
    static func upgrade(_ store: StateStore) throws {
        let database = store.database
        try store.transaction {
            try addTotalsColumn(database)
            try database.execute("""
                DROP TRIGGER IF EXISTS tree_counted_in; DROP TRIGGER IF EXISTS tree_counted_out; DROP TRIGGER IF EXISTS tree_counted_again;
                """ + StateStore.rootTotalsSchema + "DELETE FROM root_totals;" + StateStore.rootTotalsFill + StateStore.sharedConflictsSchema)
        }
    }
}
