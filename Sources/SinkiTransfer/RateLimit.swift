import SinkiLoop
import SinkiSupport

/// Bytes a second for all of one client's transfers in one direction together (`[transfer]
/// max-rate`): a token bucket that every transfer's body passes through, on the loop. libcurl's own
/// limits are per transfer, so four chunks and two files at once would move at six times the rate.
///
/// A transfer whose piece finds the bucket empty is paused (libcurl's `CURL_WRITEFUNC_PAUSE` or
/// `CURL_READFUNC_PAUSE`: the piece is kept and offered again) and waits in line; when the bucket
/// holds bytes again the first in line is let go with a piece's worth set aside for it. So the rate
/// holds over any stretch of time to within `burst` plus a piece, whatever the number of transfers,
/// and they take turns. Loop-confined and not Sendable; with nothing waiting no timer is armed.
public final class RateLimit {
    /// Which way the bytes go.
    public enum Direction: Sendable { case send, receive }

    public let direction: Direction
    /// Bytes a second; above 0.
    public private(set) var bytesPerSecond: Int64
    private let loop: EventLoop
    /// Bytes that may go now; below 0 after a piece larger than what was left (paid back by time).
    private var available: Double
    private var refilled: Int64
    private var waiting: [Waiter] = []
    private var timer: LoopTimer?

    /// A transfer in line, held weakly: one cancelled while it waits is passed over.
    private struct Waiter {
        weak var transfer: EasyHandle?
    }

    /// The most a send callback hands libcurl under a limit, and the bytes set aside for a transfer
    /// let go from the line: receive pieces are at most libcurl's buffer (16 KiB) too.
    static let piece = 16 << 10

    public init(bytesPerSecond: Int64, direction: Direction, loop: EventLoop) {
        precondition(bytesPerSecond > 0, "bug: a rate limit of \(bytesPerSecond) bytes a second")
        self.bytesPerSecond = bytesPerSecond
        self.direction = direction
        self.loop = loop
        refilled = Clock.monotonic()
        available = 0
        available = burst
    }

    /// At most a tenth of a second's worth, and never less than two pieces, may go at once after an
    /// idle time.
    var burst: Double { max(Double(2 * Self.piece), Double(bytesPerSecond) / 10) }

    /// A new rate, for what moves from now on.
    public func update(_ rate: Int64) {
        precondition(rate > 0, "bug: a rate limit of \(rate) bytes a second")
        refill()
        bytesPerSecond = rate
        available = min(available, burst)
        if !waiting.isEmpty { schedule() }
    }

    /// Whether `count` bytes of `transfer` may move now. False pauses the transfer: it is in line and
    /// `EasyHandle.resume` lets it go on when its turn comes. A transfer let go from the line moves
    /// its next piece whatever the bucket holds (that piece was set aside for it).
    func admit(_ count: Int, for transfer: EasyHandle) -> Bool {
        loop.checkIsolated()
        refill()
        if let set = transfer.granted(direction) {
            available += Double(set - count)
            return true
        }
        if available > 0 && waiting.isEmpty {
            available -= Double(count)
            return true
        }
        if !waiting.contains(where: { $0.transfer === transfer }) { waiting.append(Waiter(transfer: transfer)) }
        schedule()
        return false
    }

    /// Drops `transfer` from the line (it ended or was cancelled while paused).
    func forget(_ transfer: EasyHandle) {
        waiting.removeAll { $0.transfer == nil || $0.transfer === transfer }
        if waiting.isEmpty {
            timer?.stop()
            timer = nil
        }
    }

    private func refill() {
        let now = Clock.monotonic()
        available = min(burst, available + Double(now - refilled) / 1e9 * Double(bytesPerSecond))
        refilled = now
    }

    /// Arms the timer for when the bucket holds a piece again.
    private func schedule() {
        guard !waiting.isEmpty else { return }
        let missing = Double(Self.piece) - available
        let milliseconds = missing <= 0 ? 0 : UInt64((missing / Double(bytesPerSecond) * 1000).rounded(.up))
        let timer = self.timer ?? LoopTimer(loop: loop)
        self.timer = timer
        timer.start(after: milliseconds) { [unowned self] in self.letGo() }
    }

    /// Lets transfers in line go on, first come first, a piece set aside for each, while the bucket
    /// holds one.
    private func letGo() {
        refill()
        while available >= Double(Self.piece), !waiting.isEmpty {
            let next = waiting.removeFirst()
            guard let transfer = next.transfer else { continue }
            available -= Double(Self.piece)
            // May call back into `admit` at once (libcurl hands over a kept piece from inside the call).
            transfer.resume(direction, setAside: Self.piece)
        }
        if waiting.isEmpty {
            timer = nil
        } else {
            schedule()
        }
    }
}

@available(*, unavailable)
extension RateLimit: Sendable {}
