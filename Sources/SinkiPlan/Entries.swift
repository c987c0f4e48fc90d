import SinkiRecord

/// A record's version at the server: its `changeTag`. Zero means "no version": a path the server
/// never held answers a tombstone at tag 0, so absence and tag 0 are the same thing to the planner.
public struct ChangeTag: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let value: Int64

    public init(_ value: Int64) { self.value = value }

    public static let none = ChangeTag(0)

    public static func < (lhs: ChangeTag, rhs: ChangeTag) -> Bool { lhs.value < rhs.value }

    public var description: String { "#\(value)" }
}

/// A file's content identity (`ContentID`: SHA-256, or a manifest's hash); for a symlink, of its target.
public struct ContentHash: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let hex: String

    public init(_ hex: String) { self.hex = hex }

    /// Bytewise, so that every device orders two versions alike (the `newest` rule's last tie-break).
    public static func < (lhs: ContentHash, rhs: ContentHash) -> Bool {
        lhs.hex.utf8.lexicographicallyPrecedes(rhs.hex.utf8)
    }

    public var description: String { hex }
}

/// A file's permission bits as this machine keeps them (within its umask, which every side of a
/// comparison is seen through): part of what a file is, so that a chmod alone is a change to sync.
public struct FileMode: Sendable, Hashable, CustomStringConvertible {
    public let bits: UInt32

    public init(_ bits: UInt32) { self.bits = bits & 0o777 }

    /// A file as a usual umask makes it.
    public static let regular = FileMode(0o644)

    public var description: String { String(bits, radix: 8) }
}

/// A file's extended attributes, as a short digest of the set that syncs (sorted, within the bounds;
/// empty for none): part of what a file is, so that a `setfattr` alone is a change to sync, as a chmod is.
public struct XattrDigest: Sendable, Hashable, CustomStringConvertible {
    public let hex: String

    public init(_ hex: String) { self.hex = hex }

    /// No extended attributes.
    public static let none = XattrDigest("")

    public var description: String { hex.isEmpty ? "no xattrs" : "xattrs \(hex.prefix(8))" }
}

/// What one path holds, as far as syncing goes: two nodes are equal exactly when nothing needs to move.
public enum Node: Sendable, Hashable, CustomStringConvertible {
    case file(ContentHash, FileMode = .regular, XattrDigest = .none)
    case folder
    case symlink(ContentHash)

    public var isFolder: Bool { self == .folder }

    /// Whether two nodes hold the same content and differ at most in their mode and extended attributes
    /// (a chmod or a setfattr alone: what sits beside the bytes, never worth a conflict copy).
    public func sameContent(as other: Node) -> Bool {
        switch (self, other) {
        case let (.file(left, _, _), .file(right, _, _)): return left == right
        default: return self == other
        }
    }

    /// Whether two nodes are of the same kind, whatever their content (a type change is not an edit).
    public func sameKind(as other: Node) -> Bool {
        switch (self, other) {
        case (.file, .file), (.folder, .folder), (.symlink, .symlink): return true
        default: return false
        }
    }

    public var description: String {
        switch self {
        case let .file(hash, mode, xattrs):
            return "file(\(hash)" + (mode == .regular ? "" : ", \(mode)") + (xattrs == .none ? "" : ", \(xattrs)") + ")"
        case .folder: return "folder"
        case let .symlink(hash): return "symlink(\(hash))"
        }
    }
}

/// The Local tree's entry for a path: what the disk held when last observed. No entry: nothing there.
public struct LocalEntry: Sendable, Equatable {
    public var node: Node
    /// Nanoseconds since the Unix epoch: the `newest` rule's first key.
    public var modifiedAt: Int64

    public init(_ node: Node, modifiedAt: Int64 = 0) {
        self.node = node
        self.modifiedAt = modifiedAt
    }
}

/// The Remote tree's entry for a path: the server's record as last read (feed, or a save's answer).
public struct RemoteEntry: Sendable, Equatable {
    public var tag: ChangeTag
    /// nil: a tombstone.
    public var node: Node?
    public var modifiedAt: Int64
    /// The record's `movedFrom`: the writer renamed this content from there.
    public var movedFrom: RecordPath?
    /// What this version replaced, when the server says: the node of the record at the writer's
    /// `baseTag` (for a tombstone, what it deleted). A local version equal to it is what the writer
    /// saw, not an edit against it, even if this agent never recorded agreeing on it (its own save
    /// whose answer was lost, or the same rename made here and by a peer).
    public var replaced: Node?
    /// The server lacks chunks of this version's content (the record's `incomplete`): it cannot be
    /// fetched, and a device holding the content sends it again.
    public var incomplete: Bool

    public init(tag: ChangeTag, node: Node?, modifiedAt: Int64 = 0, movedFrom: RecordPath? = nil, replaced: Node? = nil,
                incomplete: Bool = false) {
        self.tag = tag
        self.node = node
        self.modifiedAt = modifiedAt
        self.movedFrom = movedFrom
        self.replaced = replaced
        self.incomplete = incomplete
    }

    /// What the server says of a path it never held.
    public static let absent = RemoteEntry(tag: .none, node: nil)

    public var isTombstone: Bool { node == nil }
}

/// The Synced tree's entry for a path: the last version both sides agreed on, the merge base.
public struct SyncedEntry: Sendable, Equatable {
    public var tag: ChangeTag
    /// nil: both sides agreed the path is deleted.
    public var node: Node?

    public init(tag: ChangeTag, node: Node?) {
        self.tag = tag
        self.node = node
    }

    /// Never agreed on: the same to the planner as agreeing on "nothing here" at tag 0.
    public static let none = SyncedEntry(tag: .none, node: nil)

    /// The agreement that recording `remote` as shared makes.
    public init(_ remote: RemoteEntry) { self.init(tag: remote.tag, node: remote.node) }
}

/// One path's entry in each of the three trees (nil: no entry).
public struct PathEntries: Sendable, Equatable {
    public var path: RecordPath
    public var remote: RemoteEntry?
    public var local: LocalEntry?
    public var synced: SyncedEntry?
    /// The versions this agent saved at the server and has not recorded an answer to (the executor
    /// notes each before sending; a recorded outcome at the path drops them all, since Remote only
    /// moves forward). Remote holding one is this agent's own save, whose answer a kill or a lost
    /// connection swallowed; a newer send does not make an older one forgotten.
    public var sent: [Node]

    public init(path: RecordPath, remote: RemoteEntry? = nil, local: LocalEntry? = nil, synced: SyncedEntry? = nil, sent: [Node] = []) {
        self.path = path
        self.remote = remote
        self.local = local
        self.synced = synced
        self.sent = sent
    }

    /// The remote entry with absence spelled as the server spells it (a tombstone at tag 0).
    public var remoteOrAbsent: RemoteEntry { remote ?? .absent }
    public var syncedOrNone: SyncedEntry { synced ?? .none }

    /// The merge base: Synced, except where Remote shows more of the shared history than Synced
    /// recorded: this agent's own save (`sent`) is shared, and a version that replaced exactly what
    /// is here saw it.
    public var base: SyncedEntry {
        var base = syncedOrNone
        // Synced already holds this version of the record: it knows better (a file deleted here and
        // put back is a new local version, not the one the delete saw).
        guard let remote, remote.tag != base.tag else { return base }
        if let node = remote.node, sent.contains(node) { base.node = node }
        if let local, let replaced = remote.replaced, replaced == local.node { base.node = replaced }
        return base
    }

    /// Whether the three trees agree on this path: the planner's goal.
    public var isSynced: Bool {
        let remote = remoteOrAbsent, synced = syncedOrNone
        return remote.tag == synced.tag && remote.node == synced.node && local?.node == synced.node
    }
}
