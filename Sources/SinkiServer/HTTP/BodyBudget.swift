import Synchronization

/// The bytes of request bodies held in memory at once, for the whole server: each buffered body
/// (a modify batch, a mint) takes its share when its length is known and gives it back when its
/// request ends, so that many large bodies at once answer `503` with `Retry-After` instead of
/// taking the server's memory (issue 24 item 4: twelve 250 MB bodies took it to 2.85 GB). Streamed
/// bodies (tus) go to disk and take none.
final class BodyBudget: Sendable {
    let limit: Int
    private let used = Mutex(0)

    init(limit: Int) { self.limit = limit }

    /// Takes `bytes` if they fit beside what is held; false (nothing taken) when they do not. One
    /// body alone always fits, whatever its size under the route's own limit: the budget bounds how
    /// many are held together, never whether one may be sent at all.
    func take(_ bytes: Int) -> Bool {
        used.withLock { used in
            guard used == 0 || used + bytes <= limit else { return false }
            used += bytes
            return true
        }
    }

    /// Gives back what `take` took.
    func give(_ bytes: Int) {
        guard bytes > 0 else { return }
        used.withLock { $0 = max(0, $0 - bytes) }
    }

    /// Bytes held now (for tests and status).
    var held: Int { used.withLock { $0 } }
}
