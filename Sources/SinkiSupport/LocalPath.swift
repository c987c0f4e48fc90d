/// One synced root of this agent: its position in the configured root list, as a type of its own so
/// that it is never confused with another number. Only the agent's configuration hands them out, and
/// every layer (watcher, replica, agent) is given that one list.
public struct RootID: Hashable, Sendable, Comparable, CustomStringConvertible {
    public let index: Int

    public init(_ index: Int) { self.index = index }

    public static func < (left: RootID, right: RootID) -> Bool { left.index < right.index }

    public var description: String { "root #\(index)" }
}

extension Array {
    /// The entry of a list kept per root, in the order of the configured roots.
    public subscript(_ root: RootID) -> Element {
        get { self[root.index] }
        set { self[root.index] = newValue }
    }
}

/// A path inside one synced root: the root and the `/`-separated path below it (empty: the root itself).
/// Equal and hashed by bytes: the disk keeps canonically equivalent names (NFC, NFD) apart, where
/// Swift's `String` would take them for one.
public struct LocalPath: Hashable, Sendable, CustomStringConvertible {
    public let root: RootID
    public let relative: String

    public init(_ root: RootID, _ relative: String) {
        self.root = root
        self.relative = relative
    }

    /// The entry's name in its folder.
    public var name: String { SafeRoot.name(of: relative) }

    /// The folder's part of the path, with its slash (`a/b/` for `a/b/c`; empty at the top).
    public var folderPrefix: String { SafeRoot.folderPrefix(of: relative) }

    /// A path below this one.
    public func appending(_ name: String) -> LocalPath {
        LocalPath(root, relative.isEmpty ? name : relative + "/" + name)
    }

    /// Whether `self` is `other` or lies below it (compared by bytes).
    public func isWithin(_ other: LocalPath) -> Bool {
        root == other.root && (other.relative.isEmpty || PathText.isWithin(relative, other.relative))
    }

    public static func == (left: LocalPath, right: LocalPath) -> Bool {
        left.root == right.root && left.relative.utf8.elementsEqual(right.relative.utf8)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(root)
        for byte in relative.utf8 { hasher.combine(byte) }
        hasher.combine(relative.utf8.count)
    }

    public var description: String { "\(root):\(relative)" }
}
