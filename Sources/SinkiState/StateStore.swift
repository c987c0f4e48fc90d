import SinkiSupport

/// The agent's SQLite database (design §4): known files, the outbox, and small facts such as the
/// change-feed token. Not Sendable: it belongs to the replica's executor.
public final class StateStore {
    public let database: SQLiteDatabase
    public let path: String
    /// Counts saves and removals of `files` rows, so that a reader that let others run meanwhile
    /// can tell whether what it read is still current.
    public internal(set) var fileWrites = 0
    /// Rows of `unapplied`, so that the common case (none) costs no query per saved row.
    public internal(set) var unappliedCount = 0

    static let schemaVersion = 9

    public init(path: String) throws(SQLiteError) {
        self.path = path
        database = try SQLiteDatabase(path: path)
        try migrate()
        unappliedCount = try countUnapplied()
    }

    private func migrate() throws(SQLiteError) {
        let version = database.userVersion
        if version >= Self.schemaVersion { return }
        // Every statement is IF NOT EXISTS, so an older database gains what it lacks (3: tus uploads, 4: the apply
        // journal and conflicts, 5: remote changes not applied and the outbox's push-order index, 6: the outbox's
        // resend flag, added below since a column cannot be added "if not exists", 7: root_totals, counted once when
        // made, and files_large, 8: manifests, chunk_places, chunk_uploads and files_content, 9: the Remote tree).
        // Each file row holds two views of a path: what was last seen on disk (present, size, mtime,
        // inode, sha256) and the last version both this agent and the server agreed on (tag,
        // synced_*). A pending local change is a row whose two views differ, listed in outbox.
        try database.execute("""
            CREATE TABLE IF NOT EXISTS files(
                path TEXT PRIMARY KEY,
                kind INTEGER NOT NULL,
                present INTEGER NOT NULL,
                size INTEGER NOT NULL DEFAULT 0,
                mtime INTEGER NOT NULL DEFAULT 0,
                ctime INTEGER NOT NULL DEFAULT 0,
                inode INTEGER NOT NULL DEFAULT 0,
                mode INTEGER NOT NULL DEFAULT 0,
                sha256 TEXT NOT NULL DEFAULT '',
                type TEXT NOT NULL DEFAULT '',
                tag INTEGER NOT NULL DEFAULT 0,
                synced_sha256 TEXT,
                synced_deleted INTEGER NOT NULL DEFAULT 0,
                moved_from TEXT
            ) WITHOUT ROWID;
            CREATE INDEX IF NOT EXISTS files_moved_from ON files(moved_from) WHERE moved_from IS NOT NULL;
            -- Upload candidates are looked for among files by size (only those over the inline limit
            -- are visited), never by walking the outbox, which at a first sync holds every file.
            CREATE INDEX IF NOT EXISTS files_large ON files(size) WHERE present = 1 AND kind = 0;
            CREATE TABLE IF NOT EXISTS outbox(
                path TEXT PRIMARY KEY,
                queued_at INTEGER NOT NULL,
                generation INTEGER NOT NULL,
                attempts INTEGER NOT NULL DEFAULT 0,
                last_error TEXT,
                sent_sha256 TEXT,
                sent_deleted INTEGER NOT NULL DEFAULT 0,
                resend INTEGER NOT NULL DEFAULT 0
            ) WITHOUT ROWID;
            -- The push walks the outbox in this order from where its last page ended (keyset), so a
            -- batch costs what it holds, never a sort of the whole table.
            CREATE INDEX IF NOT EXISTS outbox_order ON outbox(queued_at, path) WHERE last_error IS NULL;
            CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
            """ + Self.tusUploadsSchema + Self.applyJournalSchema + Self.conflictsSchema + Self.unappliedSchema
            + Self.manifestsSchema + Self.remoteSchema)
        if version < 9, try meta(MetaKey.feedToken) != nil {
            // A feed position read before the Remote tree existed: what it moved past is not in the tree,
            // so the tree is filled from one listing of the server before any digest is compared.
            try setMeta(MetaKey.remoteSeeded, "0")
        }
        let countedBefore = try database.scalar("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'root_totals'") != nil
        try database.execute(Self.rootTotalsSchema)
        if !countedBefore { try database.execute(Self.rootTotalsFill) }
        if try database.scalar("SELECT count(*) FROM pragma_table_info('outbox') WHERE name = 'resend'") == 0 {
            try database.execute("ALTER TABLE outbox ADD COLUMN resend INTEGER NOT NULL DEFAULT 0")
        }
        try database.setUserVersion(Self.schemaVersion)
    }

    public func meta(_ key: String) throws(SQLiteError) -> String? {
        let statement = try database.prepare("SELECT value FROM meta WHERE key = ?")
        try statement.bind([key])
        defer { statement.reset() }
        return try statement.step() ? statement.text(0) : nil
    }

    public func setMeta(_ key: String, _ value: String?) throws(SQLiteError) {
        if let value {
            try database.run("INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", key, value)
        } else {
            try database.run("DELETE FROM meta WHERE key = ?", key)
        }
    }

    public func transaction<T>(_ body: () throws -> T) throws -> T { try database.transaction(body) }
}

/// Keys of the meta table.
public enum MetaKey {
    /// `sinkid pause`'s start (nanoseconds since the epoch); absent when not paused.
    public static let pausedSince = "paused.since"
    /// The change-feed token to resume from.
    public static let feedToken = "feed.token"
    /// The server URL the token belongs to; a different server starts the feed over.
    public static let feedServer = "feed.server"
    /// "0" while the Remote tree lacks what the feed moved past before it existed (an upgraded
    /// database): a full listing fills it; absent or "1" otherwise.
    public static let remoteSeeded = "remote.seeded"
}
