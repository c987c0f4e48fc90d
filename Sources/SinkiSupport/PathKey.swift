/// A path as a key, equal to another only byte for byte. Swift's String compares by canonical
/// equivalence, so an NFC and an NFD spelling of one name, two files on Linux, would be one key.
public struct PathKey: Hashable, Sendable, CustomStringConvertible {
    public let string: String

    public init(_ string: String) { self.string = string }

    public static func == (left: PathKey, right: PathKey) -> Bool { left.string.utf8.elementsEqual(right.string.utf8) }

    public func hash(into hasher: inout Hasher) {
        for byte in string.utf8 { hasher.combine(byte) }
    }

    public var description: String { string }
}

/// A set of paths compared byte for byte (see `PathKey`).
public struct PathSet: Sendable, Sequence {
    private var keys = Set<PathKey>()

    public init() {}

    public var count: Int { keys.count }
    public var isEmpty: Bool { keys.isEmpty }
    public func contains(_ path: String) -> Bool { keys.contains(PathKey(path)) }

    @discardableResult
    public mutating func insert(_ path: String) -> (inserted: Bool, memberAfterInsert: String) {
        let (inserted, member) = keys.insert(PathKey(path))
        return (inserted, member.string)
    }

    @discardableResult
    public mutating func remove(_ path: String) -> String? { keys.remove(PathKey(path))?.string }

    public func makeIterator() -> some IteratorProtocol<String> { keys.lazy.map(\.string).makeIterator() }
}
