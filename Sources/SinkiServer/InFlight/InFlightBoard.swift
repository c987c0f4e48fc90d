import SinkiRecord
import SinkiSupport
import Synchronization

/// The large files each user's devices are sending now, as their senders announce them chunk batch by
/// chunk batch (`POST /v1/inflight`), so that the user's other devices fetch those chunks while the
/// rest is still on its way (docs/protocol.md, "Files in flight"). Kept in memory only: it is a hint,
/// and losing it (a restart, another server on the same store) costs only the head start; the record,
/// when it is saved, is the truth.
///
/// Each user's board has a position that moves with every announcement and every end; the change feed
/// gives a reader what moved after the position it holds.
final class InFlightBoard: Sendable {
    /// Bounds on what one user can make the server hold.
    struct Limits: Sendable {
        var filesPerUser = 64
        var chunksPerFile = 1 << 17
        /// Ended sessions remembered for readers that have not caught up (older ones: nothing to tell).
        var endedPerUser = 256
        /// An entry not announced to for this long is given up.
        var idleNanoseconds: Int64 = 600 * 1_000_000_000
    }

    private struct Entry {
        var session: String
        var device: String
        var size: Int64
        var chunks: [ChunkRef]
        /// (board position, first chunk index) of each announcement, oldest first.
        var marks: [(position: Int64, index: Int)]
        var touched: Int64
    }

    private struct UserBoard {
        var position: Int64 = 0
        var entries: [String: Entry] = [:]
        var ended: [(position: Int64, session: String, path: String, abandoned: Bool)] = []
    }

    let limits: Limits
    private let boards = Mutex<[String: UserBoard]>([:])

    init(limits: Limits = Limits()) { self.limits = limits }

    /// Records an announcement by `device`; throws a problem to answer when it cannot be taken.
    func announce(user: String, device: String, _ announcement: InFlightAnnouncement, now: Int64 = Clock.monotonic()) throws(Problem) {
        let limits = self.limits
        try boards.withLock { boards throws(Problem) in
            var board = boards[user] ?? UserBoard()
            Self.expire(&board, now: now, limits: limits)
            let path = announcement.path
            var entry: Entry
            if let current = board.entries[path], current.session == announcement.session {
                entry = current
            } else {
                guard announcement.index == 0 else {
                    throw Problem(.inflightGap, detail: "session \(announcement.session) of \(quoted(path)) is not known here; announce from index 0",
                                  field: "index")
                }
                if board.entries[path] == nil && board.entries.count >= limits.filesPerUser {
                    throw Problem(.tooLarge, detail: "at most \(limits.filesPerUser) files in flight at once", field: "path")
                }
                if let replaced = board.entries[path] { Self.end(&board, path: path, session: replaced.session, abandoned: true) }
                entry = Entry(session: announcement.session, device: device, size: announcement.size, chunks: [], marks: [], touched: now)
            }
            guard announcement.index <= entry.chunks.count else {
                throw Problem(.inflightGap, detail: "chunk \(announcement.index) of session \(announcement.session) follows \(entry.chunks.count) announced; "
                              + "announce from index 0", field: "index")
            }
            let fresh = announcement.chunks.dropFirst(entry.chunks.count - announcement.index)
            guard entry.chunks.count + fresh.count <= limits.chunksPerFile else {
                throw Problem(.tooLarge, detail: "a file in flight holds at most \(limits.chunksPerFile) chunks", field: "chunks")
            }
            entry.touched = now
            if !fresh.isEmpty || board.entries[path]?.session != entry.session {
                board.position += 1
                entry.marks.append((board.position, entry.chunks.count))
                entry.chunks += fresh
            }
            board.entries[path] = entry
            boards[user] = board
        }
    }

    /// The file at `path` is saved (its record says what it is now): its session, if any, ends.
    /// Returns whether one did.
    @discardableResult
    func end(user: String, path: String) -> Bool {
        boards.withLock { boards in
            guard var board = boards[user], let entry = board.entries[path] else { return false }
            Self.end(&board, path: path, session: entry.session, abandoned: false)
            boards[user] = board
            return true
        }
    }

    /// The sender gave session `session` at `path` up: it ends (a newer session there stays). Returns
    /// whether it did.
    @discardableResult
    func giveUp(user: String, path: String, session: String) -> Bool {
        boards.withLock { boards in
            guard var board = boards[user], board.entries[path]?.session == session else { return false }
            Self.end(&board, path: path, session: session, abandoned: true)
            boards[user] = board
            return true
        }
    }

    /// What moved on `user`'s board after `after`, as `reader` (a device, within a token's prefix) may
    /// see it: nil when nothing did. Its own announcements are not news to a device.
    func news(user: String, after: Int64, reader device: String, within prefix: String?, now: Int64 = Clock.monotonic()) -> InFlightNews? {
        let limits = self.limits
        return boards.withLock { boards -> InFlightNews? in
            guard var board = boards[user] else { return after > 0 ? InFlightNews(position: 0) : nil }
            Self.expire(&board, now: now, limits: limits)
            boards[user] = board
            // A position from before a restart (or another server) is ahead of this board: everything is news.
            let since = after > board.position ? 0 : after
            var news = InFlightNews(position: board.position)
            func visible(_ path: String) -> Bool { prefix.map { PathText.isWithin(path, $0) } ?? true }
            for (path, entry) in board.entries where entry.device != device && visible(path) {
                guard let first = entry.marks.first(where: { $0.position > since }) else { continue }
                news.files.append(InFlightNews.File(path: path, session: entry.session, device: entry.device, size: entry.size,
                                                    index: first.index, chunks: Array(entry.chunks[first.index...])))
            }
            let ended = board.ended.filter { $0.position > since && visible($0.path) }
            news.ended = ended.filter { !$0.abandoned }.map(\.session)
            news.abandoned = ended.filter(\.abandoned).map(\.session)
            news.files.sort { $0.path.utf8.lexicographicallyPrecedes($1.path.utf8) }
            return news.isEmpty && since == after ? nil : news
        }
    }

    private static func end(_ board: inout UserBoard, path: String, session: String, abandoned: Bool) {
        board.entries[path] = nil
        board.position += 1
        board.ended.append((board.position, session, path, abandoned))
    }

    /// Gives up entries not announced to for `idleNanoseconds`, and forgets the oldest ended sessions.
    private static func expire(_ board: inout UserBoard, now: Int64, limits: Limits) {
        for (path, entry) in board.entries where now - entry.touched > limits.idleNanoseconds {
            end(&board, path: path, session: entry.session, abandoned: true)
        }
        if board.ended.count > limits.endedPerUser { board.ended.removeFirst(board.ended.count - limits.endedPerUser) }
    }
}
