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

    public var changes: [Change] = []
    /// The kernel dropped events: every root must be walked again.
    public var overflow = false
    /// Roots whose top directory was deleted, moved away or unmounted.
    public var rootsGone: Set<Int> = []

    public init() {}

    public var isEmpty: Bool { changes.isEmpty && !overflow && rootsGone.isEmpty }
}
