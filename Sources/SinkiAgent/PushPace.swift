import SinkiSupport

/// How much content one modify request may carry: about `target` of sending at the pace the last ones
/// went (issue 22: batches bounded by time as well as by records and bytes). Over a slow link a
/// batch of 1,000 small files is seconds of sending, and the other devices' feed takes nothing of it
/// until it is committed whole; batches of a quarter second reach them one after another while the
/// next ones travel. On loopback the pace allows the configured bound at once.
struct PushPace: Sendable, Equatable {
    /// Bytes of request body a second, as the last requests went (smoothed); nil before the first.
    private(set) var bytesPerSecond: Double?

    /// How long sending one batch should take.
    static let target = 0.25
    /// The least a batch may carry however slow the pace: a round trip costs more than that sends.
    static let floor = 256 << 10

    /// A modify request of `bodyBytes` answered `seconds` after it was sent (a round trip and the
    /// server's commit included), while `sharing` requests in all were in flight: each had that share
    /// of the link, which is the pace counted (a batch is a quarter second of the link, not of a share).
    mutating func answered(bodyBytes: Int, seconds: Double, sharing: Int = 1) {
        guard seconds > 0, bodyBytes > 0 else { return }
        let sample = Double(bodyBytes) * Double(max(1, sharing)) / seconds
        bytesPerSecond = bytesPerSecond.map { ($0 + sample) / 2 } ?? sample
    }

    /// The content bytes the next batch may carry, at most `configured`, when `depth` requests share the
    /// link: each then goes at a share of the pace, and its commit (all the other devices wait for) comes
    /// `target` after its first byte. A quarter second of the whole link each, three at once, made every
    /// batch three quarters of a second from first byte to commit, and the last three committed together
    /// at the end: the receivers' tail (0.9 s of 3.05 at 20 ms / 100 Mbit/s). The first batch carries
    /// the floor: it starts the other devices' pages soonest, and measures the pace.
    func maxBytes(configured: Int, depth: Int = 1) -> Int {
        guard let bytesPerSecond else { return min(configured, Self.floor) }
        return min(configured, max(Self.floor, Int(bytesPerSecond * Self.target / Double(max(1, depth)))))
    }
}
