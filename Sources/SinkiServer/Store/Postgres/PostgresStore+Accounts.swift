import SinkiRecord
import SinkiSupport

/// Users and device tokens, with the same rules as `SQLiteRecordStore+Accounts.swift`. Where SQLite's
/// single writer serialises, these take row locks: the `revocations` counter row for every revocation
/// (so revocation counts commit in order, which `revokedSince` relies on), the token's row for a
/// refresh, the chain's row for counting uploads.
extension PostgresStore {
    static let tokenColumns = """
        id, owner, device, secret_hash, parent_id, chain_id, read_only, prefix, max_upload_bytes, max_uploads, expires_at,
        created_at, last_used_at, revoked_at, (SELECT uploads_used FROM token_chains c WHERE c.chain_id = tokens.chain_id)
        """

    static func token(_ rows: PGResult, _ row: Int) throws(PostgresError) -> DeviceToken {
        let scope = TokenScope(readOnly: try rows.bool(row, 6), prefix: rows.optionalText(row, 7), maxUploadBytes: try rows.optionalInt64(row, 8),
                               maxUploads: try rows.optionalInt64(row, 9), expiresAt: try rows.optionalInt64(row, 10))
        return DeviceToken(id: try rows.text(row, 0), user: try rows.text(row, 1), device: try rows.text(row, 2), scope: scope,
                           parentID: rows.optionalText(row, 4), chainID: try rows.text(row, 5), secretHash: try rows.optionalBytes(row, 3) ?? [],
                           createdAt: try rows.int64(row, 11), lastUsedAt: try rows.optionalInt64(row, 12),
                           revokedAt: try rows.optionalInt64(row, 13), uploadsUsed: try rows.optionalInt64(row, 14) ?? 0)
    }

    private static func tokens(_ rows: PGResult) throws(PostgresError) -> [DeviceToken] {
        var out: [DeviceToken] = []
        for row in 0..<rows.count { out.append(try token(rows, row)) }
        return out
    }

    @discardableResult
    public func addUser(_ name: String, at now: Int64) throws -> Bool {
        try pool.use { db in
            try db.query("INSERT INTO users(name, created_at) VALUES($1, $2) ON CONFLICT(name) DO NOTHING", [name, now]).affected > 0
        }
    }

    public func users() throws -> [ServerUser] {
        try pool.use { db in
            let rows = try db.query("SELECT name, created_at, quota FROM users ORDER BY name")
            var out: [ServerUser] = []
            for row in 0..<rows.count {
                out.append(ServerUser(name: try rows.text(row, 0), createdAt: try rows.int64(row, 1), quota: try rows.optionalInt64(row, 2)))
            }
            return out
        }
    }

    public func removeUser(_ name: String) throws {
        try pool.use { db in
            try db.transaction {
                guard try db.query("SELECT 1 FROM users WHERE name = $1 FOR UPDATE", [name]).count > 0 else {
                    throw AccountError(.unknownUser, "no user \(quoted(name)) on this server")
                }
                // Revoked first, so that a running server cuts what the user's tokens hold open.
                let live = try db.scalar("SELECT count(*) FROM tokens WHERE owner = $1 AND revoked_at IS NULL", name) ?? 0
                if live > 0 {
                    let count = try Self.nextRevocation(db)
                    try db.execute("UPDATE tokens SET revoked_at = $1, revoked_count = $2 WHERE owner = $3 AND revoked_at IS NULL",
                                   [Clock.now(), count, name])
                }
                try db.execute("DELETE FROM records WHERE owner = $1", [name])
                try db.execute("DELETE FROM versions WHERE owner = $1", [name])
                try db.execute("DELETE FROM chunk_refs WHERE owner = $1", [name])
                try db.execute("DELETE FROM usage WHERE owner = $1", [name])
                try db.execute("DELETE FROM folder_digests WHERE owner = $1", [name])
                try db.execute("DELETE FROM token_chains WHERE chain_id IN (SELECT chain_id FROM tokens WHERE owner = $1)", [name])
                try db.execute("DELETE FROM users WHERE name = $1", [name])
            }
        }
    }

    private static let insertToken = """
        INSERT INTO tokens(id, owner, device, secret_hash, parent_id, chain_id, read_only, prefix, max_upload_bytes,
                           max_uploads, expires_at, created_at)
        VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
        """

    private static func insert(_ db: PGConnection, _ token: DeviceToken) throws(PostgresError) {
        try db.execute(insertToken, [token.id, token.user, token.device, token.secretHash, token.parentID, token.chainID, token.scope.readOnly,
                                     token.scope.prefix, token.scope.maxUploadBytes, token.scope.maxUploads, token.scope.expiresAt, token.createdAt])
    }

    public func addToken(_ token: DeviceToken) throws {
        try pool.use { db in
            try db.transaction {
                // FOR SHARE: a removal of the user waits for this token, and then removes it too.
                guard try db.query("SELECT 1 FROM users WHERE name = $1 FOR SHARE", [token.user]).count > 0 else {
                    throw AccountError(.unknownUser, "no user \(quoted(token.user)) on this server")
                }
                try Self.insert(db, token)
                try db.execute("INSERT INTO token_chains(chain_id, uploads_used) VALUES($1, $2) ON CONFLICT(chain_id) DO NOTHING",
                               [token.chainID, token.uploadsUsed])
            }
        }
    }

    public func token(id: String) throws -> DeviceToken? {
        try pool.use { db in try Self.tokens(try db.query("SELECT \(Self.tokenColumns) FROM tokens WHERE id = $1", [id])).first }
    }

    public func tokens(user: String?) throws -> [DeviceToken] {
        try pool.use { db in
            if let user {
                return try Self.tokens(try db.query("SELECT \(Self.tokenColumns) FROM tokens WHERE owner = $1 ORDER BY created_at, id", [user]))
            }
            return try Self.tokens(try db.query("SELECT \(Self.tokenColumns) FROM tokens ORDER BY owner, created_at, id"))
        }
    }

    public func revoke(id: String, at now: Int64) throws -> [String] {
        try pool.use { db in
            try db.transaction {
                guard try db.query("SELECT 1 FROM tokens WHERE id = $1", [id]).count > 0 else { return [] }
                // The counter's lock first: two revocations reaching the same tokens take turns.
                try db.execute("SELECT value FROM meta WHERE key = 'revocations' FOR UPDATE")
                let ids = try Self.reach(db, from: id)
                if ids.isEmpty { return [] }
                try Self.markRevoked(db, ids, count: try Self.nextRevocation(db), at: now)
                return ids
            }
        }
    }

    public func refresh(_ token: DeviceToken, replacing id: String, at now: Int64) throws {
        try pool.use { db in
            try db.transaction {
                let count = try Self.nextRevocation(db)
                let old = try Self.tokens(try db.query("SELECT \(Self.tokenColumns) FROM tokens WHERE id = $1 FOR UPDATE", [id])).first
                guard let old, old.isLive(at: now) else { throw AccountError(.unknownToken, "no live token \(id) to refresh") }
                guard old.user == token.user, old.chainID == token.chainID else {
                    throw AccountError(.unknownToken, "bug: a refresh of \(id) must keep its user and chain")
                }
                try Self.insert(db, token)
                // What the old token minted lives on under the new one: a refresh is not a revocation of
                // the device's helpers.
                try db.execute("UPDATE tokens SET parent_id = $1 WHERE parent_id = $2", [token.id, id])
                try Self.markRevoked(db, [id], count: count, at: now)
            }
        }
    }

    /// The live tokens a revocation of `id` reaches (`RevocationWalk`).
    private static func reach(_ db: PGConnection, from id: String) throws -> [String] {
        try RevocationWalk.reach(from: id, in: TokenGraphSQL(db: db))
    }

    /// `RevocationWalk`'s look-ups in PostgreSQL.
    private struct TokenGraphSQL: TokenGraph {
        let db: PGConnection

        func minted(from id: String) throws -> [String] {
            let rows = try db.query("SELECT id FROM tokens WHERE parent_id = $1", [id])
            return try (0..<rows.count).map { try rows.text($0, 0) }
        }

        func chain(of id: String) throws -> String? {
            let rows = try db.query("SELECT chain_id FROM tokens WHERE id = $1", [id])
            return rows.count > 0 ? try rows.text(0, 0) : nil
        }

        func members(ofChain chain: String) throws -> [String] {
            let rows = try db.query("SELECT id FROM tokens WHERE chain_id = $1", [chain])
            return try (0..<rows.count).map { try rows.text($0, 0) }
        }

        func isUnrevoked(_ id: String) throws -> Bool {
            try db.query("SELECT 1 FROM tokens WHERE id = $1 AND revoked_at IS NULL", [id]).count > 0
        }
    }

    /// Raises the revocation counter, holding its row until the transaction ends; the new count.
    private static func nextRevocation(_ db: PGConnection) throws -> Int64 {
        let rows = try db.query("UPDATE meta SET value = value + 1 WHERE key = 'revocations' RETURNING value")
        guard rows.count == 1 else { throw RecordStoreError(path: db.database, message: "the meta table has no revocations counter") }
        return try rows.int64(0, 0)
    }

    /// Revokes `ids` under the revocation count `count`, which a running server's watcher notices.
    private static func markRevoked(_ db: PGConnection, _ ids: [String], count: Int64, at now: Int64) throws(PostgresError) {
        for revoked in ids {
            try db.execute("UPDATE tokens SET revoked_at = $1, revoked_count = $2 WHERE id = $3", [now, count, revoked])
        }
    }

    public func markUsed(id: String, at now: Int64) throws {
        try pool.use { db in
            try db.execute("UPDATE tokens SET last_used_at = $1 WHERE id = $2 AND (last_used_at IS NULL OR last_used_at < $3)",
                           [now, id, now - 60_000_000_000])
        }
    }

    public func countUpload(chainID: String, limit: Int64?) throws -> Bool {
        try countUploads(chainID: chainID, count: 1, limit: limit)
    }

    public func countUploads(chainID: String, count: Int64, limit: Int64?) throws -> Bool {
        try pool.use { db in
            try db.transaction {
                try db.execute("INSERT INTO token_chains(chain_id, uploads_used) VALUES($1, 0) ON CONFLICT(chain_id) DO NOTHING", [chainID])
                let used = try db.scalar("SELECT uploads_used FROM token_chains WHERE chain_id = $1 FOR UPDATE", chainID) ?? 0
                if let limit, used + count > limit { return false }
                try db.execute("UPDATE token_chains SET uploads_used = uploads_used + $2 WHERE chain_id = $1", [chainID, count])
                return true
            }
        }
    }

    public func revocationCount() throws -> Int64 {
        try pool.use { db in try db.scalar("SELECT value FROM meta WHERE key = 'revocations'") ?? 0 }
    }

    public func revokedSince(_ since: Int64) throws -> (ids: [String], count: Int64) {
        try pool.use { db in
            let rows = try db.query("SELECT id, revoked_count FROM tokens WHERE revoked_count > $1", [since])
            var ids: [String] = []
            var count = since
            for row in 0..<rows.count {
                ids.append(try rows.text(row, 0))
                count = max(count, try rows.int64(row, 1))
            }
            return (ids, count)
        }
    }
}
