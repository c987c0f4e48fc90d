import SinkiRecord
import SinkiSupport

/// A remote change that could not be written here yet, kept until it is applied or superseded.
public struct UnappliedChange: Sendable, Equatable {
    /// The record as the server sent it (inline content included).
    public var record: Record
    public var failure: ApplyFailure
    /// Failed attempts at this version so far.
    public var attempts: Int
    /// When this path first failed (nanoseconds since the epoch); kept while newer versions fail too.
    public var since: Int64
    /// When it is tried next on its own (an event that may have removed its cause tries it sooner).
    public var nextAttempt: Int64
}

/// The `unapplied` table: remote changes the change feed moved past because they are recorded here.
///
/// This is what makes a dropped change impossible: the feed token is committed in the same
/// transaction as the outcome of every record it covers, and a record's outcome is either its row
/// agreeing with its changeTag (applied, adopted, or superseded by a newer version) or a row here.
extension StateStore {
    static let unappliedSchema = """
        CREATE TABLE IF NOT EXISTS unapplied(
            path TEXT PRIMARY KEY,
            change_tag INTEGER NOT NULL,
            record BLOB NOT NULL,
            cause TEXT NOT NULL,
            reason TEXT NOT NULL,
            attempts INTEGER NOT NULL,
            since INTEGER NOT NULL,
            next_attempt INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS unapplied_next ON unapplied(next_attempt);
        """

    /// Keeps `record` as not applied because of `failure`, replacing an older version of the path.
    /// `delay` is how long it waits before it is tried again on its own.
    public func keepUnapplied(_ record: Record, failure: ApplyFailure, delay: (Int) -> Int64, now: Int64 = Clock.now()) throws {
        let existing = try unapplied(record.path)
        if let existing, existing.record.changeTag > record.changeTag && record.changeTag > 0 { return }
        let sameVersion = existing.map { $0.record.changeTag == record.changeTag } ?? false
        let attempts = sameVersion ? existing!.attempts + 1 : 1
        try database.run("""
            INSERT INTO unapplied(path, change_tag, record, cause, reason, attempts, since, next_attempt) VALUES(?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(path) DO UPDATE SET change_tag = excluded.change_tag, record = excluded.record, cause = excluded.cause,
                reason = excluded.reason, attempts = excluded.attempts, next_attempt = excluded.next_attempt
            """, record.path, record.changeTag, record.jsonBytes(), failure.cause.rawValue, failure.message, attempts,
            existing?.since ?? now, now + delay(attempts))
        if existing == nil { unappliedCount += 1 }
    }

    public func unapplied(_ path: String) throws -> UnappliedChange? {
        var found: UnappliedChange?
        try database.query("SELECT \(Self.unappliedColumns) FROM unapplied WHERE path = ?", path) { found = Self.readUnapplied($0) }
        return found
    }

    /// Changes due by `now`, soonest first, at most `limit`.
    public func dueUnapplied(now: Int64, limit: Int) throws -> [UnappliedChange] {
        var out: [UnappliedChange] = []
        try database.query("SELECT \(Self.unappliedColumns) FROM unapplied WHERE next_attempt <= ? ORDER BY next_attempt LIMIT ?", now, limit) {
            if let change = Self.readUnapplied($0) { out.append(change) }
        }
        return out
    }

    /// Every change not applied, path order, at most `limit` (for status).
    public func unappliedChanges(limit: Int) throws -> [UnappliedChange] {
        try Self.unappliedChanges(database, limit: limit)
    }

    static func unappliedChanges(_ database: SQLiteDatabase, limit: Int) throws -> [UnappliedChange] {
        var out: [UnappliedChange] = []
        try database.query("SELECT \(unappliedColumns) FROM unapplied ORDER BY path LIMIT ?", limit) {
            if let change = readUnapplied($0) { out.append(change) }
        }
        return out
    }

    /// When the next change is due; nil when none waits.
    public func nextUnappliedAttempt() throws(SQLiteError) -> Int64? {
        guard unappliedCount > 0 else { return nil }
        return try database.scalar("SELECT min(next_attempt) FROM unapplied")
    }

    /// Makes the changes at or below `path` (all when nil) due now, e.g. for `sinkid retry` or an event
    /// that may have removed their cause; returns their paths.
    @discardableResult
    public func makeUnappliedDue(under path: String?, includingInvalid: Bool = true, now: Int64 = Clock.now()) throws -> [String] {
        guard unappliedCount > 0 else { return [] }
        var paths: [String] = []
        let invalid = includingInvalid ? "" : ApplyFailure.Cause.invalid.rawValue
        if let path {
            try database.query("SELECT path FROM unapplied WHERE (path = ? OR (path >= ? AND path < ?)) AND cause != ? AND next_attempt > ?",
                               path, path + "/", path + "0", invalid, now) {
                paths.append($0.text(0))
            }
        } else {
            try database.query("SELECT path FROM unapplied WHERE cause != ? AND next_attempt > ?", invalid, now) { paths.append($0.text(0)) }
        }
        try transaction {
            for found in paths { try database.run("UPDATE unapplied SET next_attempt = ? WHERE path = ?", now, found) }
        }
        return paths
    }

    /// Forgets the unapplied change at `path` if its version is `tag` or older: the path now holds
    /// that version or a newer one.
    func settleUnapplied(_ path: String, upTo tag: Int64) throws(SQLiteError) {
        guard unappliedCount > 0 else { return }
        try database.run("DELETE FROM unapplied WHERE path = ? AND change_tag <= ?", path, tag)
        if database.changes > 0 { unappliedCount -= 1 }
    }

    /// Forgets the unapplied change at `path` whatever its version (the path is no longer synced here,
    /// or its conflict now waits for `sinkid resolve`).
    func dropUnapplied(_ path: String) throws(SQLiteError) {
        guard unappliedCount > 0 else { return }
        try database.run("DELETE FROM unapplied WHERE path = ?", path)
        if database.changes > 0 { unappliedCount -= 1 }
    }

    static let unappliedColumns = "path, change_tag, record, cause, reason, attempts, since, next_attempt"

    static func readUnapplied(_ row: Statement) -> UnappliedChange? {
        var reader = JSONReader(row.blob(2))
        guard let record = try? Record.read(from: &reader) else { return nil }
        let cause = ApplyFailure.Cause(rawValue: row.text(3)) ?? .io
        return UnappliedChange(record: record, failure: ApplyFailure(cause, row.text(4)), attempts: row.int(5), since: row.int64(6),
                               nextAttempt: row.int64(7))
    }

    /// Counts the table once when the database opens; kept up to date by the calls above.
    func countUnapplied() throws(SQLiteError) -> Int {
        Int(try database.scalar("SELECT count(*) FROM unapplied") ?? 0)
    }
}
