import SinkiRecord
import SinkiSupport

/// Users and device tokens in the same database as the records (schema version 2):
/// - `users(name, created_at)`
/// - `tokens(id, user, device, secret_hash, parent_id, chain_id, read_only, prefix, max_upload_bytes,
///   max_uploads, expires_at, created_at, last_used_at, revoked_at)`; only the SHA-256 of a token's
///   secret is kept.
/// - `token_chains(chain_id, uploads_used)`: uploads counted for a chain of refreshed tokens.
/// - `meta.revocations`: raised by every revocation, so that a server notices one made by another
///   process with one cheap read.
extension SQLiteRecordStore {
    static let accountsSchema = """
        CREATE TABLE users (name TEXT PRIMARY KEY, created_at INTEGER NOT NULL) WITHOUT ROWID;
        CREATE TABLE tokens (
            id TEXT PRIMARY KEY,
            user TEXT NOT NULL,
            device TEXT NOT NULL,
            secret_hash BLOB NOT NULL,
            parent_id TEXT,
            chain_id TEXT NOT NULL,
            read_only INTEGER NOT NULL,
            prefix TEXT,
            max_upload_bytes INTEGER,
            max_uploads INTEGER,
            expires_at INTEGER,
            created_at INTEGER NOT NULL,
            last_used_at INTEGER,
            revoked_at INTEGER,
            revoked_count INTEGER
        ) WITHOUT ROWID;
        CREATE INDEX tokens_user ON tokens(user, created_at);
        CREATE INDEX tokens_parent ON tokens(parent_id) WHERE parent_id IS NOT NULL;
        CREATE INDEX tokens_revoked ON tokens(revoked_count) WHERE revoked_count IS NOT NULL;
        CREATE TABLE token_chains (chain_id TEXT PRIMARY KEY, uploads_used INTEGER NOT NULL) WITHOUT ROWID;
        INSERT INTO meta(key, value) VALUES ('revocations', 0);
        """

    static let tokenColumns = """
        id, user, device, secret_hash, parent_id, chain_id, read_only, prefix, max_upload_bytes, max_uploads, expires_at,
        created_at, last_used_at, revoked_at, (SELECT uploads_used FROM token_chains c WHERE c.chain_id = tokens.chain_id)
        """

    static func token(from row: Statement) -> DeviceToken {
        let scope = TokenScope(readOnly: row.bool(6), prefix: row.optionalText(7), maxUploadBytes: row.optionalInt64(8),
                               maxUploads: row.optionalInt64(9), expiresAt: row.optionalInt64(10))
        return DeviceToken(id: row.text(0), user: row.text(1), device: row.text(2), scope: scope, parentID: row.optionalText(4),
                           chainID: row.text(5), secretHash: row.blob(3), createdAt: row.int64(11), lastUsedAt: row.optionalInt64(12),
                           revokedAt: row.optionalInt64(13), uploadsUsed: row.optionalInt64(14) ?? 0)
    }

    @discardableResult
    public func addUser(_ name: String, at now: Int64) throws -> Bool {
        try writer.use { db in
            try db.run("INSERT INTO users(name, created_at) VALUES(?, ?) ON CONFLICT(name) DO NOTHING", name, now)
            return db.changes > 0
        }
    }

    public func users() throws -> [ServerUser] {
        try reader().use { db in
            var out: [ServerUser] = []
            try db.query("SELECT name, created_at, quota FROM users ORDER BY name") {
                out.append(ServerUser(name: $0.text(0), createdAt: $0.int64(1), quota: $0.optionalInt64(2)))
            }
            return out
        }
    }

    public func removeUser(_ name: String) throws {
        try writer.use { db in
            try db.transaction {
                guard try db.scalar("SELECT 1 FROM users WHERE name = ?", name) != nil else {
                    throw AccountError(.unknownUser, "no user \(quoted(name)) on this server")
                }
                // Revoked first, so that a running server cuts what the user's tokens hold open.
                let live = try db.scalar("SELECT count(*) FROM tokens WHERE user = ? AND revoked_at IS NULL", name) ?? 0
                if live > 0 {
                    let count = (try db.scalar("SELECT value FROM meta WHERE key = 'revocations'") ?? 0) + 1
                    try db.run("UPDATE tokens SET revoked_at = ?, revoked_count = ? WHERE user = ? AND revoked_at IS NULL", Clock.now(), count, name)
                    try db.run("UPDATE meta SET value = ? WHERE key = 'revocations'", count)
                }
                try db.run("DELETE FROM records WHERE user = ?", name)
                try db.run("DELETE FROM versions WHERE user = ?", name)
                try db.run("DELETE FROM chunk_refs WHERE user = ?", name)
                try db.run("DELETE FROM usage WHERE user = ?", name)
                try db.run("DELETE FROM folder_digests WHERE user = ?", name)
                try db.run("DELETE FROM token_chains WHERE chain_id IN (SELECT chain_id FROM tokens WHERE user = ?)", name)
                try db.run("DELETE FROM users WHERE name = ?", name)
            }
        }
    }

    public func addToken(_ token: DeviceToken) throws {
        try writer.use { db in
            try db.transaction {
                guard try db.scalar("SELECT 1 FROM users WHERE name = ?", token.user) != nil else {
                    throw AccountError(.unknownUser, "no user \(quoted(token.user)) on this server")
                }
                try db.run("""
                    INSERT INTO tokens(id, user, device, secret_hash, parent_id, chain_id, read_only, prefix, max_upload_bytes,
                                       max_uploads, expires_at, created_at)
                    VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """, token.id, token.user, token.device, token.secretHash, token.parentID, token.chainID, token.scope.readOnly,
                    token.scope.prefix, token.scope.maxUploadBytes, token.scope.maxUploads, token.scope.expiresAt, token.createdAt)
                try db.run("INSERT INTO token_chains(chain_id, uploads_used) VALUES(?, ?) ON CONFLICT(chain_id) DO NOTHING",
                           token.chainID, token.uploadsUsed)
            }
        }
    }

    public func token(id: String) throws -> DeviceToken? {
        try reader().use { db in
            var found: DeviceToken?
            try db.query("SELECT \(Self.tokenColumns) FROM tokens WHERE id = ?", id) { found = Self.token(from: $0) }
            return found
        }
    }

    public func tokens(user: String?) throws -> [DeviceToken] {
        try reader().use { db in
            var out: [DeviceToken] = []
            if let user {
                try db.query("SELECT \(Self.tokenColumns) FROM tokens WHERE user = ? ORDER BY created_at, id", user) { out.append(Self.token(from: $0)) }
            } else {
                try db.query("SELECT \(Self.tokenColumns) FROM tokens ORDER BY user, created_at, id") { out.append(Self.token(from: $0)) }
            }
            return out
        }
    }

    public func revoke(id: String, at now: Int64) throws -> [String] {
        try writer.use { db in
            try db.transaction {
                guard try db.scalar("SELECT 1 FROM tokens WHERE id = ?", id) != nil else { return [] }
                let ids = try Self.reach(db, from: id)
                if ids.isEmpty { return [] }
                try Self.markRevoked(db, ids, at: now)
                return ids
            }
        }
    }

    public func refresh(_ token: DeviceToken, replacing id: String, at now: Int64) throws {
        try writer.use { db in
            try db.transaction {
                var old: DeviceToken?
                try db.query("SELECT \(Self.tokenColumns) FROM tokens WHERE id = ?", id) { old = Self.token(from: $0) }
                guard let old, old.isLive(at: now) else { throw AccountError(.unknownToken, "no live token \(id) to refresh") }
                guard old.user == token.user, old.chainID == token.chainID else {
                    throw AccountError(.unknownToken, "bug: a refresh of \(id) must keep its user and chain")
                }
                try db.run("""
                    INSERT INTO tokens(id, user, device, secret_hash, parent_id, chain_id, read_only, prefix, max_upload_bytes,
                                       max_uploads, expires_at, created_at)
                    VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """, token.id, token.user, token.device, token.secretHash, token.parentID, token.chainID, token.scope.readOnly,
                    token.scope.prefix, token.scope.maxUploadBytes, token.scope.maxUploads, token.scope.expiresAt, token.createdAt)
                // What the old token minted lives on under the new one: a refresh is not a revocation of
                // the device's helpers.
                try db.run("UPDATE tokens SET parent_id = ? WHERE parent_id = ?", token.id, id)
                try Self.markRevoked(db, [id], at: now)
            }
        }
    }

    /// The live tokens a revocation of `id` reaches (`RevocationWalk`).
    private static func reach(_ db: SQLiteDatabase, from id: String) throws -> [String] {
        try RevocationWalk.reach(from: id, in: TokenGraphSQL(db: db))
    }

    /// `RevocationWalk`'s look-ups in SQLite.
    private struct TokenGraphSQL: TokenGraph {
        let db: SQLiteDatabase

        func minted(from id: String) throws -> [String] {
            var found: [String] = []
            try db.query("SELECT id FROM tokens WHERE parent_id = ?", id) { found.append($0.text(0)) }
            return found
        }

        func chain(of id: String) throws -> String? {
            var chain: String?
            try db.query("SELECT chain_id FROM tokens WHERE id = ?", id) { chain = $0.text(0) }
            return chain
        }

        func members(ofChain chain: String) throws -> [String] {
            var found: [String] = []
            try db.query("SELECT id FROM tokens WHERE chain_id = ?", chain) { found.append($0.text(0)) }
            return found
        }

        func isUnrevoked(_ id: String) throws -> Bool {
            try db.scalar("SELECT 1 FROM tokens WHERE id = ? AND revoked_at IS NULL", id) != nil
        }
    }

    /// Revokes `ids` under one new revocation count, which a running server's watcher notices.
    private static func markRevoked(_ db: SQLiteDatabase, _ ids: [String], at now: Int64) throws {
        let count = (try db.scalar("SELECT value FROM meta WHERE key = 'revocations'") ?? 0) + 1
        for revoked in ids { try db.run("UPDATE tokens SET revoked_at = ?, revoked_count = ? WHERE id = ?", now, count, revoked) }
        try db.run("UPDATE meta SET value = ? WHERE key = 'revocations'", count)
    }

    public func markUsed(id: String, at now: Int64) throws {
        try writer.use { db in
            try db.run("UPDATE tokens SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)",
                       now, id, now - 60_000_000_000)
        }
    }

    public func countUpload(chainID: String, limit: Int64?) throws -> Bool {
        try countUploads(chainID: chainID, count: 1, limit: limit)
    }

    public func countUploads(chainID: String, count: Int64, limit: Int64?) throws -> Bool {
        try writer.use { db in
            try db.transaction {
                let used = try db.scalar("SELECT uploads_used FROM token_chains WHERE chain_id = ?", chainID) ?? 0
                if let limit, used + count > limit { return false }
                try db.run("""
                    INSERT INTO token_chains(chain_id, uploads_used) VALUES(?1, ?2)
                    ON CONFLICT(chain_id) DO UPDATE SET uploads_used = uploads_used + ?2
                    """, chainID, count)
                return true
            }
        }
    }

    public func revocationCount() throws -> Int64 {
        try reader().use { db in try db.scalar("SELECT value FROM meta WHERE key = 'revocations'") ?? 0 }
    }

    public func revokedSince(_ since: Int64) throws -> (ids: [String], count: Int64) {
        try reader().use { db in
            var ids: [String] = []
            var count = since
            try db.query("SELECT id, revoked_count FROM tokens WHERE revoked_count > ?", since) { row in
                ids.append(row.text(0))
                count = max(count, row.int64(1))
            }
            return (ids, count)
        }
    }
}
