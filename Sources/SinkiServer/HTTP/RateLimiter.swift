import SinkiSupport
import Synchronization

/// Per-token rate: a token bucket of `burst` units refilled at `rate` a second. A request costs a unit
/// to be let in (a sixteenth on the chunk and upload routes); every MiB it then carries in or out costs
/// another, taken as its bytes move, so a token sending large bodies pays for them as much as one
/// sending many requests (issue 24 item 4: twelve 250 MB bodies cost twelve requests). Bytes may take
/// the bucket below empty: a body in progress is never cut for its size, and the token's next
/// requests wait until the debt is paid.
final class RateLimiter: Sendable, CustomStringConvertible {
    private let rate: Double
    private let burst: Double

    var description: String { "\(rate.formatted2) requests a second (bursts of \(Int(burst)); each MiB sent or received counts as one)" }
    private let buckets = Mutex<[String: (level: Double, at: Int64)]>([:])

    init(rate: Double, burst: Int) {
        self.rate = rate
        self.burst = Double(max(1, burst))
    }

    /// What a request to a chunk or upload route costs: a large file moves as thousands of chunk
    /// requests (some 2,600 a GiB each way), which the limit on requests must not starve; what they
    /// cost the server is their bytes, counted by `charge`.
    static let transferCost = 1.0 / 16

    /// Bytes that cost one unit.
    static let bytesPerUnit = Double(1 << 20)

    /// Takes one request (`cost` of one) for `key`; nil when allowed, else the whole seconds until one
    /// is (Retry-After).
    func take(_ key: String, cost: Double = 1, now: Int64 = Clock.monotonic()) -> Int? {
        guard rate > 0 else { return nil }
        return buckets.withLock { buckets in
            var bucket = refilled(buckets[key], now: now)
            defer { buckets[key] = bucket }
            if bucket.level >= cost {
                bucket.level -= cost
                return nil
            }
            return max(1, Int(((cost - bucket.level) / rate).rounded(.up)))
        }
    }

    /// `bytes` moved for `key`'s request: taken from its bucket, below empty if need be.
    func charge(_ key: String, bytes: Int, now: Int64 = Clock.monotonic()) {
        guard rate > 0, bytes > 0 else { return }
        buckets.withLock { buckets in
            var bucket = refilled(buckets[key], now: now)
            bucket.level -= Double(bytes) / Self.bytesPerUnit
            buckets[key] = bucket
        }
    }

    private func refilled(_ bucket: (level: Double, at: Int64)?, now: Int64) -> (level: Double, at: Int64) {
        guard let bucket else { return (burst, now) }
        return (min(burst, bucket.level + Double(now - bucket.at) / 1e9 * rate), now)
    }
}
