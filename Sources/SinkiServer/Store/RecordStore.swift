import SinkiRecord
import SinkiSupport

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
/// changeTag unique in the store that only grows, drawn by `ChangeTags` (the save's time, so that it
/// tells nothing of other users' saves); and beside them, updated in
/// the same transactions, the digests of every folder (`FolderDigestTable`).
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

    /// The user's change feed narrowed to records at `prefix` or below it (a token's scope; nil: all of
    /// them). `lastTag` is the last such record's, so a narrowed feed resumes exactly like a whole one.
    func changes(user: String, after tag: Int64, limit: PageLimit, within prefix: String?) throws -> ChangeBatch

    /// Whether a live (not deleted) record of the user at `prefix` or below names the asset `assetID`:
    /// a token narrowed to the prefix may then read that asset, whoever uploaded it.
    func namesAsset(user: String, assetID: String, within prefix: String) throws -> Bool

    /// The user's records at `prefix` or below it (`prefix/...`), or all of them when `prefix` is nil,
    /// ordered by path (bytewise), starting after the path `after`.
    func records(user: String, prefix: String?, after: String?, limit: PageLimit, includeData: Bool) throws -> RecordListing

    /// The highest changeTag among the user's records (0: none): a change token at it has seen them all.
    func headTag(user: String) throws -> Int64

    /// The digests of the user's live records below `folder` (a root name or a folder's path) and its
    /// head, and with `children` those of every folder directly in it that ever held a record, in path
    /// order (bytewise), all as of one moment (docs/protocol.md, "Digests"). A folder that never held a
    /// record answers zero digests and head 0. One indexed look-up, and one indexed range for children.
    func digests(user: String, folder: String, children: Bool) throws -> DigestReply

    /// The lowest changeTag a change token may carry: tokens below it may have missed a tombstone that
    /// retention removed, so their holders must start over (`410 token-expired`). 0 while every tombstone
    /// is kept.
    func historyFloor() throws -> Int64

    /// Removes up to `limit` tombstones saved before `cutoff` (nanoseconds since the epoch), every
    /// user's, oldest first, and raises `historyFloor()` to the highest changeTag removed, in one
    /// transaction (docs/server.md, "Tombstone retention").
    func sweepTombstones(savedBefore cutoff: Int64, limit: Int) throws -> TombstoneSweep

    /// Every upload asset id a record names (tombstones name none): the blobs that must stay. Manifest
    /// assets are not among them: their chunks are `chunkReferences`.
    func assetIDs() throws -> Set<String>

    /// The manifest of a live record of the user whose asset is `assetID` (a manifest hash), at
    /// `prefix` or below it when one is given; nil when there is none. What `GET /v1/assets/ID` serves.
    func manifest(user: String, assetID: String, within prefix: String?) throws -> [ChunkRef]?

    /// The chunks the manifests of the user's live records name, among records whose changeTag is above
    /// `tag` (0: all of them), and the user's highest changeTag as it was before they were read (at
    /// least `tag`): the records committed later are those above it, for a second look from there.
    /// Garbage collection removes only chunks no live record names (docs/server.md, "Chunks").
    func chunkReferences(user: String, after tag: Int64) throws -> ChunkReferences

    /// Releases the store; no other call may follow.
    func close()
}

/// What one pass of `sweepTombstones` did.
public struct TombstoneSweep: Sendable, Equatable {
    public var removed: Int
    /// The history floor after the pass.
    public var floor: Int64
    /// Whether more tombstones were due than the pass removed.
    public var more: Bool
    public init(removed: Int, floor: Int64, more: Bool) {
        self.removed = removed
        self.floor = floor
        self.more = more
    }
}

/// The chunks a user's live records name (`RecordStore.chunkReferences`).
public struct ChunkReferences: Sendable, Equatable {
    /// Chunk names (64 lowercase hex digits).
    public var names: Set<String>
    /// The highest change tag among the user's records when they were read: records changed later
    /// have higher tags.
    public var head: Int64

    public init(names: Set<String>, head: Int64) {
        self.names = names
        self.head = head
    }
}

/// Everything the server keeps in its database: records and accounts (one store, one transaction log).
public protocol ServerStore: RecordStore, AccountStore, VersionStore {
    /// How other servers on the same store announce their commits; nil when no other server can share it
    /// (SQLite: one server per database).
    func changeSignal(logger: Logger) -> (any ChangeSignal)?
}

extension ServerStore {
    public func changeSignal(logger: Logger) -> (any ChangeSignal)? { nil }
}
