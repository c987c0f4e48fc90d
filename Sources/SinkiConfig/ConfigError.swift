import SinkiSupport

/// A problem with the config file or a command-line override, printed as one line:
/// `FILE:LINE: what is wrong` (or `SOURCE: what is wrong` when no line applies).
public struct ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of problem it is, for callers that react to some kinds (tests, status).
    public enum Code: String, Sendable, Equatable {
        /// The file could not be read, or is not UTF-8 text.
        case unreadable
        /// A line that is neither a section header, a `key = value` nor a comment.
        case syntax
        case unknownSection
        /// A section header whose name or patterns are wrong, or a section that appears twice.
        case badSection
        case unknownKey
        case duplicateKey
        /// A value of the wrong form: size, duration, boolean, number, URL, path, level.
        case badValue
        case unknownRule
        case badGlob
        /// A key that the section needs is missing.
        case missingKey
        /// Two roots with one name or one folder, or one root inside another.
        case badRoot
        /// A command line that cannot be split (unbalanced quote) or is empty.
        case badCommand
        case commandNotFound
    }

    public var code: Code
    /// What is wrong, without the location.
    public var message: String
    /// The file as given (or a flag such as `--root` for a command-line problem).
    public var source: String
    /// 1-based line in `source`; nil when the problem is not on one line.
    public var line: Int?

    public init(_ code: Code, _ message: String, source: String, line: Int?) {
        self.code = code
        self.message = message
        self.source = source
        self.line = line
    }

    public var description: String {
        if let line { return "\(source):\(line): \(message)" }
        return "\(source): \(message)"
    }

    /// Whether the problem came from a command-line flag rather than the file.
    public var isCommandLine: Bool { source.hasPrefix("--") }

    /// The process exit code: 64 for a bad flag, 78 for a bad config file (design §1).
    public var exitCode: ExitCode { isCommandLine ? .usage : .config }
}

/// `; did you mean X?` with the candidate nearest to `word`, or an empty string when none is near;
/// `format` writes the candidate (quoted by default).
func didYouMean(_ word: String, among candidates: [String], format: (String) -> String = { "\"\($0)\"" }) -> String {
    guard let near = nearest(to: word, among: candidates) else { return "" }
    return "; did you mean \(format(near))?"
}

/// The candidate nearest to `word` if it is close enough to be a likely typo: the same but for case,
/// or at most a third of the longer word's length in edits (never more than 3).
func nearest(to word: String, among candidates: [String]) -> String? {
    if let sameButCase = candidates.first(where: { $0.lowercased() == word.lowercased() }) { return sameButCase }
    var best: (String, Int)?
    for candidate in candidates {
        let distance = editDistance(word, candidate)
        if best == nil || distance < best!.1 { best = (candidate, distance) }
    }
    guard let (candidate, distance) = best else { return nil }
    let limit = min(3, max(1, max(word.count, candidate.count) / 3))
    return distance <= limit ? candidate : nil
}

/// Edit distance with adjacent transpositions counted as one edit (optimal string alignment).
func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a.unicodeScalars), b = Array(b.unicodeScalars)
    if a.isEmpty { return b.count }
    if b.isEmpty { return a.count }
    var table = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
    for i in 0...a.count { table[i][0] = i }
    for j in 0...b.count { table[0][j] = j }
    for i in 1...a.count {
        for j in 1...b.count {
            let cost = a[i - 1] == b[j - 1] ? 0 : 1
            var value = min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + cost)
            if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                value = min(value, table[i - 2][j - 2] + 1)
            }
            table[i][j] = value
        }
    }
    return table[a.count][b.count]
}
