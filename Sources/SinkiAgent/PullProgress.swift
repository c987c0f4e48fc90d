import SinkiControl
import SinkiSupport

/// How the current run of applying remote changes goes (a first download above all): from the first
/// feed page that brought something until nothing waits either way. What `sinkid status` shows for
/// the whole of it, as `PushProgress` does for sending.
struct PullProgress: Sendable, Equatable {
    /// When the run began (monotonic nanoseconds).
    let startedAt: Int64
    /// Remote changes written here in this run, and the bytes of content they wrote.
    private(set) var applied = 0
    private(set) var bytes: Int64 = 0

    init(startedAt: Int64) { self.startedAt = startedAt }

    mutating func took(_ count: Int, bytes: Int64) {
        applied += count
        self.bytes += bytes
    }

    /// With `toApply` changes still to apply, whose content is `toApplyBytes`, and `moving` bytes of
    /// large files already here in part, at `now`: the totals of the whole run, and the pace.
    func view(toApply: Int, toApplyBytes: Int64, moving: Int64, now: Int64) -> DownloadProgress {
        let done = bytes + moving
        let total = bytes + max(toApplyBytes, moving)
        let seconds = Double(max(0, now - startedAt)) / 1e9
        var rate: Double?
        var left: Double?
        if seconds > 0.5 {
            if done > 0 {
                rate = Double(done) / seconds
                left = Double(max(0, total - done)) / (Double(done) / seconds)
            } else if applied > 0 {
                left = Double(toApply) / (Double(applied) / seconds)
            }
        }
        return DownloadProgress(applied: applied, total: applied + toApply, bytes: done, totalBytes: total, rate: rate, secondsLeft: left)
    }

    /// "applied N remote change(s) (SIZE) in S s": the log's line when the run ends.
    func endWords(now: Int64) -> String {
        "applied \(HumanUnits.grouped(applied)) remote change(s) (\(HumanUnits.bytes(bytes))) in "
            + String(format: "%.1f", Double(max(0, now - startedAt)) / 1e9) + " s"
    }
}

extension PushProgressView {
    /// As status's `progress.upload` gives it.
    var summary: UploadProgress { UploadProgress(sent: sent, total: total, bytes: bytes, rate: rate, secondsLeft: secondsLeft) }
}
