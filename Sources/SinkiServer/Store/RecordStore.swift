import SinkiRecord

/// A record that passed the protocol's checks (path rules, content matching `size` and `sha256`) and
/// may be handed to a store. Only the server's validation builds one, so a store never sees a bad path.
public struct CheckedRecord: Sendable, Equatable {
    public let record: Record

    /// Wraps a record whose path is known to be valid; `ModifyValidator` is the usual way in.
    public init(_ record: Record, path: RecordPath) {
        precondition(record.path == path.string, "bug: checked record path differs from its RecordPath")
        self.record = record
    }
}

/// What a store did with one checked item of a modify batch.
public enum StoreOutcome: Sendable, Equatable {
    /// Saved with a new changeTag; the stored record, without inline data.
    case saved(Record)
    /// The item's baseTag was not the current changeTag: the server's record, data included. A path the
    /// store has never held answers a tombstone with changeTag 0, so the writer resends based on 0.
    case conflict(Record)
    /// The item could not be saved as sent (a move whose source no longer holds that content).
    case refused(Problem)
}

/// One page of a user's change feed.
public struct ChangeBatch: Sendable, Equatable {
    public var records: [Record]
    /// The changeTag the next page starts after: the last record's, or the one asked from when empty.
    public var lastTag: Int64
    /// More records are ready beyond this page.
    public var more: Bool

    public init(records: [Record], lastTag: Int64, more: Bool) {
        self.records = records
        self.lastTag = lastTag
        self.more = more
    }
}

/// One page of a look-up by path prefix.
public struct RecordListing: Sendable, Equatable {
    public var records: [Record]
    public var more: Bool

    public init(records: [Record], more: Bool) {
        self.records = records
        self.more = more
    }
}

/// How many records, and how many bytes of inline data, a page may hold. A page stops at `records`,
/// or after the record that takes it past `dataBytes`, so one huge record still makes progress.
public struct PageLimit: Sendable, Equatable {
    public var records: Int
    public var dataBytes: Int

    public init(records: Int, dataBytes: Int) {
        precondition(records > 0, "bug: a page must be allowed at least one record")
        self.records = records
        self.dataBytes = dataBytes
    }
}

/// Where the server keeps records: one per (user, path), at its latest version only, with a
/// changeTag drawn from one counter for the whole store that only grows.
///
/// The server checks requests and hands the store only what passed; the store stores. Every
/// implementation runs through the same conformance suite (`StoreConformanceTests`). Calls may come from
/// several threads at once.
public protocol RecordStore: Sendable {
    /// A random id created with the store and kept for its life; change tokens carry it so that a
    /// token from a replaced database is recognised.
    var storeID: String { get }

    /// Applies a batch for one user in ONE transaction, item by item in order: an item whose `baseTag`
    /// equals the changeTag of the user's current record at that path (0 when none) is saved with the
    /// next changeTag; any other is a conflict. Inline data is stored as given (compressed).
    func modify(user: String, items: [CheckedRecord]) throws -> [StoreOutcome]

    /// The user's records whose changeTag is above `tag`, oldest first, tombstones included.
    func changes(user: String, after tag: Int64, limit: PageLimit) throws -> ChangeBatch

    /// The user's records at `prefix` or below it (`prefix/...`), or all of them when `prefix` is nil,
    /// ordered by path (bytewise), starting after the path `after`.
    func records(user: String, prefix: String?, after: String?, limit: PageLimit, includeData: Bool) throws -> RecordListing

    /// The lowest changeTag a change token may carry: tokens below it may have missed a tombstone that
    /// retention removed, so their holders must start over (`410 token-expired`). 0 while every tombstone
    /// is kept.
    func historyFloor() throws -> Int64

    // Retention hook: a later `sweepTombstones(savedBefore:)` deletes tombstones older than the
    // retention period and raises `historyFloor()` past the highest changeTag it removed. Tombstones
    // carry their save time (`saved_at` in SQLite) for that.

    /// Releases the store; no other call may follow.
    func close()
}
