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
}

/// Queries on the outbox table.
extension StateStore {
    /// Queues (or re-queues) a local change; a re-queued entry gets a new generation.
    public func enqueue(_ path: String, now: Int64 = Clock.now()) throws(SQLiteError) {
        try database.run("""
            INSERT INTO outbox(path, queued_at, generation) VALUES(?, ?, 1)
            ON CONFLICT(path) DO UPDATE SET generation = generation + 1, attempts = 0, last_error = NULL
            """, path, now)
    }

    /// Whether anything below `path` waits in the outbox.
    public func hasOutbox(below path: String) throws(SQLiteError) -> Bool {
        try database.scalar("SELECT 1 FROM outbox WHERE path >= ? AND path < ? LIMIT 1", path + "/", path + "0") != nil
    }

    public func dequeue(_ path: String) throws(SQLiteError) {
        try database.run("DELETE FROM outbox WHERE path = ?", path)
    }

    /// Removes the entry only if no newer change was queued since `generation`.
    public func dequeue(_ path: String, ifGeneration generation: Int64) throws(SQLiteError) {
        try database.run("DELETE FROM outbox WHERE path = ? AND generation = ?", path, generation)
    }

    public func outboxEntry(_ path: String) throws(SQLiteError) -> OutboxEntry? {
        let statement = try database.prepare("SELECT path, queued_at, generation, attempts, last_error, sent_sha256, sent_deleted FROM outbox WHERE path = ?")
        try statement.bind([path])
        defer { statement.reset() }
        guard try statement.step() else { return nil }
        return OutboxEntry(path: statement.text(0), queuedAt: statement.int64(1), generation: statement.int64(2),
                           attempts: statement.int(3), lastError: statement.optionalText(4), sentSHA256: statement.optionalText(5),
                           sentDeleted: statement.bool(6))
    }

    /// Entries ready to send, oldest first, skipping `excluding` (already in flight) and entries
    /// the server refused (they wait for `sinkid retry`).
    public func outbox(limit: Int, excluding: Set<String>) throws -> [OutboxEntry] {
        var out: [OutboxEntry] = []
        try database.query("SELECT path, queued_at, generation, attempts, last_error FROM outbox WHERE last_error IS NULL ORDER BY queued_at, path LIMIT ?",
                           limit + excluding.count) { row in
            let path = row.text(0)
            if excluding.contains(path) { return }
            if out.count < limit {
                out.append(OutboxEntry(path: path, queuedAt: row.int64(1), generation: row.int64(2),
                                       attempts: row.int(3), lastError: row.optionalText(4)))
            }
        }
        return out
    }

    /// Like `outbox(limit:excluding:)`, with each entry's files row (nil when it has none), in one query.
    /// A path whose conflict waits for `sinkid resolve` is held back: pushed, it would only be refused
    /// as stale and asked about again.
    public func outboxWithFiles(limit: Int, excluding: Set<String>) throws -> [(OutboxEntry, KnownFile?)] {
        var out: [(OutboxEntry, KnownFile?)] = []
        let columns = Self.fileColumns.split(separator: ",").map { "f." + $0.trimmingCharacters(in: .whitespaces) }.joined(separator: ", ")
        try database.query("""
            SELECT o.path, o.queued_at, o.generation, o.attempts, o.last_error, f.path IS NOT NULL, \(columns)
            FROM outbox o LEFT JOIN files f ON f.path = o.path
            WHERE o.last_error IS NULL AND NOT EXISTS (SELECT 1 FROM conflicts c WHERE c.path = o.path)
            ORDER BY o.queued_at, o.path LIMIT ?
            """, limit + excluding.count) { row in
            let path = row.text(0)
            if excluding.contains(path) || out.count >= limit { return }
            let entry = OutboxEntry(path: path, queuedAt: row.int64(1), generation: row.int64(2), attempts: row.int(3),
                                    lastError: row.optionalText(4))
            out.append((entry, row.bool(5) ? Self.readFile(row, offset: 6) : nil))
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

    public var outboxCount: Int { (try? database.scalar("SELECT count(*) FROM outbox")).map { Int($0) } ?? 0 }
}
