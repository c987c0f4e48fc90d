import SinkiSupport

/// Paths the watcher saw change, ready to be compared with the state database.
public struct WatchBatch: Sendable, Equatable {
    /// A path to look at again.
    public struct Change: Sendable, Hashable {
        /// `relative` empty: the root itself.
        public var path: LocalPath
        /// Walk everything below it too (a directory that appeared or moved in).
        public var recursive: Bool

        public init(_ path: LocalPath, recursive: Bool) {
            self.path = path
            self.recursive = recursive
        }
    }

    /// A rename inside one root, paired by its inotify cookie: the content did not change.
    public struct Move: Sendable, Hashable {
        public var from: LocalPath
        public var to: LocalPath
        public var isDirectory: Bool

        public init(from: LocalPath, to: LocalPath, isDirectory: Bool) {
            precondition(from.root == to.root, "bug: a move from one root into another")
            self.from = from
            self.to = to
            self.isDirectory = isDirectory
        }

        public var root: RootID { from.root }
    }

    public var changes: [Change] = []
    /// Renames, in the order they happened; each is also followed by a look at both paths.
    public var moves: [Move] = []
    /// The kernel dropped events: every root must be walked again.
    public var overflow = false
    /// Roots whose top directory was deleted, moved away or unmounted.
    public var rootsGone: Set<RootID> = []

    public init() {}

    public var isEmpty: Bool { changes.isEmpty && moves.isEmpty && !overflow && rootsGone.isEmpty }

    /// Adds another batch's contents after this one's.
    public mutating func merge(_ other: WatchBatch) {
        changes += other.changes
        moves += other.moves
        overflow = overflow || other.overflow
        rootsGone.formUnion(other.rootsGone)
    }
}
