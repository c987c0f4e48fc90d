import SinkiSupport

/// Which way an operation that failed was going.
public enum FailureDirection: String, Sendable {
    /// A remote change that could not be written here.
    case down
    /// A local change the server refused.
    case up
}

/// A path whose last operation failed: the trees are as they were, so it is planned again, after a
/// backoff that grows with each failure (`RetryDelay`), or at once when the cause may have gone (a
/// local event in its root, `sinkid retry`, a new version either way). An observation, not work: it
/// says only when to look again, and is kept in memory (a restart looks again at once).
public struct FailedPath: Sendable, Equatable {
    public var path: String
    public var direction: FailureDirection
    public var failure: ApplyFailure
    public var attempts: Int
    /// When it first failed (nanoseconds since the epoch).
    public var since: Int64
    /// When it is planned again on its own (nanoseconds since the epoch).
    public var nextAttempt: Int64
    /// The versions it failed on: another version on either side is planned at once.
    var remoteTag: Int64
    var localHash: String
}

/// The failed paths, by path.
struct FailureBook {
    private(set) var entries: [PathKey: FailedPath] = [:]
    /// A refusal by the server waits this long, or for `sinkid retry`, or for a new local version.
    static let refusalDelay: Int64 = 24 * 3600 * 1_000_000_000

    mutating func fail(_ path: String, _ direction: FailureDirection, _ failure: ApplyFailure, row: TreeRow?, now: Int64 = Clock.now()) {
        let remoteTag = row?.remote?.tag ?? 0, localHash = row?.local?.hash ?? ""
        var entry = entries[PathKey(path)]
            ?? FailedPath(path: path, direction: direction, failure: failure, attempts: 0, since: now, nextAttempt: now, remoteTag: remoteTag,
                          localHash: localHash)
        let sameVersions = entry.remoteTag == remoteTag && entry.localHash == localHash
        entry.attempts = sameVersions ? entry.attempts + 1 : 1
        entry.direction = direction
        entry.failure = failure
        entry.remoteTag = remoteTag
        entry.localHash = localHash
        let delay = direction == .up && failure.cause == .invalid ? Self.refusalDelay : RetryDelay.after(attempts: entry.attempts, cause: failure.cause)
        entry.nextAttempt = now + delay
        entries[PathKey(path)] = entry
    }

    /// Whether `row` waits out its failure's backoff now (a new version on either side does not).
    func holds(_ row: TreeRow, now: Int64 = Clock.now()) -> Bool {
        guard let entry = entries[PathKey(row.path)], entry.nextAttempt > now else { return false }
        return entry.remoteTag == (row.remote?.tag ?? 0) && entry.localHash == (row.local?.hash ?? "")
    }

    mutating func succeeded(_ path: String) { entries[PathKey(path)] = nil }

    /// Makes the failures at or below `path` (all when nil) due now; returns their paths.
    @discardableResult
    mutating func makeDue(under path: String?, direction: FailureDirection? = nil, now: Int64 = Clock.now()) -> [String] {
        var out: [String] = []
        for (key, entry) in entries where (path.map { PathText.isWithin(key.string, $0) } ?? true) && (direction == nil || entry.direction == direction) {
            entries[key]?.nextAttempt = now
            out.append(key.string)
        }
        return out.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    /// Forgets the failures whose path `differs` no longer: settled another way (the file went away
    /// here, another version came and was applied), so nothing is left to retry or to report.
    mutating func forgetSettled(differs: (String) throws -> Bool) rethrows {
        for (key, entry) in entries where try !differs(entry.path) { entries[key] = nil }
    }

    var isEmpty: Bool { entries.isEmpty }

    /// When the soonest failure is due, if one waits.
    var nextDue: Int64? { entries.values.map(\.nextAttempt).min() }

    func listed(_ direction: FailureDirection) -> [FailedPath] {
        entries.values.filter { $0.direction == direction }.sorted { $0.path.utf8.lexicographicallyPrecedes($1.path.utf8) }
    }

    func count(_ direction: FailureDirection, under root: String? = nil) -> Int {
        entries.values.count { entry in entry.direction == direction && (root.map { PathText.isWithin(entry.path, $0) } ?? true) }
    }
}
