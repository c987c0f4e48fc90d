import SinkiPlan
import SinkiRecord
import SinkiSupport

/// Where the trees differ: the work, found by walking the two partial indexes (`tree_local_work`,
/// `tree_remote_work`) that SQLite keeps in step with every write. Nothing here is stored.
extension StateStore {
    /// Paths after `after` where the trees differ, in bytewise order, at most `limit`: the two indexes
    /// walked from `after` and merged, so a page costs what it holds.
    /// `remoteOnly`: only where Remote differs (while the feed is read, nothing can be sent anyway).
    public func workPage(after: String, limit: Int, remoteOnly: Bool = false) throws -> [String] {
        var local: [String] = [], remote: [String] = []
        if !remoteOnly {
            try database.query("SELECT path FROM tree INDEXED BY tree_local_work WHERE \(Self.localDiffers) AND path > ? ORDER BY path LIMIT ?",
                               after, limit) { local.append($0.text(0)) }
        }
        try database.query("SELECT path FROM tree INDEXED BY tree_remote_work WHERE \(Self.remoteDiffers) AND path > ? ORDER BY path LIMIT ?",
                           after, limit) { remote.append($0.text(0)) }
        var out: [String] = []
        out.reserveCapacity(min(limit, local.count + remote.count))
        var i = 0, j = 0
        while out.count < limit && (i < local.count || j < remote.count) {
            if j >= remote.count || (i < local.count && Self.bytewise(local[i], remote[j]) <= 0) {
                if j < remote.count && Self.bytewise(local[i], remote[j]) == 0 { j += 1 }
                out.append(local[i])
                i += 1
            } else {
                out.append(remote[j])
                j += 1
            }
        }
        return out
    }

    /// -1, 0 or 1 as `a` sorts before, with, or after `b` byte by byte (SQLite's BINARY collation).
    static func bytewise(_ a: String, _ b: String) -> Int {
        var left = a.utf8.makeIterator(), right = b.utf8.makeIterator()
        while true {
            switch (left.next(), right.next()) {
            case (nil, nil): return 0
            case (nil, _): return -1
            case (_, nil): return 1
            case let (x?, y?): if x != y { return x < y ? -1 : 1 }
            }
        }
    }

    /// Whether the trees differ anywhere (one row of each index looked at).
    public var hasWork: Bool {
        (try? database.scalar("""
            SELECT EXISTS (SELECT 1 FROM tree INDEXED BY tree_local_work WHERE \(Self.localDiffers))
                OR EXISTS (SELECT 1 FROM tree INDEXED BY tree_remote_work WHERE \(Self.remoteDiffers))
            """)) == 1
    }

    /// Whether the trees differ at `path` itself.
    public func differs(_ path: String) throws(SQLiteError) -> Bool {
        try database.scalar("SELECT EXISTS (SELECT 1 FROM tree WHERE path = ? AND ((\(Self.localDiffers)) OR (\(Self.remoteDiffers))))", path) == 1
    }

    /// Whether the trees differ anywhere at or below `path`.
    public func hasWork(under path: String) throws(SQLiteError) -> Bool {
        try database.scalar("""
            SELECT EXISTS (SELECT 1 FROM tree INDEXED BY tree_local_work WHERE \(Self.localDiffers) AND (path = ?1 OR (path >= ?1 || '/' AND path < ?1 || '0')))
                OR EXISTS (SELECT 1 FROM tree INDEXED BY tree_remote_work WHERE \(Self.remoteDiffers) AND (path = ?1 OR (path >= ?1 || '/' AND path < ?1 || '0')))
            """, path) == 1
    }

    /// Candidates looked at one by one before `below` trusts its index answers: enough for any folder
    /// a person edits by hand, few enough that a folder of a million new files costs nothing.
    static let belowExact = 64

    /// Whether any row lies below `path` (cheap: one probe of the primary key).
    public func hasRowsBelow(_ path: String) throws -> Bool {
        try database.scalar("SELECT 1 FROM tree WHERE path >= ? AND path < ? LIMIT 1", path + "/", path + "0") != nil
    }

    /// What the trees hold below `path` as far as its plan depends on it (`Below`). Live-ness comes
    /// from one index probe each; whether something below changed is read from the work indexes and
    /// decided by the planner's own rule (`Below.add`, against each entry's base) for the first
    /// `belowExact` candidates, beyond which a candidate the index shows counts as changed.
    public func below(_ path: String) throws -> Below {
        var below = Below()
        let lower = path + "/", upper = path + "0"
        below.localLive = try database.scalar("SELECT 1 FROM tree WHERE path >= ? AND path < ? AND l_kind IS NOT NULL LIMIT 1", lower, upper) != nil
        below.remoteLive = try database.scalar("SELECT 1 FROM tree WHERE path >= ? AND path < ? AND r_kind IS NOT NULL LIMIT 1", lower, upper) != nil
        if below.localLive {
            below.localKept = try changedBelow(lower, upper, index: "tree_local_work", differs: Self.localDiffers, kind: "l_kind") { entries in
                entries.local.map { $0.node != entries.base.node } ?? false
            }
        }
        if below.remoteLive {
            below.remoteKept = try changedBelow(lower, upper, index: "tree_remote_work", differs: Self.remoteDiffers, kind: "r_kind") { entries in
                entries.remote?.node.map { $0 != entries.base.node } ?? false
            }
        }
        return below
    }

    /// Whether one side holds a live entry between `lower` and `upper` that it changed (`kept`): the
    /// side's work index gives the candidates, the first `belowExact` are decided one by one.
    private func changedBelow(_ lower: String, _ upper: String, index: String, differs: String, kind: String,
                              kept: (PathEntries) -> Bool) throws -> Bool {
        var candidates: [String] = []
        try database.query("""
            SELECT path FROM tree INDEXED BY \(index) WHERE \(differs) AND path >= ? AND path < ? AND \(kind) IS NOT NULL
            ORDER BY path LIMIT ?
            """, lower, upper, Self.belowExact + 1) { candidates.append($0.text(0)) }
        if candidates.count > Self.belowExact { return true }
        for candidate in candidates {
            guard let row = try row(candidate), let entries = try entries(of: row) else { continue }
            if kept(entries) { return true }
        }
        return false
    }

    /// The planner's view of one row: its three entries and the saves without an answer (nil for a
    /// path that is no record path, which no tree takes in).
    public func entries(of row: TreeRow) throws -> PathEntries? {
        guard let path = try? RecordPath(validating: row.path) else { return nil }
        var entries = row.planEntries(at: path)
        entries.sent = try sent(row.path)
        return entries
    }

    /// A path whose synced content `node` is gone from disk while the server still holds that very
    /// version there: the source of a rename made here, found by content (the server copies it).
    public func localMoveSource(for node: Node, excluding path: String) throws -> TreeRow? {
        guard !node.isFolder, !node.hash.isEmpty else { return nil }
        var found: TreeRow?
        try database.query("""
            SELECT \(Self.treeColumns) FROM tree INDEXED BY tree_gone WHERE s_hash = ? AND l_kind IS NULL AND s_kind IN (0, 2)
              AND s_kind = ? AND \(Self.remoteSame()) AND path != ? LIMIT 1
            """, node.hash, node.recordKind.code, path) { found = Self.readRow($0) }
        return found
    }

    /// Paths a peer's record renames from `source` and that are not on disk here yet: the local rename
    /// that would take the source there goes before the source's delete.
    public func remoteMovers(from source: String) throws -> [String] {
        var out: [String] = []
        try database.query("""
            SELECT path FROM tree INDEXED BY tree_moved_from WHERE r_moved_from = ? AND r_moved_from IS NOT NULL AND l_kind IS NULL LIMIT 8
            """, source) { out.append($0.text(0)) }
        return out
    }

    /// Whether a record later than `tag` also names `source` as where it came from (of a copy and then
    /// a rename, only the later can be what deleted the source).
    public func hasLaterMover(from source: String, than tag: Int64) throws -> Bool {
        var found = false
        try database.query("""
            SELECT 1 FROM tree INDEXED BY tree_moved_from WHERE r_moved_from = ? AND r_moved_from IS NOT NULL AND r_tag > ? LIMIT 1
            """, source, tag) { _ in found = true }
        return found
    }

    /// Paths whose new local content is `hash` (of `kind`): a rename made here of a path gone from disk
    /// goes before that path's delete, so the server can copy it.
    public func localMovers(hash: String, kind: RecordKind) throws -> [String] {
        guard !hash.isEmpty else { return [] }
        var out: [String] = []
        try database.query("""
            SELECT path FROM tree INDEXED BY tree_new_content WHERE l_hash = ? AND l_kind = ?
              AND l_kind IN (0, 2) AND NOT (\(Self.localSame())) LIMIT 8
            """, hash, kind.code) { out.append($0.text(0)) }
        return out
    }

    /// Paths whose Local and Remote both differ from Synced, each to something live: both sides
    /// changed (for status), at most `limit`.
    public func changedBothWays(limit: Int) throws -> [String] {
        var out: [String] = []
        try database.query("""
            SELECT path FROM tree INDEXED BY tree_local_work WHERE \(Self.localDiffers) AND \(Self.remoteDiffers) ORDER BY path LIMIT ?
            """, limit) { out.append($0.text(0)) }
        return out
    }
}

extension TreeRow {
    /// The planner's entries for this row (without `sent`, which `StateStore.entries(of:)` adds).
    public func planEntries(at path: RecordPath) -> PathEntries {
        PathEntries(path: path,
                           remote: remote.map { RemoteEntry(tag: ChangeTag($0.tag), node: $0.node, modifiedAt: $0.mtime,
                                                            movedFrom: $0.movedFrom.flatMap { try? RecordPath(validating: $0) },
                                                            incomplete: $0.incomplete) },
                           local: local.map { LocalEntry($0.node, modifiedAt: $0.mtime) },
                           synced: synced.map { SyncedEntry(tag: ChangeTag($0.tag), node: $0.node) })
    }
}
