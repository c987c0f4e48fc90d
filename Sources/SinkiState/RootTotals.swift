import SinkiSupport

/// Per root, the counts `sinkid status` shows (files present and their bytes, outbox entries and how
/// many the server refused), kept by triggers in the transaction of every write: a status costs a
/// look-up whatever the number of files, where counting them was a walk of the whole table (issue 15).
extension StateStore {
    /// A path's root name, in SQL: what comes before its first slash.
    private static func rootOf(_ column: String) -> String { "substr(\(column), 1, instr(\(column), '/') - 1)" }

    /// Whether a files row counts as a file present (directories are not counted).
    private static func counted(_ row: String) -> String { "(\(row).present = 1 AND \(row).kind != 1)" }

    static let rootTotalsSchema = """
        CREATE TABLE IF NOT EXISTS root_totals(
            root TEXT PRIMARY KEY,
            files INTEGER NOT NULL DEFAULT 0,
            bytes INTEGER NOT NULL DEFAULT 0,
            outbox INTEGER NOT NULL DEFAULT 0,
            refused INTEGER NOT NULL DEFAULT 0
        ) WITHOUT ROWID;
        CREATE TRIGGER IF NOT EXISTS root_totals_file_added AFTER INSERT ON files WHEN \(counted("NEW")) BEGIN
            INSERT INTO root_totals(root, files, bytes) VALUES(\(rootOf("NEW.path")), 1, NEW.size)
            ON CONFLICT(root) DO UPDATE SET files = files + 1, bytes = bytes + excluded.bytes;
        END;
        CREATE TRIGGER IF NOT EXISTS root_totals_file_removed AFTER DELETE ON files WHEN \(counted("OLD")) BEGIN
            UPDATE root_totals SET files = files - 1, bytes = bytes - OLD.size WHERE root = \(rootOf("OLD.path"));
        END;
        CREATE TRIGGER IF NOT EXISTS root_totals_file_changed AFTER UPDATE OF present, kind, size ON files
        WHEN \(counted("OLD")) != \(counted("NEW")) OR (\(counted("NEW")) AND OLD.size != NEW.size) BEGIN
            INSERT INTO root_totals(root, files, bytes)
            VALUES(\(rootOf("NEW.path")), \(counted("NEW")) - \(counted("OLD")), \(counted("NEW")) * NEW.size - \(counted("OLD")) * OLD.size)
            ON CONFLICT(root) DO UPDATE SET files = files + excluded.files, bytes = bytes + excluded.bytes;
        END;
        CREATE TRIGGER IF NOT EXISTS root_totals_queued AFTER INSERT ON outbox BEGIN
            INSERT INTO root_totals(root, outbox, refused) VALUES(\(rootOf("NEW.path")), 1, NEW.last_error IS NOT NULL)
            ON CONFLICT(root) DO UPDATE SET outbox = outbox + 1, refused = refused + excluded.refused;
        END;
        CREATE TRIGGER IF NOT EXISTS root_totals_dequeued AFTER DELETE ON outbox BEGIN
            UPDATE root_totals SET outbox = outbox - 1, refused = refused - (OLD.last_error IS NOT NULL) WHERE root = \(rootOf("OLD.path"));
        END;
        CREATE TRIGGER IF NOT EXISTS root_totals_refusal AFTER UPDATE OF last_error ON outbox
        WHEN (OLD.last_error IS NULL) != (NEW.last_error IS NULL) BEGIN
            UPDATE root_totals SET refused = refused + (NEW.last_error IS NOT NULL) - (OLD.last_error IS NOT NULL)
            WHERE root = \(rootOf("NEW.path"));
        END;
        -- Refused entries come first in sinkid status, by this index (the others by outbox_order).
        CREATE INDEX IF NOT EXISTS outbox_refused ON outbox(queued_at, path) WHERE last_error IS NOT NULL;
        """

    /// Counts a database that had no `root_totals` yet (once, when it is made).
    static let rootTotalsFill = """
        INSERT OR IGNORE INTO root_totals(root) SELECT \(rootOf("path")) FROM files UNION SELECT \(rootOf("path")) FROM outbox;
        UPDATE root_totals SET
            files = (SELECT count(*) FROM files WHERE present = 1 AND kind != 1 AND path >= root || '/' AND path < root || '0'),
            bytes = (SELECT coalesce(sum(size), 0) FROM files WHERE present = 1 AND kind != 1 AND path >= root || '/' AND path < root || '0'),
            outbox = (SELECT count(*) FROM outbox WHERE path >= root || '/' AND path < root || '0'),
            refused = (SELECT count(*) FROM outbox WHERE last_error IS NOT NULL AND path >= root || '/' AND path < root || '0');
        """
}
