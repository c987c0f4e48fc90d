import Foundation
import SinkiSupport

/// A local change waiting for the server to accept it.
public struct OutboxEntry: Sendable, Equatable {
    public var path: String
    public var queuedAt: Int64
    /// Bumped on every new local change to the path, so an acknowledgement of an older send
    /// does not clear a newer change.
    public var generation: Int64
    public var attempts: Int
    public var lastError: String?
    /// What the last push of this path carried (hash, or a tombstone), so that a save the server
    /// took but whose answer was lost is recognised as ours when it comes back.
    public var sentSHA256: String? = nil
    public var sentDeleted = false
    /// Sent even when the row holds no local change: the version here, which is the server's, goes
    /// again as a new one. Set where this agent's delete of a path lost to a version it then took:
    /// devices that followed this agent's rename of the path moved that version away too, and only a
    /// newer change brings it back to them.
    public var resend = false
}

/// Where a walk through the outbox in push order stands: just after the entry queued at `queuedAt`
/// for `path` (keyset pagination: the next page starts there, whatever was removed meanwhile).
public struct OutboxPosition: Sendable, Equatable {
    public var queuedAt: Int64
    public var path: String
    public static let start = OutboxPosition(queuedAt: .min, path: "")

    public init(queuedAt: Int64, path: String) {
        self.queuedAt = queuedAt
        self.path = path
    }

    public init(after entry: OutboxEntry) { self.init(queuedAt: entry.queuedAt, path: entry.path) }
}

/// Queries on the outbox table.
extension StateStore {
    /// Queues (or re-queues) a local change; a re-queued entry gets a new generation. `resend`: the
    /// path's version goes even if it is the server's (`OutboxEntry.resend`); a flag once set stays until
    /// the entry goes.
    public func enqueue(_ path: String, now: Int64 = Clock.now(), resend: Bool = false) throws(SQLiteError) {
        try database.run("""
            INSERT INTO outbox(path, queued_at, generation, resend) VALUES(?, ?, 1, ?)
            ON CONFLICT(path) DO UPDATE SET generation = generation + 1, attempts = 0, last_error = NULL, resend = max(resend, excluded.resend)
            """, path, now, resend)
    }

    /// Whether anything below `path` waits in the outbox.
    public func hasOutbox(below path: String) throws(SQLiteError) -> Bool {
        try database.scalar("SELECT 1 FROM outbox WHERE path >= ? AND path < ? LIMIT 1", path + "/", path + "0") != nil
    }

    /// `unlessResend`: an entry that sends the version again stays (a look that finds the disk as
    /// synced says nothing against it).
    public func dequeue(_ path: String, unlessResend: Bool = false) throws(SQLiteError) {
        try database.run("DELETE FROM outbox WHERE path = ?" + (unlessResend ? " AND resend = 0" : ""), path)
    }

    /// Removes the entry only if no newer change was queued since `generation`.
    public func dequeue(_ path: String, ifGeneration generation: Int64) throws(SQLiteError) {
        try database.run("DELETE FROM outbox WHERE path = ? AND generation = ?", path, generation)
    }

    public func outboxEntry(_ path: String) throws(SQLiteError) -> OutboxEntry? {
        let statement = try database.prepare("SELECT path, queued_at, generation, attempts, last_error, sent_sha256, sent_deleted, resend FROM outbox WHERE path = ?")
        try statement.bind([path])
        defer { statement.reset() }
        guard try statement.step() else { return nil }
        return OutboxEntry(path: statement.text(0), queuedAt: statement.int64(1), generation: statement.int64(2),
                           attempts: statement.int(3), lastError: statement.optionalText(4), sentSHA256: statement.optionalText(5),
                           sentDeleted: statement.bool(6), resend: statement.bool(7))
    }

    /// The outbox in push order (oldest first, then by path) from just after `position`, each entry
    /// with its files row (nil when it has none), at most `limit` of them. Left out: entries the
    /// server refused (they wait for `sinkid retry`), paths whose conflict waits for `sinkid resolve`
    /// (pushed, they would only be refused as stale and asked about again), and entries held back
    /// behind others (`heldBack`). The query walks `outbox_order` from `position` and stops
    /// after `limit` rows: its cost follows the page, not the table.
    public func outboxPage(after position: OutboxPosition, limit: Int) throws -> [(OutboxEntry, KnownFile?)] {
        var out: [(OutboxEntry, KnownFile?)] = []
        let columns = Self.fileColumns.split(separator: ",").map { "f." + $0.trimmingCharacters(in: .whitespaces) }.joined(separator: ", ")
        try database.query("""
            SELECT o.path, o.queued_at, o.generation, o.attempts, o.last_error, o.resend, f.path IS NOT NULL, \(columns)
            FROM outbox o LEFT JOIN files f ON f.path = o.path
            WHERE o.last_error IS NULL AND (o.queued_at, o.path) > (?, ?)
              AND NOT EXISTS (SELECT 1 FROM conflicts c WHERE c.path = o.path)
              AND NOT (\(Self.heldBack))
            ORDER BY o.queued_at, o.path LIMIT ?
            """, position.queuedAt, position.path, limit) { row in
            let entry = OutboxEntry(path: row.text(0), queuedAt: row.int64(1), generation: row.int64(2), attempts: row.int(3),
                                    lastError: row.optionalText(4), resend: row.bool(5))
            out.append((entry, row.bool(6) ? Self.readFile(row, offset: 7) : nil))
        }
        return out
    }

    /// Whether outbox entry `o` (files row `f`) must wait for other entries to be accepted first:
    /// - a rename's old path keeps its content on the server until the new path (whose row names it
    ///   in `moved_from`) has copied it;
    /// - a directory's tombstone waits for those of its contents, or a peer that got it first could not
    ///   remove the directory and would keep it;
    /// - a file (or link) where a directory was waits for the tombstones of what was in it, so that a
    ///   peer finds the directory empty when the file comes to replace it.
    /// Each look-up is an index search (`files_moved_from`, the outbox's primary key).
    static let heldBack = """
        (f.present IS 0 AND EXISTS (SELECT 1 FROM files m JOIN outbox mo ON mo.path = m.path WHERE m.moved_from = o.path))
        OR ((f.present IS 0 OR f.kind IN (0, 2))
            AND EXISTS (SELECT 1 FROM outbox b WHERE b.path >= o.path || '/' AND b.path < o.path || '0'))
        """

    /// Entries held back (`heldBack`) that could otherwise be sent, up to `limit`, with the entry each
    /// waits for; for saying why a push has nothing to send while entries wait.
    public func heldEntries(limit: Int) throws -> [(path: String, waitsFor: String)] {
        var out: [(path: String, waitsFor: String)] = []
        try database.query("""
            SELECT o.path, coalesce(
                (SELECT m.path FROM files m JOIN outbox mo ON mo.path = m.path WHERE m.moved_from = o.path LIMIT 1),
                (SELECT b.path FROM outbox b WHERE b.path >= o.path || '/' AND b.path < o.path || '0' LIMIT 1))
            FROM outbox o JOIN files f ON f.path = o.path
            WHERE o.last_error IS NULL AND NOT EXISTS (SELECT 1 FROM conflicts c WHERE c.path = o.path)
              AND (\(Self.heldBack))
            ORDER BY o.queued_at, o.path LIMIT ?
            """, limit) { row in
            out.append((row.text(0), row.optionalText(1) ?? ""))
        }
        return out
    }

    /// Notes what is being pushed for `path`.
    public func markSent(_ path: String, sha256: String?, deleted: Bool) throws(SQLiteError) {
        try database.run("UPDATE outbox SET sent_sha256 = ?, sent_deleted = ? WHERE path = ?", sha256, deleted, path)
    }

    /// Parks an entry the server refused, with its reason.
    public func refuse(_ path: String, reason: String) throws(SQLiteError) {
        try database.run("UPDATE outbox SET attempts = attempts + 1, last_error = ? WHERE path = ?", reason, path)
    }

    public var outboxCount: Int { (try? StatusQueries.counts(database).pending) ?? 0 }

    /// Whether anything waits to be sent (refused entries wait for `sinkid retry`, not counted): one
    /// row looked at, however long the outbox.
    public var hasEntriesToSend: Bool { (try? database.scalar("SELECT EXISTS (SELECT 1 FROM outbox WHERE last_error IS NULL)")) == 1 }

    /// Whether any remote change waits to be applied.
    public var hasUnapplied: Bool { (try? database.scalar("SELECT EXISTS (SELECT 1 FROM unapplied)")) == 1 }
}
