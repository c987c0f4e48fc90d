/// A glob pattern for file paths: `*` and `?` stay within one path component, `**` crosses `/`
/// (and `**/` also matches no folder at all), `[abc]`, `[a-z]`, `[!a-z]` (or `[^a-z]`) are classes,
/// and a backslash makes the next character literal.
///
/// Against a record's path below its root (`matches(relativePath:)`), a pattern without `/` matches the
/// file name at any depth (`*.json`), and a pattern with `/` matches the whole relative path
/// (`saves/*.dat`); a leading `/` only anchors (`/*.json` is a top-level file).
public struct Glob: Sendable, Hashable, CustomStringConvertible {
    /// The pattern as written.
    public let pattern: String
    /// True when the pattern holds no `/` and so applies to the last path component.
    public let matchesName: Bool
    private let tokens: [Token]

    /// One matching step.
    private enum Token: Sendable {
        case literal(Unicode.Scalar)
        /// `?`: one character other than `/`.
        case one
        /// `*`: any run of characters other than `/`.
        case star
        /// `**`: any run of characters, `/` included.
        case globstar
        /// `**/`: nothing, or any run of whole folders with their `/`.
        case folders
        case set([ClosedRange<Unicode.Scalar>], negated: Bool)
    }

    public init(_ pattern: String) throws(ValueError) {
        self.pattern = pattern
        var scalars = Array(pattern.unicodeScalars)
        guard !scalars.isEmpty else { throw ValueError("empty pattern") }
        let anchored = scalars.first == "/"
        if anchored { scalars.removeFirst() }
        guard !scalars.isEmpty else { throw ValueError("\"/\" alone matches no file") }
        if scalars.last == "/" { throw ValueError("ends with /, but a pattern names files; write DIR/** for what is inside a folder") }
        matchesName = !anchored && !scalars.contains("/")
        tokens = try Glob.compile(scalars)
    }

    public var description: String { pattern }

    public static func == (lhs: Glob, rhs: Glob) -> Bool { lhs.pattern == rhs.pattern }
    public func hash(into hasher: inout Hasher) { hasher.combine(pattern) }

    /// Whether a path below a root (`dir/file.txt`, no leading `/`) matches: its file name for a
    /// pattern without `/`, else the whole path.
    public func matches(relativePath: String) -> Bool {
        if matchesName {
            let name = relativePath.split(separator: "/", omittingEmptySubsequences: false).last.map(String.init) ?? relativePath
            return matches(whole: name)
        }
        return matches(whole: relativePath)
    }

    /// Whether the whole of `text` matches the pattern (leading `/` of the pattern removed), with no
    /// special treatment of file names.
    public func matches(whole text: String) -> Bool {
        let text = Array(text.unicodeScalars)
        // memo[t * (n + 1) + i]: 0 unknown, 1 no, 2 yes; keeps `**` and `*` runs from going exponential.
        var memo = [UInt8](repeating: 0, count: (tokens.count + 1) * (text.count + 1))
        return match(0, 0, text, &memo)
    }

    private func match(_ t: Int, _ i: Int, _ text: [Unicode.Scalar], _ memo: inout [UInt8]) -> Bool {
        let key = t * (text.count + 1) + i
        if memo[key] != 0 { return memo[key] == 2 }
        let result = step(t, i, text, &memo)
        memo[key] = result ? 2 : 1
        return result
    }

    /// Steps through fixed-width tokens in a loop and recurses only at wildcards, so the depth is
    /// bounded by the pattern's wildcards, not by the path's length.
    private func step(_ t: Int, _ i: Int, _ text: [Unicode.Scalar], _ memo: inout [UInt8]) -> Bool {
        var t = t, i = i
        while t < tokens.count {
            switch tokens[t] {
            case let .literal(scalar):
                guard i < text.count, text[i] == scalar else { return false }
            case .one:
                guard i < text.count, text[i] != "/" else { return false }
            case let .set(ranges, negated):
                guard i < text.count, text[i] != "/", ranges.contains(where: { $0.contains(text[i]) }) != negated else { return false }
            case .star:
                var j = i
                while true {
                    if match(t + 1, j, text, &memo) { return true }
                    guard j < text.count, text[j] != "/" else { return false }
                    j += 1
                }
            case .globstar:
                for j in i...text.count where match(t + 1, j, text, &memo) { return true }
                return false
            case .folders:
                if match(t + 1, i, text, &memo) { return true }
                for j in i..<text.count where j > i && text[j] == "/" {
                    if match(t + 1, j + 1, text, &memo) { return true }
                }
                return false
            }
            t += 1
            i += 1
        }
        return i == text.count
    }

    private static func compile(_ scalars: [Unicode.Scalar]) throws(ValueError) -> [Token] {
        var tokens: [Token] = []
        var index = 0
        while index < scalars.count {
            let scalar = scalars[index]
            switch scalar {
            case "*":
                var end = index
                while end < scalars.count, scalars[end] == "*" { end += 1 }
                if end - index == 1 {
                    tokens.append(.star)
                } else if (index == 0 || scalars[index - 1] == "/") && end < scalars.count && scalars[end] == "/" {
                    tokens.append(.folders)
                    end += 1
                } else {
                    tokens.append(.globstar)
                }
                index = end
            case "?":
                tokens.append(.one)
                index += 1
            case "[":
                tokens.append(try compileSet(scalars, &index))
            case "\\":
                guard index + 1 < scalars.count else { throw ValueError("lone backslash at the end") }
                tokens.append(.literal(scalars[index + 1]))
                index += 2
            case "/":
                if index + 1 < scalars.count, scalars[index + 1] == "/" { throw ValueError("empty folder name (//)") }
                tokens.append(.literal(scalar))
                index += 1
            default:
                tokens.append(.literal(scalar))
                index += 1
            }
        }
        return tokens
    }

    /// `[…]` starting at `index`; a `]` right after `[` or `[!` is a member, not the end.
    private static func compileSet(_ scalars: [Unicode.Scalar], _ index: inout Int) throws(ValueError) -> Token {
        var cursor = index + 1
        let negated = cursor < scalars.count && (scalars[cursor] == "!" || scalars[cursor] == "^")
        if negated { cursor += 1 }
        var ranges: [ClosedRange<Unicode.Scalar>] = []
        var first = true
        func member() throws(ValueError) -> Unicode.Scalar {
            guard cursor < scalars.count else { throw ValueError("unterminated [") }
            var scalar = scalars[cursor]
            if scalar == "\\" {
                cursor += 1
                guard cursor < scalars.count else { throw ValueError("unterminated [") }
                scalar = scalars[cursor]
            }
            cursor += 1
            return scalar
        }
        while true {
            guard cursor < scalars.count else { throw ValueError("unterminated [") }
            if scalars[cursor] == "]", !first { break }
            first = false
            let low = try member()
            if low == "/" { throw ValueError("/ inside [ ], which never matches") }
            if cursor + 1 < scalars.count, scalars[cursor] == "-", scalars[cursor + 1] != "]" {
                cursor += 1
                let high = try member()
                guard low <= high else { throw ValueError("reversed range \(low)-\(high)") }
                ranges.append(low...high)
            } else {
                ranges.append(low...low)
            }
        }
        index = cursor + 1
        return .set(ranges, negated: negated)
    }
}
