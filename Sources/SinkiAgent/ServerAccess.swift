import SinkiControl
import SinkiSupport

/// Whether the server lets this device in right now: a refused token stops all sending until the
/// token file changes; a rate limit holds requests until the time the server named.
struct ServerAccess: Sendable, Equatable {
    /// The server's words when it refused the token (401 or 403); nil while it accepts it.
    var refused: String?
    /// The token file's contents the refusal was for: a change of them is a new token to try.
    var refusedToken: String?
    /// No request before this (nanoseconds since the epoch), after a `429` with `Retry-After`.
    var retryAt: Int64?
    /// When a 429 was last said at warning level: once a minute is enough to know it goes on.
    var limitWarnedAt: Int64?
    /// The server's last `507 storage-full`: saves wait until its `retryAt` (the feed goes on).
    var storageFull: StorageFullNote?
    /// Refusals in a row for storage: the wait doubles with each.
    var storageRefusals = 0

    /// Whether saves may go: no storage refusal waits.
    func storageOpen(now: Int64) -> Bool { storageFull.map { $0.retryAt <= now } ?? true }

    /// After the `refusals`th storage refusal in a row: 5 s, doubling to 5 minutes (a quota frees room
    /// only when someone deletes, raises it, or history expires: nothing a quick retry would find).
    static func storageWait(refusals: Int) -> Int64 {
        min(300, 5 << min(6, max(0, refusals - 1))) * 1_000_000_000
    }

    /// Seconds still to wait for a rate limit, nil when none holds.
    func rateLimitRemaining(now: Int64) -> Int64? {
        guard let retryAt, retryAt > now else { return nil }
        return (retryAt - now + 999_999_999) / 1_000_000_000
    }

    /// The longest wait a `Retry-After` may impose: a server that asks for more is waited on this long
    /// and then asked again.
    static let maxRetryAfterSeconds = 3600
    /// Without `Retry-After`, a 429 is waited on this long.
    static let defaultRetryAfterSeconds = 5
}
