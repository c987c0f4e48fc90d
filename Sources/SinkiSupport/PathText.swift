/// `/`-separated paths as bytes. Swift's `String` takes a `/` followed by a combining mark or a
/// joiner for one character that is not `/`, and canonically equivalent names for one: splitting,
/// prefixes and comparisons of paths go by bytes here, as the kernel and the server see them.
public enum PathText {
    static let slash = UInt8(ascii: "/")

    /// The components of `path`, split on `/` bytes (empty ones dropped).
    public static func components(_ path: String) -> [String] {
        path.utf8.split(separator: slash).map { String(Substring($0)) }
    }

    /// Whether `path` is `folder` or lies below it, by bytes.
    public static func isWithin(_ path: String, _ folder: String) -> Bool {
        let mine = path.utf8, theirs = folder.utf8
        guard mine.starts(with: theirs) else { return false }
        if mine.count == theirs.count { return true }
        return mine[mine.index(mine.startIndex, offsetBy: theirs.count)] == slash
    }

    /// The part of `path` before its first `/` (the root name of a record path); nil without one.
    public static func firstComponent(_ path: String) -> String? {
        guard let slashIndex = path.utf8.firstIndex(of: slash) else { return nil }
        return String(Substring(path.utf8[..<slashIndex]))
    }

    /// The part of `path` after its first `/`; nil without one.
    public static func afterFirstComponent(_ path: String) -> String? {
        guard let slashIndex = path.utf8.firstIndex(of: slash) else { return nil }
        return String(Substring(path.utf8[path.utf8.index(after: slashIndex)...]))
    }

    /// The part of `path` before its last `/` (the folder a record path is in; empty without one).
    public static func folder(of path: String) -> String {
        guard let slashIndex = path.utf8.lastIndex(of: slash) else { return "" }
        return String(Substring(path.utf8[..<slashIndex]))
    }

    /// Whether two paths are the same bytes.
    public static func same(_ left: String, _ right: String) -> Bool { left.utf8.elementsEqual(right.utf8) }
}
