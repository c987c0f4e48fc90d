
/// Which paths below a root are not synced: `ignore =` patterns from the config and the root's
/// `.sinkiignore` file, in gitignore syntax (`*`, `**`, `?`, `[…]`, leading `/`, trailing `/`,
/// `!` to re-include, `#` comments). The last matching pattern decides; a path inside an ignored
/// directory stays ignored (the directory is never walked), as in git.
public struct IgnoreRules: Sendable, Equatable {
    /// The file at a root's top that holds its shared ignore patterns; it is synced itself.
    public static let fileName = ".sinkiignore"

    /// Editor and office artifacts that only make sense on the machine that made them (swap and
    /// lock files); always ignored unless a pattern re-includes them with `!`.
    public static let builtIn = [".*.swp", ".*.swo", ".*.swx", ".#*", ".~lock.*#", "*.kate-swp"]

    struct Rule: Sendable, Equatable {
        var segments: [String]
        var negated: Bool
        var directoryOnly: Bool
        /// Anchored rules match from the root; others match the last components at any depth.
        var anchored: Bool
        /// Each segment as scalars, converted once: a scan asks every rule about every entry.
        var scalars: [[Unicode.Scalar]] = []
        /// The literal scalars the first segment starts and ends with (before its first and after
        /// its last wildcard): a name without them is rejected without running the matcher.
        var literalPrefix: [Unicode.Scalar] = []
        var literalSuffix: [Unicode.Scalar] = []

        init(segments: [String], negated: Bool, directoryOnly: Bool, anchored: Bool) {
            self.segments = segments
            self.negated = negated
            self.directoryOnly = directoryOnly
            self.anchored = anchored
            scalars = segments.map { Array($0.unicodeScalars) }
            let first = scalars.first ?? []
            let special: Set<Unicode.Scalar> = ["*", "?", "[", "\\"]
            literalPrefix = Array(first.prefix { !special.contains($0) })
            if literalPrefix.count < first.count {
                // `]` stops it too: what precedes it may be the inside of a class.
                literalSuffix = Array(first.reversed().prefix { !special.contains($0) && $0 != "]" }.reversed())
                // An escaped character ends the suffix: `\\*` would otherwise leave a literal `*`.
                if let index = first.lastIndex(of: "\\"), first.count - index - 1 >= literalSuffix.count { literalSuffix = [] }
            }
        }
    }

    var rules: [Rule]

    public init(patterns: [String]) {
        rules = patterns.compactMap(Self.parse)
    }

    /// The built-in rules, then the config's, then the `.sinkiignore` text's lines (later wins).
    public init(config: [String], fileText: String?) {
        var patterns = Self.builtIn + config
        if let fileText { patterns += fileText.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) }
        self.init(patterns: patterns)
    }

    public static let none = IgnoreRules(patterns: [])

    static func parse(_ line: String) -> Rule? {
        var text = Substring(line)
        if text.hasSuffix("\r") { text = text.dropLast() }
        // Trailing spaces are dropped unless escaped with a backslash.
        while text.hasSuffix(" ") && !text.hasSuffix("\\ ") { text = text.dropLast() }
        if text.isEmpty || text.hasPrefix("#") { return nil }
        var negated = false
        if text.hasPrefix("!") {
            negated = true
            text = text.dropFirst()
        } else if text.hasPrefix("\\!") || text.hasPrefix("\\#") {
            text = text.dropFirst()
        }
        var directoryOnly = false
        if text.hasSuffix("/") {
            directoryOnly = true
            text = text.dropLast()
        }
        var anchored = text.dropLast().contains("/") || text.hasPrefix("/")
        if text.hasPrefix("/") { text = text.dropFirst() }
        var segments = text.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        if segments.isEmpty { return nil }
        if segments.first == "**" && segments.count > 1 && !text.dropFirst(3).contains("/") {
            // "**/name" is "name" at any depth.
            segments.removeFirst()
            anchored = false
        }
        return Rule(segments: segments, negated: negated, directoryOnly: directoryOnly, anchored: anchored)
    }

    public var isEmpty: Bool { rules.isEmpty }

    /// Whether `relative` (below the root, `/`-separated) is ignored. Callers ask for a directory
    /// before walking into it, so a path's parents need not be checked here.
    public func isIgnored(_ relative: String, isDirectory: Bool) -> Bool {
        if rules.isEmpty { return false }
        let name = Array(SafeRoot.name(of: relative).unicodeScalars)
        var components: [String]?
        var ignored = false
        for rule in rules where !(rule.directoryOnly && !isDirectory) && ignored != !rule.negated {
            let matched: Bool
            if rule.anchored {
                if components == nil { components = PathText.components(relative) }
                matched = rule.matches(components!)
            } else {
                matched = rule.matchesName(name)
            }
            if matched { ignored = !rule.negated }
        }
        return ignored
    }

    /// Whether a path or any directory above it is ignored (for records that come from peers).
    public func isIgnoredWithParents(_ relative: String, isDirectory: Bool) -> Bool {
        let components = PathText.components(relative)
        for count in 1..<max(1, components.count) where isIgnored(components[0..<count].joined(separator: "/"), isDirectory: true) {
            return true
        }
        return isIgnored(relative, isDirectory: isDirectory)
    }
}

extension IgnoreRules.Rule {
    func matches(_ components: [String]) -> Bool {
        if anchored { return Glob.matchSegments(segments[...], components[...]) }
        // No slash but a trailing one: the pattern names an entry at any depth.
        guard let last = components.last else { return false }
        return matchesName(Array(last.unicodeScalars))
    }

    /// An unanchored rule against the last component of a path.
    func matchesName(_ name: [Unicode.Scalar]) -> Bool {
        guard let pattern = scalars.first else { return false }
        if name.count < literalPrefix.count + literalSuffix.count || !name.starts(with: literalPrefix)
            || !name.reversed().starts(with: literalSuffix.reversed()) { return false }
        return Glob.matchName(pattern[...], name[...])
    }
}

/// gitignore-style glob matching over path components.
enum Glob {
    /// Whether `pattern` segments match all of `path` (`**` spans zero or more components).
    static func matchSegments(_ pattern: ArraySlice<String>, _ path: ArraySlice<String>) -> Bool {
        guard let first = pattern.first else { return path.isEmpty }
        if first == "**" {
            let rest = pattern.dropFirst()
            if rest.isEmpty { return !path.isEmpty }
            var tail = path
            while true {
                if matchSegments(rest, tail) { return true }
                if tail.isEmpty { return false }
                tail = tail.dropFirst()
            }
        }
        guard let component = path.first, matchName(Array(first.unicodeScalars)[...], Array(component.unicodeScalars)[...]) else {
            return false
        }
        return matchSegments(pattern.dropFirst(), path.dropFirst())
    }

    /// `*`, `?`, `[abc]`, `[!a-z]`, `\x` within one component.
    static func matchName(_ pattern: ArraySlice<Unicode.Scalar>, _ name: ArraySlice<Unicode.Scalar>) -> Bool {
        var p = pattern.startIndex, n = name.startIndex
        var starP = -1, starN = -1
        while n < name.endIndex {
            if p < pattern.endIndex {
                let c = pattern[p]
                if c == "*" {
                    starP = p
                    starN = n
                    p += 1
                    continue
                }
                if c == "?" {
                    p += 1
                    n += 1
                    continue
                }
                if c == "[", let (matched, next) = matchClass(pattern, from: p, name[n]) {
                    if matched {
                        p = next
                        n += 1
                        continue
                    }
                } else {
                    var literal = c
                    var next = p + 1
                    if c == "\\" && p + 1 < pattern.endIndex {
                        literal = pattern[p + 1]
                        next = p + 2
                    }
                    if literal == name[n] {
                        p = next
                        n += 1
                        continue
                    }
                }
            }
            if starP >= 0 {
                p = starP + 1
                starN += 1
                n = starN
                continue
            }
            return false
        }
        while p < pattern.endIndex && pattern[p] == "*" { p += 1 }
        return p == pattern.endIndex
    }

    /// Matches `scalar` against the class starting at `start` (`[`); nil when the class is unclosed
    /// (then `[` is a literal).
    static func matchClass(_ pattern: ArraySlice<Unicode.Scalar>, from start: Int, _ scalar: Unicode.Scalar) -> (Bool, Int)? {
        var index = start + 1
        var negated = false
        if index < pattern.endIndex && (pattern[index] == "!" || pattern[index] == "^") {
            negated = true
            index += 1
        }
        var matched = false
        var first = true
        while index < pattern.endIndex {
            let c = pattern[index]
            if c == "]" && !first { return (matched != negated, index + 1) }
            first = false
            if index + 2 < pattern.endIndex && pattern[index + 1] == "-" && pattern[index + 2] != "]" {
                if c.value <= scalar.value && scalar.value <= pattern[index + 2].value { matched = true }
                index += 3
            } else {
                if c == scalar { matched = true }
                index += 1
            }
        }
        return nil
    }
}
