import SinkiRecord

/// A local version to save at the server.
public struct Upload: Sendable, Equatable {
    public var path: RecordPath
    public var node: Node
    /// The version the edit started from (the record's `baseTag`): the server refuses the save as a
    /// conflict when its record has moved on.
    public var base: ChangeTag
    /// A rename found by content: the server copies the content of the record there.
    public var movedFrom: RecordPath?

    public init(path: RecordPath, node: Node, base: ChangeTag, movedFrom: RecordPath? = nil) {
        self.path = path
        self.node = node
        self.base = base
        self.movedFrom = movedFrom
    }
}

/// A remote version to write onto the disk.
public struct Download: Sendable, Equatable {
    public var path: RecordPath
    public var remote: RemoteEntry
    /// What Local says is at the path: the write happens only if the disk still holds it (nil: nothing).
    public var expecting: Node?

    public init(path: RecordPath, remote: RemoteEntry, expecting: Node?) {
        self.path = path
        self.remote = remote
        self.expecting = expecting
    }
}

/// How a conflict (both sides changed since Synced) is settled by the path's merge rule.
public enum Conflict: Sendable, Equatable {
    /// The local version moves to a conflict copy (a new path, uploaded in its turn); the remote then
    /// takes the path. `keep-both`, and a remote win that keeps the loser.
    case keepLocalAside(RecordPath, expecting: Node)
    /// The remote version is written to a conflict copy and becomes the merge base; the local version
    /// is then uploaded over it. A local win that keeps the loser.
    case keepRemoteAside(RecordPath, remote: RemoteEntry, expecting: Node?)
    /// The remote version replaces the local one, which the rule drops.
    case overwriteLocal(Download)
    /// The local version replaces the remote one, which the rule drops.
    case overwriteRemote(Upload)
    /// Two changed files whose rule reads them: the merge engine decides (`MergeRule.engine`). The
    /// remote version's content must be here first; the local one is read as it is now, and must
    /// still be `expecting`.
    case resolve(RecordPath, remote: RemoteEntry, expecting: Node)
}

/// Why a path waits: another path's operation must come first.
public enum Wait: Sendable, Equatable {
    /// The parent folder is missing (on disk, or at the server): its own plan makes it.
    case parentFirst
    /// A folder is deleted or replaced only once what is below it has gone.
    case childrenFirst
    /// The server lacks chunks of the remote version (removed as damaged): a device that holds the
    /// content sends it again first, and that version comes down.
    case contentFirst
}

/// The next step for one path. Each case says what the executor does and, on success, what it
/// records (docs/planner.md, "Outcomes"); on failure it records nothing and the path is planned again.
public enum Operation: Sendable, Equatable {
    /// The three trees agree.
    case nothing
    /// Another path must move first.
    case wait(Wait)
    /// Both sides already hold the same thing: record the remote entry as Synced, no I/O.
    case advanceSynced(RecordPath, to: RemoteEntry)
    /// Save a local file or symlink at the server.
    case upload(Upload)
    /// Save a folder record at the server (a new folder, or one kept against a remote delete).
    case makeRemoteFolder(RecordPath, base: ChangeTag)
    /// Save a tombstone at the server.
    case sendDelete(RecordPath, base: ChangeTag)
    /// Write a remote file or symlink onto the disk.
    case download(Download)
    /// Make a folder on the disk. `agree` is the remote folder this applies, recorded as Synced; nil
    /// when the folder is made for what must come down below it, and is a local change to send.
    case makeLocalFolder(RecordPath, agree: RemoteEntry?)
    /// Remove a path from the disk if it still holds `expecting` (a folder: if empty). `agree` is the
    /// remote tombstone this applies, recorded as Synced; nil when the delete only makes way for a
    /// remote version of another kind, which comes next.
    case deleteLocal(RecordPath, expecting: Node, agree: RemoteEntry?)
    /// A peer's rename: move the unchanged local source to the path instead of downloading it.
    case renameLocal(from: RecordPath, to: RecordPath, remote: RemoteEntry)
    /// Both sides changed: settled by the merge rule.
    case conflict(Conflict)

    /// Whether the executor has something to do.
    public var isWork: Bool {
        switch self {
        case .nothing, .wait: return false
        default: return true
        }
    }
}
