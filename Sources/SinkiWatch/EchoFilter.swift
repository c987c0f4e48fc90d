import Glibc
import SinkiSupport
import Synchronization

/// The events the agent's own writes will cause, so the watcher can drop them instead of making the
/// replica look at every file it just wrote.
///
/// The replica says what it is about to do (rename a file into place, make or remove a directory,
/// remove a file); the watcher drops exactly one matching event per expectation. Any other event for
/// the same path (a local edit) is still reported, and an expectation whose event never comes expires.
///
/// An expectation belongs to the watch of the directory the write happens in, and only an event from
/// that watch matches it: a write into a folder not watched yet (one a program made a moment ago)
/// expects nothing, for its event will never come, and an expectation left waiting could otherwise
/// swallow a program's own rename onto that path seconds later (the fault suite once lost a file so).
public final class EchoFilter: Sendable {
    public typealias Kind = WriteEcho

    private struct Key: Hashable {
        var path: LocalPath
        var kind: Kind
        var watch: Int32
    }

    private let pending = Mutex<[Key: (count: Int, since: Int64)]>([:])
    /// Expectations older than this are dropped: their event was lost or never came.
    public static let lifetime: Int64 = 10_000_000_000

    public init() {}

    /// Expects one event of `kind` at `path`, from the watch `watch` of its directory.
    public func expect(_ path: LocalPath, _ kind: Kind, watch: Int32) {
        let now = Clock.monotonic()
        pending.withLock { table in
            let key = Key(path: path, kind: kind, watch: watch)
            let count = table[key]?.count ?? 0
            table[key] = (count + 1, now)
            if table.count > 100_000 { table = table.filter { now - $0.value.since < Self.lifetime } }
        }
    }

    /// Withdraws an expectation whose write did not happen.
    public func cancel(_ path: LocalPath, _ kind: Kind, watch: Int32) {
        pending.withLock { table in
            let key = Key(path: path, kind: kind, watch: watch)
            guard let entry = table[key] else { return }
            if entry.count > 1 { table[key] = (entry.count - 1, entry.since) } else { table[key] = nil }
        }
    }

    /// Whether `event` is the echo of an expected write; consumes the expectation if so.
    public func consume(_ event: InotifyEvent, at path: LocalPath) -> Bool {
        let kind: Kind
        if event.has(IN_MOVED_FROM) {
            kind = .movedAway
        } else if event.isDirectory {
            if event.has(IN_CREATE) || event.has(IN_MOVED_TO) { kind = .directoryMade } else if event.has(IN_DELETE) { kind = .directoryGone } else { return false }
        } else if Self.isAnonymousName(Substring(path.name)) && (event.has(IN_MODIFY) || event.has(IN_CLOSE_WRITE)) {
            // Every write to the anonymous file reports; the expectation goes with its close.
            kind = .anonymous
            if !event.has(IN_CLOSE_WRITE) {
                return pending.withLock { $0[Key(path: path, kind: kind, watch: event.watch)] != nil }
            }
        } else {
            if event.has(IN_MOVED_TO) || event.has(IN_CREATE) { kind = .fileIn } else if event.has(IN_DELETE) { kind = .fileGone } else { return false }
        }
        let key = Key(path: path, kind: kind, watch: event.watch)
        let now = Clock.monotonic()
        return pending.withLock { table in
            guard let entry = table[key] else { return false }
            if entry.count > 1 { table[key] = (entry.count - 1, entry.since) } else { table[key] = nil }
            return now - entry.since < Self.lifetime
        }
    }

    public var count: Int { pending.withLock { $0.count } }

    /// `#` and digits: how the kernel names an O_TMPFILE inode in inotify events.
    static func isAnonymousName(_ name: Substring) -> Bool {
        name.count > 1 && name.first == "#" && name.dropFirst().allSatisfy(\.isNumber)
    }
}
