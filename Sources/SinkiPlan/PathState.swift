import SinkiRecord

/// What the trees hold below a path (all its descendants), as far as the path's own plan depends on
/// it: a folder is deleted only once nothing synced is left in it, and is kept when something below
/// it must stay.
public struct Below: Sendable, Equatable {
    /// Some descendant is on disk (Local has it).
    public var localLive: Bool
    /// Some descendant is on disk and differs from its Synced entry: a local change, which survives a
    /// remote delete of the folder.
    public var localKept: Bool
    /// Some descendant is live on the server (Remote has it, not a tombstone).
    public var remoteLive: Bool
    /// Some descendant is live on the server and differs from its Synced entry: a remote change, which
    /// survives a local delete of the folder.
    public var remoteKept: Bool

    public init(localLive: Bool = false, localKept: Bool = false, remoteLive: Bool = false, remoteKept: Bool = false) {
        self.localLive = localLive
        self.localKept = localKept
        self.remoteLive = remoteLive
        self.remoteKept = remoteKept
    }

    /// Nothing below: a file's, or an empty folder's.
    public static let nothing = Below()

    /// Adds one descendant's entries.
    public mutating func add(_ entries: PathEntries) {
        let synced = entries.base
        if let local = entries.local {
            localLive = true
            if local.node != synced.node { localKept = true }
        }
        if let remote = entries.remote, remote.node != nil {
            remoteLive = true
            if remote.node != synced.node { remoteKept = true }
        }
    }
}

/// The merge rule of a path, as far as the planner models it: which version takes the path when both
/// changed, and whether the other is kept as a conflict copy. The rules that read content (`union`,
/// `json`, `compare`, `command`, `ask`) settle through the merge engine; see docs/planner.md.
public enum MergeRule: Sendable, Equatable {
    /// The remote version takes the path; the local one is kept as a conflict copy (the default).
    case keepBoth
    /// The later `modifiedAt` wins (then the content hash, so every device picks alike).
    case newest(keepLoser: Bool)
    /// The local version wins.
    case local(keepLoser: Bool)
    /// The remote version wins.
    case remote(keepLoser: Bool)
    /// The merge engine decides, reading both files (`union`, `json`, `compare`, `command`, `ask`, and
    /// the rules above with the engine's own tie-breaks): the planner hands two changed files over
    /// (`Conflict.resolve`), and the executor maps the engine's answer onto the four outcomes.
    case engine
}

/// Everything `Planner.plan` looks at for one path: a value, so the planner is a pure function.
public struct PathState: Sendable, Equatable {
    public var entries: PathEntries
    /// The parent's entries; nil when the parent is the root (always there, on both sides).
    public var parent: PathEntries?
    /// A summary of the descendants' entries (`Below.nothing` for a path that is no folder anywhere).
    public var below: Below
    /// The entries at the Remote entry's `movedFrom` path, when it has one: a peer's rename, which is
    /// done here by a local rename when the source is here unchanged.
    public var remoteMoveSource: PathEntries?
    /// A path whose Synced content equals this path's new Local content and that is gone from disk:
    /// a local rename found by content, uploaded as a move (`movedFrom`) so no bytes travel.
    public var localMoveSource: PathEntries?
    public var rule: MergeRule

    public init(entries: PathEntries, parent: PathEntries? = nil, below: Below = .nothing,
                remoteMoveSource: PathEntries? = nil, localMoveSource: PathEntries? = nil, rule: MergeRule = .keepBoth) {
        self.entries = entries
        self.parent = parent
        self.below = below
        self.remoteMoveSource = remoteMoveSource
        self.localMoveSource = localMoveSource
        self.rule = rule
    }

    public var path: RecordPath { entries.path }
}
