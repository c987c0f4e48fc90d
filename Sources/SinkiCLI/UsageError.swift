import SinkiSupport

/// A command line that cannot be run: one line for people, and the exit code (64, or 78 for config).
public struct UsageError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var code: ExitCode
    public init(_ message: String, code: ExitCode = .usage) {
        self.message = message
        self.code = code
    }
    public var description: String { message }
}

/// The known word closest to `word` by edit distance, when it is close enough to be a likely typo.
public func nearest(_ word: String, in candidates: [String]) -> String? {
    func distance(_ a: [Character], _ b: [Character]) -> Int {
        if a.isEmpty { return b.count }
        var previous = Array(0...b.count)
        for (i, x) in a.enumerated() {
            var current = [i + 1]
            for (j, y) in b.enumerated() {
                current.append(min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1)))
            }
            previous = current
        }
        return previous[b.count]
    }
    let target = Array(word)
    let scored = candidates.map { ($0, distance(target, Array($0))) }.min { $0.1 < $1.1 }
    guard let (best, score) = scored, score <= max(2, word.count / 3) else { return nil }
    return best
}
