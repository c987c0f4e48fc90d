import SinkiSupport

/// The agent's SQLite database (design §4): the three trees, one row per path (`tree`), and beside
/// them only observations of other kinds: the saves this agent sent and has no answer to (`sent`),
/// uploads in flight, conflicts left for `sinkid resolve`, manifests of large files, small facts
/// (`meta`). What to do is never stored: it is whatever differs between the trees (`TreeStore+Work`).
/// Not Sendable: it belongs to the replica's executor.
public final class StateStore {
    public let database: SQLiteDatabase
    public let path: String
    /// Counts writes to the trees, so that a reader that let others run meanwhile can tell whether
    /// what it read is still current, and the scheduler whether a round saw everything.
    public internal(set) var treeWrites = 0

    static let schemaVersion = 14

    public init(path: String) throws {
        self.path = path
        database = try SQLiteDatabase(path: path)
        try migrate()
    }

    private func migrate() throws {
        let version = database.userVersion
        if version >= Self.schemaVersion { return }
        if version > 0 {
            // One transaction for every step: a stop half-way leaves the schema it started from.
            try transaction {
                if version < 10 {
                    // The release before the three trees: its tables are brought to schema 9 first, then
                    // turned into trees (`LegacySchema`, whose trees have every column of this schema).
                    try LegacySchema.upgrade(self, from: version)
                } else {
                    // Before the steps that make the work indexes and counting triggers, whose conditions
                    // (the current ones) name the attributes' columns.
                    try XattrSchema.addColumns(database)
                    if version == 10 {
                        try TotalsSchema.addTotalsColumn(database)
                        try ModeSchema.upgrade(self)
                    }
                    // Schema 12: whether the server lacked chunks of the Remote version (issue 24 item 2).
                    if try database.scalar("SELECT count(*) FROM pragma_table_info('tree') WHERE name = 'r_incomplete'") == 0 {
                        try database.execute("ALTER TABLE tree ADD COLUMN r_incomplete INTEGER NOT NULL DEFAULT 0")
                    }
                }
                if version < 13 { try TotalsSchema.upgrade(self) }
                try XattrSchema.upgrade(self)
                try database.setUserVersion(Self.schemaVersion)
            }
        } else {
            try transaction {
                try database.execute(Self.treeSchema + Self.sentSchema + Self.rootTotalsSchema + Self.tusUploadsSchema + Self.conflictsSchema
                                     + Self.sharedConflictsSchema + Self.manifestsSchema + Self.remoteFoldersSchema + Self.unkeptXattrsSchema + """
                    CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
                    """)
            }
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
    /// Runs `body`, which only reads, on one snapshot (`SQLiteDatabase.reading`).
    public func reading<T>(_ body: () throws -> T) throws -> T { try database.reading(body) }
}

/// Keys of the meta table.
public enum MetaKey {
    /// `sinkid pause`'s start (nanoseconds since the epoch); absent when not paused.
    public static let pausedSince = "paused.since"
    /// `sinkid pause ROOT`: a JSON object from root name to the pause's start.
    public static let pausedRoots = "paused.roots"
    /// The change-feed token to resume from.
    public static let feedToken = "feed.token"
    /// The server URL the token belongs to; a different server starts the feed over.
    public static let feedServer = "feed.server"
    /// The feed position before this agent's saves not yet known to be answered ("" for the feed's
    /// start): the feed passes over a run's own saves, so a run that ends without their answers
    /// leaves the next to read the feed again from here (`Replica.rewindFeedBeforeSaves`).
    public static let feedBeforeSaves = "feed.before-saves"
    /// "0" while the Remote tree lacks what the feed moved past before it existed (an upgraded
    /// database, a feed started over): a full listing fills it; absent or "1" otherwise.
    public static let remoteSeeded = "remote.seeded"
    /// The roots (by name, one per line) whose records the Remote tree holds from the feed's start or
    /// a listing; a root added to the configuration later is listed once before it is trusted.
    public static let seededRoots = "remote.roots"
    /// The `[transfer] xattrs` patterns Local's attribute digests were read with (one per line); other
    /// patterns read every file's attributes again (`Replica.setXattrPolicy`).
    public static let xattrPatterns = "xattrs.patterns"
}
