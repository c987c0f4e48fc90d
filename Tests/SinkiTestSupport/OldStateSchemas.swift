/// SQL that takes an agent's state database of the current schema back to an older one, as that
/// release made it, for the upgrade tests (each runs on a stopped agent's `state.db`).
public enum OldStateSchemas {
    /// Schema 14 to 13: no extended attributes in the trees, the unanswered saves or a table of their own;
    /// work indexes on kind, content and mode. The per-root triggers go, as they must for their columns
    /// to go (the upgrade makes them again, as from a true schema 13 whose triggers it drops).
    public static let thirteen = """
        DROP INDEX tree_local_work; DROP INDEX tree_remote_work; DROP INDEX tree_new_content;
        DROP TRIGGER tree_counted_in; DROP TRIGGER tree_counted_out; DROP TRIGGER tree_counted_again;
        ALTER TABLE tree DROP COLUMN l_xattrs; ALTER TABLE tree DROP COLUMN s_xattrs; ALTER TABLE tree DROP COLUMN r_xattrs;
        ALTER TABLE tree DROP COLUMN r_xattr_data;
        DROP TABLE xattrs_unkept;
        CREATE INDEX tree_local_work ON tree(path) WHERE ignored = 0 AND NOT (l_kind IS s_kind AND l_hash = s_hash AND l_perm = s_perm);
        CREATE INDEX tree_remote_work ON tree(path) WHERE ignored = 0 AND NOT (r_tag = s_tag AND r_kind IS s_kind AND r_hash = s_hash AND r_perm = s_perm);
        CREATE INDEX tree_new_content ON tree(l_hash) WHERE l_kind IN (0, 2) AND NOT (l_kind IS s_kind AND l_hash = s_hash AND l_perm = s_perm);
        CREATE TABLE sent_thirteen(path TEXT NOT NULL, kind INTEGER NOT NULL, hash TEXT NOT NULL, perm INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY(path, kind, hash, perm)) WITHOUT ROWID;
        INSERT INTO sent_thirteen SELECT path, kind, hash, perm FROM sent; DROP TABLE sent; ALTER TABLE sent_thirteen RENAME TO sent;
        DELETE FROM meta WHERE key = 'xattrs.patterns';
        PRAGMA user_version = 13;
        """
}
