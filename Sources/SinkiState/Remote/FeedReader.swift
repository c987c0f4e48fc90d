import SinkiPlan
import SinkiRecord
import SinkiSupport

/// The feed reader: takes what the server says (feed pages, a save's answer, listings) into the
/// Remote tree, keeping the inline content of small files for the writes that follow.
final class FeedReader {
    let context: ReplicaContext
    var store: StateStore { context.store }
    /// Inline content of records read, until it is written (or superseded).
    var inline = InlineContent()
    /// Records whose path can be no path here, named once each in the log.
    var refused = PathSet()
    /// A conflict record changed or went: waiting conflicts are looked at for one settled elsewhere
    /// (and once at start).
    var sharedConflictsChanged = true
    /// The tags of conflict records' tombstones read (by the conflict's path): a new record at a path
    /// bases on it. In memory: after a restart the server's answer tells it again.
    var conflictTombstones: [PathKey: Int64] = [:]

    init(context: ReplicaContext) { self.context = context }

    /// Takes in records read from the server, newest version per path, with `token` (a feed page's
    /// position) in the same transaction. Records of roots not synced here are left out; a record that
    /// is this agent's own save coming back records that save's outcome (docs/planner.md, "Reading
    /// the feed"). Returns the paths whose Remote entry changed.
    @discardableResult
    func ingest(_ records: [Record], token: String?, exactly: Bool = false) throws -> [String] {
        var kept: [(path: String, facts: RemoteFacts)] = []
        var latest: [PathKey: Record] = [:]
        var conflicts: [PathKey: Record] = [:]
        for record in records where SharedConflict.isReserved(record.path) {
            if let seen = conflicts[PathKey(record.path)], seen.changeTag >= record.changeTag { continue }
            conflicts[PathKey(record.path)] = record
        }
        for record in records where !SharedConflict.isReserved(record.path) {
            guard let path = validated(record) else { continue }
            if let seen = latest[PathKey(path.string)], seen.changeTag >= record.changeTag { continue }
            latest[PathKey(path.string)] = record
        }
        for record in records where latest[PathKey(record.path)] == record {
            kept.append((record.path, RemoteFacts(record)))
        }
        return try store.transaction {
            let following = try deletesFollowingRenames(latest)
            let changed = try store.observeRemote(kept, exactly: exactly)
            for (path, facts) in following { try store.setSynced(path, SyncedFacts(facts)) }
            for path in changed {
                guard let record = latest[PathKey(path)], let local = context.locate(path) else { continue }
                if context.isIgnored(local, isDirectory: record.kind == .directory) { try store.setIgnored(path, true) }
                try recordOwnSave(path, record)
            }
            // Content is kept for the version Remote holds, new or not (a look-up brings the same version
            // again with its data).
            for (key, record) in latest where !record.deleted {
                let path = key.string
                guard try store.row(path)?.remote?.tag == record.changeTag else { continue }
                if let asset = record.asset, let chunks = asset.chunks { try store.saveManifest(asset.id, chunks: chunks, held: false) }
                if let data = record.data { inline.keep(path, tag: record.changeTag, data: data) }
            }
            try observeConflicts(conflicts.values)
            if let token { try store.setMeta(MetaKey.feedToken, token) }
            return changed
        }
    }

    /// Renames in `records` (a new path with `movedFrom`, and its source's tombstone after it) of a file
    /// the user deleted here and whose delete the server has not heard of (gone from disk, agreed on
    /// with the very content renamed, Remote still at that version): the delete follows the rename. The
    /// new path's version is what both sides agreed on, for what it is, and gone here it is sent as a
    /// delete. (A copy leaves its source live: it is a file of its own, and comes down.)
    private func deletesFollowingRenames(_ records: [PathKey: Record]) throws -> [(String, RemoteFacts)] {
        var out: [(String, RemoteFacts)] = []
        // Of several records naming one source, only the last can be the rename that deleted it: the
        // others are copies (a peer's guess by content, or a file written with the same bytes), files of
        // their own that must come down (fault suite seed 3: two moves from one source, both followed,
        // took a peer's edit with them).
        var lastMover: [String: Int64] = [:]
        for record in records.values where !record.deleted {
            if let source = record.movedFrom { lastMover[source] = max(lastMover[source] ?? record.changeTag, record.changeTag) }
        }
        // Not for empty files: a rename of one may be a peer's guess by content, and following a wrong
        // guess would delete a file the peer made.
        for (key, record) in records where !record.deleted && record.kind != .directory && record.size > 0 {
            let path = key.string
            guard let source = record.movedFrom, lastMover[source] == record.changeTag, try !store.hasLaterMover(from: source, than: record.changeTag),
                  let tombstone = records[PathKey(source)], tombstone.deleted, tombstone.changeTag > record.changeTag,
                  let row = try store.row(source), row.local == nil, let synced = row.synced, let remote = row.remote else { continue }
            guard let node = RemoteFacts(record).node else { continue }
            let deletedHere = remote.tag == synced.tag && remote.node == synced.node && synced.node == node
                || remote.kind == nil && context.deletedHere[PathKey(source)] == node
            guard deletedHere else { continue }
            let target = try store.row(path)
            guard target?.local == nil, target?.synced == nil else { continue }
            context.logger.info("\(quoted(source)) was deleted here and renamed to \(quoted(path)) elsewhere: the delete follows the rename")
            out.append((path, RemoteFacts(record)))
        }
        return out
    }

    /// Conflict records (`SharedConflict`) of roots synced here, into `shared_conflicts`: what every
    /// device of the user lists, and what tells a device that found a conflict it was settled elsewhere.
    private func observeConflicts(_ records: some Collection<Record>) throws {
        for record in records {
            guard let path = SharedConflict.conflictPath(of: record.path), let root = PathText.firstComponent(path),
                  context.rootIndex[root] != nil else { continue }
            try store.observeSharedConflict(path, SharedConflictRow(record, seenAt: Clock.now()))
            if record.deleted { conflictTombstones[PathKey(path)] = record.changeTag }
            sharedConflictsChanged = true
        }
    }

    /// The path of a record that may be taken in: valid, and in a root synced here.
    private func validated(_ record: Record) -> RecordPath? {
        do {
            let path = try RecordPath(validating: record.path)
            return context.rootIndex[path.root] == nil ? nil : path
        } catch {
            if refused.insert(record.path).inserted { context.logger.error("refusing remote record: \(error)") }
            return nil
        }
    }

    /// When the Remote entry just read is a version this agent saved and has no answer to, that save's
    /// outcome is recorded now, as the save's own transaction would have: Synced takes it, and the
    /// unanswered saves of the path are answered. Left to the planner, a later page could replace the
    /// entry before the agreement is recorded, and the version would look like a local edit again.
    private func recordOwnSave(_ path: String, _ record: Record) throws {
        guard !record.deleted else { return }
        guard let node = RemoteFacts(record).node else { return }
        let sent = try store.sent(path)
        guard sent.contains(node) else { return }
        try store.setSynced(path, SyncedFacts(RemoteFacts(record)))
        try store.dropSent(path)
    }
}

/// Inline content of small files as the feed brought it, until it is written: the pull loop reads on
/// past a page only while this holds less than `Agent.inlineAhead`, so it holds about that much, and a
/// record whose content is no longer here (a restart, a page larger than the budget) has it fetched by
/// a look-up.
///
/// `bytes` counts what an entry costs beside its data (its key, array and slot, and its place in the
/// order), as the push cache does: counted by data alone, 16 MiB of 64-byte files was some 240,000
/// entries. Emptied, it gives its room back: agent B idled at 92-108 MiB after a first sync of a
/// million small files, holding the table and keys of the largest read-ahead, and at 50 MiB since.
struct InlineContent {
    private var entries: [PathKey: (tag: Int64, data: [UInt8])] = [:]
    private var order: [PathKey] = []
    private(set) var bytes = 0
    /// Past this, the oldest entries are let go.
    static let budget = 64 << 20
    /// What an entry costs beside its data.
    static let overhead = 256

    mutating func keep(_ path: String, tag: Int64, data: [UInt8]) {
        let key = PathKey(path)
        if let old = entries[key] { bytes -= Self.cost(old.data) } else { order.append(key) }
        entries[key] = (tag, data)
        bytes += Self.cost(data)
        while bytes > Self.budget, !order.isEmpty {
            let oldest = order.removeFirst()
            if let dropped = entries.removeValue(forKey: oldest) { bytes -= Self.cost(dropped.data) }
        }
        if order.count > entries.count * 2 + 1024 { order = order.filter { entries[$0] != nil } }
    }

    private static func cost(_ data: [UInt8]) -> Int { data.count + overhead }

    /// The inline content of `path` at version `tag`, if it is here.
    func data(_ path: String, tag: Int64) -> [UInt8]? {
        guard let entry = entries[PathKey(path)], entry.tag == tag else { return nil }
        return entry.data
    }

    /// Lets go of the content of `path` (written, or no longer wanted).
    mutating func drop(_ path: String) {
        if let dropped = entries.removeValue(forKey: PathKey(path)) { bytes -= Self.cost(dropped.data) }
        // Everything written: the table and the order give their room back (a dictionary keeps its
        // capacity, and the order its keys, until then).
        if entries.isEmpty && !order.isEmpty {
            entries = [:]
            order = []
        }
    }

    /// Entries held, and keys in the order (for tests).
    var counts: (entries: Int, order: Int) { (entries.count, order.count) }

    var isEmpty: Bool { entries.isEmpty }
}
