import SinkiRecord
import SinkiSupport

/// The upgrade of a state database written before the three trees (schemas 1 to 9: a `files` row
/// per path holding what was last seen on disk and what was last agreed, an `outbox` of local changes
/// to send, remote changes kept as `unapplied`, a `remote` copy of the server's records from 9 on).
///
/// Everything the old tables held as work becomes what the trees say: a queued local change is a
/// Local entry that differs from Synced, a change not applied is a Remote entry that differs from
/// it, and what a push carried without an answer is a `sent` row. Nothing queued is lost; the old
/// tables go in the same transaction. (The outbox's `resend` flag, which sent a version the server
/// already had once more, has no tree to go to: its version is the server's and both agree on it.)
enum LegacySchema {
    static func upgrade(_ store: StateStore, from version: Int) throws {
        let database = store.database
        func has(_ table: String) throws -> Bool {
            try database.scalar("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", table) != nil
        }
        try store.transaction {
            // Tables an older version lacked are made empty first, so the copies below read them all.
            try database.execute("""
                CREATE TABLE IF NOT EXISTS files(path TEXT PRIMARY KEY, kind INTEGER NOT NULL, present INTEGER NOT NULL,
                    size INTEGER NOT NULL DEFAULT 0, mtime INTEGER NOT NULL DEFAULT 0, ctime INTEGER NOT NULL DEFAULT 0,
                    inode INTEGER NOT NULL DEFAULT 0, mode INTEGER NOT NULL DEFAULT 0, sha256 TEXT NOT NULL DEFAULT '',
                    type TEXT NOT NULL DEFAULT '', tag INTEGER NOT NULL DEFAULT 0, synced_sha256 TEXT,
                    synced_deleted INTEGER NOT NULL DEFAULT 0, moved_from TEXT) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS outbox(path TEXT PRIMARY KEY, queued_at INTEGER NOT NULL, generation INTEGER NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT, sent_sha256 TEXT, sent_deleted INTEGER NOT NULL DEFAULT 0)
                    WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS remote(path TEXT PRIMARY KEY, change_tag INTEGER NOT NULL, deleted INTEGER NOT NULL,
                    type TEXT NOT NULL, sha256 TEXT NOT NULL, size INTEGER NOT NULL, moved_from TEXT) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS unapplied(path TEXT PRIMARY KEY, change_tag INTEGER NOT NULL, record BLOB NOT NULL,
                    cause TEXT NOT NULL, reason TEXT NOT NULL, attempts INTEGER NOT NULL, since INTEGER NOT NULL,
                    next_attempt INTEGER NOT NULL) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
                """)
            if try database.scalar("SELECT count(*) FROM pragma_table_info('outbox') WHERE name = 'sent_sha256'") == 0 {
                try database.execute("ALTER TABLE outbox ADD COLUMN sent_sha256 TEXT; ALTER TABLE outbox ADD COLUMN sent_deleted INTEGER NOT NULL DEFAULT 0")
            }
            // The old counts and the indexes on `files` go with it; the new tables come in.
            try database.execute("DROP TABLE IF EXISTS root_totals; DROP TABLE IF EXISTS applying; DROP TABLE IF EXISTS remote_folders;")
            for trigger in try names("trigger", in: database) { try database.execute("DROP TRIGGER IF EXISTS \"\(trigger)\"") }
            try database.execute(StateStore.treeSchema + StateStore.sentSchema + StateStore.tusUploadsSchema + StateStore.conflictsSchema
                                 + StateStore.remoteFoldersSchema + StateStore.unkeptXattrsSchema)
            if try has("manifests") {
                try database.execute("DROP INDEX IF EXISTS files_content")
            }
            try database.execute(StateStore.manifestsSchema)
            // Local (as last seen) and Synced (as last agreed) from the files rows. A synced version's
            // kind is not in the row (only the one seen now): a folder synced has no hash; a file whose
            // kind changed since differs from Local either way, so it is sent as it is now.
            try database.execute("""
                INSERT INTO tree(path, l_kind, l_hash, l_size, l_mtime, l_ctime, l_inode, l_mode, l_type, s_tag, s_kind, s_hash)
                SELECT path,
                    CASE WHEN present = 1 THEN kind END,
                    CASE WHEN present = 1 AND kind != 1 THEN sha256 ELSE '' END,
                    CASE WHEN present = 1 AND kind != 1 THEN size ELSE 0 END,
                    CASE WHEN present = 1 THEN mtime ELSE 0 END, CASE WHEN present = 1 THEN ctime ELSE 0 END,
                    CASE WHEN present = 1 THEN inode ELSE 0 END, CASE WHEN present = 1 THEN mode ELSE 0 END, type,
                    tag,
                    CASE WHEN tag > 0 AND synced_deleted = 0 THEN
                        CASE WHEN coalesce(synced_sha256, '') = '' THEN 1 WHEN kind = 2 THEN 2 ELSE 0 END END,
                    CASE WHEN tag > 0 AND synced_deleted = 0 AND coalesce(synced_sha256, '') != '' THEN synced_sha256 ELSE '' END
                FROM files;
                """)
            // Remote from the copy of the server's records (schema 9).
            try database.execute("""
                INSERT INTO tree(path, r_tag, r_kind, r_hash, r_size, r_type, r_moved_from)
                SELECT path, change_tag,
                    CASE WHEN deleted = 1 THEN NULL WHEN type = 'dir' THEN 1 WHEN type = 'symlink' THEN 2 ELSE 0 END,
                    CASE WHEN deleted = 1 OR type = 'dir' THEN '' ELSE sha256 END,
                    CASE WHEN deleted = 1 OR type = 'dir' THEN 0 ELSE size END, type, CASE WHEN deleted = 0 THEN moved_from END
                FROM remote WHERE change_tag > 0
                ON CONFLICT(path) DO UPDATE SET r_tag = excluded.r_tag, r_kind = excluded.r_kind, r_hash = excluded.r_hash,
                    r_size = excluded.r_size, r_type = excluded.r_type, r_moved_from = excluded.r_moved_from;
                """)
            // Changes not applied: the full record each kept (its mode, its asset) is the Remote entry.
            var unapplied: [Record] = []
            try database.query("SELECT record FROM unapplied") { row in
                var reader = JSONReader(row.blob(0))
                if let record = try? Record.read(from: &reader), record.changeTag > 0 { unapplied.append(record) }
            }
            for record in unapplied {
                let facts = RemoteFacts(record)
                if let current = try store.row(record.path)?.remote, current.tag > facts.tag { continue }
                try store.writeRemote(record.path, facts)
                if let asset = record.asset, let chunks = asset.chunks { try store.saveManifest(asset.id, chunks: chunks, held: false) }
            }
            try ModeSchema.fill(database)
            // What the last push of a queued path carried, unanswered: the planner's `sent`, with the
            // mode the disk had (a file's mode went with its content).
            try database.execute("""
                INSERT OR IGNORE INTO sent(path, kind, hash, perm)
                SELECT o.path, CASE WHEN f.kind IS NULL THEN 0 ELSE f.kind END, o.sent_sha256,
                    CASE WHEN f.kind IS NULL OR f.kind = 0 THEN coalesce((SELECT l_perm FROM tree t WHERE t.path = o.path AND t.l_kind = 0), 0) ELSE 0 END
                FROM outbox o LEFT JOIN files f ON f.path = o.path
                WHERE o.sent_sha256 IS NOT NULL AND o.sent_deleted = 0;
                """)
            try database.execute("DELETE FROM tree WHERE l_kind IS NULL AND s_tag = 0 AND s_kind IS NULL AND r_tag = 0")
            // The digests of the Remote tree, counted once from what it holds now.
            var deltas = FolderDeltas()
            try database.query("SELECT path, r_tag, r_kind, r_hash FROM tree WHERE r_tag > 0") { row in
                deltas.change(path: row.text(0), from: nil, to: row.isNull(2) ? nil : row.text(3), tag: row.int64(1))
            }
            for (folder, delta) in deltas.folders {
                try database.run("INSERT INTO remote_folders(path, parent, digest, direct, head) VALUES(?, ?, ?, ?, ?)",
                                 folder, delta.parent, delta.digest.bytes, delta.direct.bytes, delta.head)
            }
            try database.execute("""
                DROP TABLE files; DROP TABLE outbox; DROP TABLE remote; DROP TABLE unapplied;
                """)
            try database.execute(StateStore.rootTotalsSchema + StateStore.rootTotalsFill)
            if version < 9, try store.meta(MetaKey.feedToken) != nil {
                // A feed position read before the Remote tree existed: what it moved past is not in the
                // tree, so the tree is filled from one listing of the server before any digest is compared.
                try store.setMeta(MetaKey.remoteSeeded, "0")
            }
        }
    }

    private static func names(_ type: String, in database: SQLiteDatabase) throws -> [String] {
        var out: [String] = []
        try database.query("SELECT name FROM sqlite_master WHERE type = ?", type) { out.append($0.text(0)) }
        return out
    }
}

extension StateStore {
    /// Counts an upgraded database's trees once (afterwards the triggers keep the counts).
    static let rootTotalsFill = """
        INSERT OR IGNORE INTO root_totals(root) SELECT DISTINCT substr(path, 1, instr(path, '/') - 1) FROM tree;
        UPDATE root_totals SET
            files = (SELECT count(*) FROM tree WHERE l_kind IS NOT NULL AND l_kind != 1 AND path >= root || '/' AND path < root || '0'),
            bytes = (SELECT coalesce(sum(l_size), 0) FROM tree WHERE l_kind IS NOT NULL AND l_kind != 1 AND path >= root || '/' AND path < root || '0'),
            local_changes = (SELECT count(*) FROM tree WHERE \(localDiffers) AND path >= root || '/' AND path < root || '0'),
            remote_changes = (SELECT count(*) FROM tree WHERE \(remoteDiffers) AND path >= root || '/' AND path < root || '0'),
            remote_bytes = (SELECT coalesce(sum(\(toFetch("tree"))), 0) FROM tree WHERE \(remoteDiffers) AND path >= root || '/' AND path < root || '0');
        """
}
