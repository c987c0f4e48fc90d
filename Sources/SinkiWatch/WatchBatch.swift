/// Paths the watcher saw change, ready to be compared with the state database.
public struct WatchBatch: Sendable, Equatable {
    /// A path to look at again.
    public struct Change: Sendable, Hashable {
        public var root: Int
        /// Path below the root; `""` is the root itself.
        public var relative: String
        /// Walk everything below it too (a directory that appeared or moved in).
        public var recursive: Bool

        public init(root: Int, relative: String, recursive: Bool) {
            self.root = root
            self.relative = relative
            self.recursive = recursive
        }
    }

    /// A rename inside one root, paired by its inotify cookie: the content did not change.
    public struct Move: Sendable, Hashable {
        public var root: Int
        public var from: String
        public var to: String
        public var isDirectory: Bool

        public init(root: Int, from: String, to: String, isDirectory: Bool) {
            self.root = root
            self.from = from
            self.to = to
            self.isDirectory = isDirectory
        }
    }

    public var changes: [Change] = []
    /// Renames, in the order they happened; each is also followed by a look at both paths.
    public var moves: [Move] = []
    /// The kernel dropped events: every root must be walked again.
    public var overflow = false
    /// Roots whose top directory was deleted, moved away or unmounted.
    public var rootsGone: Set<Int> = []

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
