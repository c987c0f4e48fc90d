import SinkiSupport

/// How the current run of sending is going: from the moment local changes wait to be sent until none
/// does. What `sinkid status` and systemd show while a large first sync (or any long push) runs.
struct PushProgress: Sendable, Equatable {
    /// When the run began (monotonic nanoseconds).
    let startedAt: Int64
    /// `Replica.savedTotal` when the run began, and at its last acknowledgement (both known from the
    /// first one on): the changes the server took in this run are the difference.
    private(set) var baseline: Int?
    private var latest = 0
    /// The bytes of content those changes carried.
    private(set) var bytes: Int64 = 0

    init(startedAt: Int64) { self.startedAt = startedAt }

    var sent: Int { baseline.map { latest - $0 } ?? 0 }

    /// An acknowledgement of `count` changes carrying `bytes`, after which the replica had counted
    /// `savedTotal` in all.
    mutating func took(_ count: Int, bytes: Int64, savedTotal: Int) {
        if baseline == nil { baseline = savedTotal - count }
        latest = savedTotal
        self.bytes += bytes
    }

    /// "12,345 local change(s) sent (789.0 KiB), 8,700/s": what systemd's one line has room for
    /// (the count still to send is the outbox's, which `sinkid status` reads).
    func sentWords(now: Int64) -> String {
        "\(HumanUnits.grouped(sent)) local change(s) sent (\(HumanUnits.bytes(bytes)))"
            + (rate(sent, now: now).map { ", \(HumanUnits.grouped(Int($0.rounded())))/s" } ?? "")
    }

    /// What to show with `pending` changes still to send, both counted with the replica at
    /// `savedTotal` (so that a batch acknowledged between two looks is counted once), at `now`.
    func view(pending: Int, savedTotal: Int, now: Int64) -> PushProgressView {
        let sent = baseline.map { max(0, savedTotal - $0) } ?? 0
        let rate = rate(sent, now: now)
        return PushProgressView(sent: sent, total: sent + pending, bytes: bytes, rate: rate,
                                secondsLeft: rate.map { Double(pending) / $0 })
    }

    private func rate(_ sent: Int, now: Int64) -> Double? {
        let seconds = Double(max(0, now - startedAt)) / 1e9
        return seconds > 0.5 && sent > 0 ? Double(sent) / seconds : nil
    }
}

/// A run of sending as shown: `sent` of `total` changes, the content bytes sent, files a second and
/// the time left at that rate (nil until half a second has shown a rate).
struct PushProgressView: Sendable, Equatable {
    var sent: Int
    var total: Int
    var bytes: Int64
    var rate: Double?
    var secondsLeft: Double?

    /// "12,345 of 100,000 sent (789.0 KiB), 8,700/s, about 10s left".
    var words: String {
        var text = "\(HumanUnits.grouped(sent)) of \(HumanUnits.grouped(total)) sent (\(HumanUnits.bytes(bytes)))"
        if let rate { text += ", \(HumanUnits.grouped(Int(rate.rounded())))/s" }
        if let secondsLeft { text += ", about \(HumanUnits.duration(secondsLeft)) left" }
        return text
    }
}
