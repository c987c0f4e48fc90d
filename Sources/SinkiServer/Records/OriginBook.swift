import SinkiRecord
import Synchronization

/// Which agent run saved each recent record (`Sinki-Origin`), so that the feed that run reads passes
/// over its own saves: it learnt each from the save's answer, and reading them back cost it a parse and
/// a look-up per record (issue 22, item 4). Kept in memory only, and only the latest saves: the writer
/// reads past its own within milliseconds, and a record the book no longer knows (a restart, another
/// server on the same store, an old save) is simply sent, which is always correct.
final class OriginBook: Sendable {
    private struct Key: Hashable {
        let user: String
        let tag: Int64
    }

    private struct Book {
        var origins: [Key: SaveOrigin] = [:]
        /// The keys in the order noted, for letting the oldest go; `head` is the oldest still held.
        var order: [Key] = []
        var head = 0
    }

    /// Saves remembered, across users.
    let capacity: Int
    private let book = Mutex(Book())

    init(capacity: Int = 1 << 16) { self.capacity = capacity }

    /// `origin` saved these change tags of `user`'s records.
    func note(user: String, tags: [Int64], origin: SaveOrigin) {
        guard !tags.isEmpty else { return }
        book.withLock { book in
            for tag in tags {
                let key = Key(user: user, tag: tag)
                book.origins[key] = origin
                book.order.append(key)
            }
            while book.order.count - book.head > capacity {
                book.origins[book.order[book.head]] = nil
                book.head += 1
            }
            // The let-go front is dropped now and then, not per save.
            if book.head >= capacity {
                book.order.removeFirst(book.head)
                book.head = 0
            }
        }
    }

    /// How many of `records` (of `user`) `origin` saved, and the rest in order. Conflict records are
    /// never left out: every device, their writer too, learns of an `ask` conflict from the feed.
    func leavingOut(_ records: [Record], user: String, origin: SaveOrigin) -> (rest: [Record], omitted: Int) {
        book.withLock { book in
            guard !book.origins.isEmpty else { return (records, 0) }
            let rest = records.filter {
                book.origins[Key(user: user, tag: $0.changeTag)] != origin || SharedConflict.isReserved($0.path)
            }
            return (rest, records.count - rest.count)
        }
    }
}
