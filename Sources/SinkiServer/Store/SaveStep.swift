import SinkiRecord
import SinkiSupport

/// The user's record at a path as a save finds it.
struct CurrentVersion: Sendable, Equatable {
    var tag: Int64
    var deleted: Bool
    var sha256: String
    /// Its inline data's bytes as stored, and an upload asset's size.
    var inlineBytes: Int64 = 0
    var blobBytes: Int64 = 0
    /// Whether its asset is a manifest (`SaveTransaction.chunks(of:)` reads it).
    var hasChunks = false

    /// What the folder digests count of it (`FolderDigestTable.content`).
    var digestContent: String? { FolderDigestTable.content(deleted: deleted, sha256: sha256) }
}

/// What the shared save decision (`SaveStep`) needs of a store, inside one write transaction of one
/// user: a handful of reads and writes that each store says in its own SQL. Made by the store for one
/// transaction and used only inside it.
protocol SaveTransaction: AnyObject, UsageTransaction {
    /// Whether a replaced record is kept as a version (`VersionStore.keepsHistory`).
    var keepsHistory: Bool { get }
    /// The user's record at `path`, tombstones included; nil when the store holds none there.
    func current(path: String) throws -> CurrentVersion?
    /// The record saved with `tag`, inline data included (the answer to a conflict).
    func record(tag: Int64) throws -> Record
    /// The chunks of the manifest of the current record saved with `tag`.
    func chunks(of tag: Int64) throws -> [ChunkRef]
    /// The live record at `path` with its content (a move's source); nil when none or a tombstone.
    func liveContent(path: String) throws -> Record?
    /// Draws the next change tag: above every tag drawn before, by any transaction of this user.
    func nextTag() throws -> Int64
    /// Copies the current record saved with `tag` into the kept versions, replaced at `supersededAt`.
    func keepVersion(tag: Int64, supersededAt: Int64) throws
    /// Writes `record` (its tag drawn) as the user's record at its path: a new row when `replacing` is
    /// 0, else in place of the row saved with that tag. `savedAt` is the server's clock. A tombstone's
    /// `movedFrom` is not kept.
    func write(_ record: Record, replacing: Int64, savedAt: Int64) throws
    /// XORs the batch's changes into the user's folder digests.
    func saveDigests(_ deltas: FolderDeltas) throws
}

/// The one place a version's life is decided (issue 23, item 4): for each item of a modify batch, in
/// order, whether it is saved (its base tag is the current tag), what content it carries (a move copies
/// its source's), what a tombstone keeps (nothing), what becomes of the record it replaces (kept as a
/// version while history is on), and what it all adds to the user's usage, checked against their quota
/// at the end. Both stores run it over their `SaveTransaction`.
enum SaveStep {
    /// What one batch did: an outcome per item, and the last tag drawn (nil when nothing was saved).
    struct Result {
        var outcomes: [StoreOutcome]
        var lastTag: Int64?
    }

    /// Throws `StorageFull` (the caller's transaction then saves nothing) when the batch grows the user's
    /// usage past their quota.
    static func apply(_ items: [CheckedRecord], user: String, in transaction: some SaveTransaction, now: Int64) throws -> Result {
        var outcomes: [StoreOutcome] = []
        outcomes.reserveCapacity(items.count)
        var deltas = FolderDeltas()
        var ledger = UsageLedger()
        var lastTag: Int64?
        let keeps = transaction.keepsHistory
        for item in items {
            var record = item.record
            let current = try transaction.current(path: record.path)
            let currentTag = current?.tag ?? 0
            guard currentTag == record.baseTag else {
                // A path the store never held answers a tombstone at tag 0: the writer resends based on 0.
                outcomes.append(.conflict(current == nil ? Record(path: record.path, deleted: true, changeTag: 0)
                                                         : try transaction.record(tag: currentTag)))
                continue
            }
            if !record.deleted, record.data == nil, record.asset == nil, let source = record.movedFrom {
                // A rename: the content is the source record's, copied here in this transaction.
                guard let copied = try transaction.liveContent(path: source), copied.sha256 == record.sha256, copied.size == record.size else {
                    outcomes.append(.refused(Problem(.moveSourceGone, detail: "\(quoted(source)) does not hold the content of \(quoted(record.path)) any more; send it")))
                    continue
                }
                record.data = copied.data
                record.asset = copied.asset
            }
            let tag = try transaction.nextTag()
            lastTag = tag
            record.changeTag = tag
            if record.deleted {
                record.data = nil
                record.asset = nil
                record.xattrs = .none
            }
            if let current {
                // The replaced version leaves the current records: kept in history, or gone.
                if !current.deleted {
                    let held = StoredContent(inlineBytes: current.inlineBytes, blobBytes: current.blobBytes,
                                             chunks: current.hasChunks ? try transaction.chunks(of: current.tag) : [])
                    ledger.count(held, live: -1, kept: keeps ? 1 : 0)
                }
                if keeps { try transaction.keepVersion(tag: current.tag, supersededAt: now) }
            }
            ledger.count(StoredContent(of: record), live: 1, kept: 0)
            try transaction.write(record, replacing: currentTag, savedAt: now)
            deltas.change(path: record.path, from: current?.digestContent, to: FolderDigestTable.content(deleted: record.deleted, sha256: record.sha256),
                          tag: tag)
            outcomes.append(.saved(record.withoutData))
        }
        try transaction.saveDigests(deltas)
        if let usage = try ledger.commit(in: transaction), usage.growth > 0, let quota = usage.after.quotaBytes, usage.after.usedBytes > quota {
            var figures = usage.before
            figures.neededBytes = usage.growth
            throw StorageFull(user: user, figures: figures)
        }
        return Result(outcomes: outcomes, lastTag: lastTag)
    }
}
