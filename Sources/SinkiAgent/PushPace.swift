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

    /// The content bytes the next batch may carry, at most `configured`. The first batch carries the
    /// floor: it starts the other devices' pages soonest, and measures the pace.
    func maxBytes(configured: Int) -> Int {
        guard let bytesPerSecond else { return min(configured, Self.floor) }
        return min(configured, max(Self.floor, Int(bytesPerSecond * Self.target)))
    }
}
