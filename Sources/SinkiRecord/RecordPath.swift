/// Why a record path was refused.
public enum PathError: Error, Sendable, Equatable, CustomStringConvertible {
    case empty
    case absolute(String)
    case dotComponent(String)
    case emptyComponent(String)
    case forbiddenCharacter(String, String)
    case noRelativePart(String)
    case tooLong(String)

    public var description: String {
        switch self {
        case .empty: return "empty path"
        case let .absolute(path): return "path \(quoted(path)) is absolute"
        case let .dotComponent(path): return "path \(quoted(path)) has a '.' or '..' component"
        case let .emptyComponent(path): return "path \(quoted(path)) has an empty component"
        case let .forbiddenCharacter(path, what): return "path \(quoted(path)) contains \(what)"
        case let .noRelativePart(path): return "path \(quoted(path)) names a root, not a file in it"
        case let .tooLong(path): return "path \(quoted(path)) is too long"
        }
    }
}

/// Quotes a path for a log line so that spaces, control characters and odd bytes stay visible.
public func quoted(_ text: String) -> String {
    var out = "\""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\0": out += "\\0"
        default:
            if scalar.value < 0x20 || scalar.value == 0x7F {
                out += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
    }
    return out + "\""
}

/// A record path that passed the safety floor: `root/relative/path`, `/`-separated, no `.` or `..`
/// components, no NUL or backslash, never absolute. Every path from a peer is checked here before
/// anything touches the disk.
public struct RecordPath: Sendable, Hashable, CustomStringConvertible, Comparable {
    public let string: String

    /// Longest path accepted, in bytes (Linux's PATH_MAX).
    public static let maxBytes = 4096
    /// Longest component accepted, in bytes (Linux's NAME_MAX).
    public static let maxComponentBytes = 255

    public init(validating path: String) throws(PathError) {
        if path.isEmpty { throw .empty }
        if path.utf8.count > Self.maxBytes { throw .tooLong(path) }
        if path.utf8.first == UInt8(ascii: "/") { throw .absolute(path) }
        var components = 0
        for component in path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
            if component.isEmpty { throw .emptyComponent(path) }
            if component.count > Self.maxComponentBytes { throw .tooLong(path) }
            if component.elementsEqual(".".utf8) || component.elementsEqual("..".utf8) { throw .dotComponent(path) }
            components += 1
        }
        for byte in path.utf8 {
            if byte == 0 { throw .forbiddenCharacter(path, "a NUL byte") }
            if byte == UInt8(ascii: "\\") { throw .forbiddenCharacter(path, "a backslash") }
        }
        if components < 2 { throw .noRelativePart(path) }
        string = path
    }

    /// Joins a root name and a relative path (both already `/`-separated).
    public init(root: String, relative: String) throws(PathError) {
        try self.init(validating: root + "/" + relative)
    }

    // Everything below works on the UTF-8 bytes, as validation and the kernel do. `String`'s own
    // `firstIndex(of: "/")`, `split(separator: "/")` and `hasPrefix` see Characters: a `/` followed by a
    // combining mark or a joiner (`SaveGames/\u{301}x`) is one Character that is not "/", so they would
    // miss the separator the kernel walks, and `==` would take `café` written two ways for one name.

    private static let slash = UInt8(ascii: "/")

    /// The first and last `/`: validation guarantees at least one.
    private var firstSlash: String.Index { string.utf8.firstIndex(of: Self.slash)! }
    private var lastSlash: String.Index { string.utf8.lastIndex(of: Self.slash)! }

    /// The root name: the first component.
    public var root: String { String(string.utf8[..<firstSlash])! }

    /// The path below the root.
    public var relative: String { String(string.utf8[string.utf8.index(after: firstSlash)...])! }

    /// The components below the root.
    public var relativeComponents: [Substring] {
        string.utf8[string.utf8.index(after: firstSlash)...].split(separator: Self.slash).map { Substring($0) }
    }

    /// The last component.
    public var name: String { String(string.utf8[string.utf8.index(after: lastSlash)...])! }

    /// The parent path, nil when the parent is the root itself.
    public var parent: RecordPath? {
        let cut = string.utf8[..<lastSlash]
        guard cut.contains(Self.slash) else { return nil }
        return try? RecordPath(validating: String(cut)!)
    }

    /// Number of components below the root.
    public var depth: Int { string.utf8.reduce(0) { $1 == Self.slash ? $0 + 1 : $0 } }

    /// Whether `self` is `other` or lies below it.
    public func isWithin(_ other: RecordPath) -> Bool {
        let mine = string.utf8, theirs = other.string.utf8
        guard mine.starts(with: theirs) else { return false }
        let rest = mine.dropFirst(theirs.count)
        return rest.isEmpty || rest.first == Self.slash
    }

    public var description: String { string }

    /// Byte for byte: two names the kernel keeps apart are two paths.
    public static func == (lhs: RecordPath, rhs: RecordPath) -> Bool { lhs.string.utf8.elementsEqual(rhs.string.utf8) }

    public func hash(into hasher: inout Hasher) {
        for byte in string.utf8 { hasher.combine(byte) }
        hasher.combine(string.utf8.count)
    }

    /// Bytewise UTF-8 order, the server's order of look-ups (docs/protocol.md).
    public static func < (lhs: RecordPath, rhs: RecordPath) -> Bool {
        lhs.string.utf8.lexicographicallyPrecedes(rhs.string.utf8)
    }
}
