import SinkiSupport
import Synchronization

/// libmicrohttpd's messages, at most one line a minute per kind: it says something for each
/// connection it refuses or cuts (an address over its cap, a timeout), and a client that opens
/// thousands must not write thousands of lines. A kind is the message with its digits left out
/// (addresses, counts); the next line of a kind says how many were left out since the last.
final class LogThrottle: Sendable {
    private let interval: Int64
    private let kinds = Mutex<[String: (loggedAt: Int64, skipped: Int)]>([:])

    init(intervalSeconds: Double = 60) { interval = Int64(intervalSeconds * 1e9) }

    /// The line to log for `message` now, or nil when its kind was logged within the interval.
    func line(for message: String, now: Int64 = Clock.monotonic()) -> String? {
        let kind = String(message.unicodeScalars.filter { !("0"..."9").contains($0) }.prefix(80))
        return kinds.withLock { kinds -> String? in
            if let seen = kinds[kind], now - seen.loggedAt < interval {
                kinds[kind]?.skipped += 1
                return nil
            }
            let skipped = kinds[kind]?.skipped ?? 0
            if kinds.count > 256 { kinds.removeAll() }
            kinds[kind] = (now, 0)
            return skipped > 0 ? "\(message) (and \(skipped) more like it since the last)" : message
        }
    }
}
