import SinkiControl
import SinkiState
import SinkiSupport
import SinkiTransfer

/// The agent's tus transfers: uploads running, files moving either way (for status), and those that
/// failed after their last attempt and wait for `sinkid retry`. Lives in the agent's actor.
struct TransferBook {
    /// A file moving now.
    struct Moving {
        var direction: TransferStatus.Direction
        var total: Int64
        var done: Int64 = 0
        /// For a file sent as chunks: the bytes of chunks the server lacked, sent so far (the rest it held).
        var new: Int64?
        /// Where the rate is measured from: the first progress of this run (a resumed transfer's
        /// earlier bytes do not count).
        var since: (at: Int64, done: Int64)?
    }

    /// A transfer that gave up, with why. An upload is started again on its own after a growing
    /// delay (`failedUploads`), or at once by `sinkid retry`.
    struct Failure {
        var direction: TransferStatus.Direction
        var total: Int64
        var reason: String
        /// Failures of this transfer in a row (it is started again after each).
        var attempts = 1
    }

    /// The delay before a failed upload is started again after its `attempts`-th failure in a row:
    /// 30 s doubling to 10 minutes, ±20 %, so a file the server refuses for a while is not lost from
    /// view and not hammered either.
    static func uploadRetryDelay(attempts: Int) -> Double {
        min(600, 30 * Double(1 << min(5, max(0, attempts - 1)))) * Double.random(in: 0.8...1.2)
    }

    /// Created on first use; dropped by `sinkid retry` so that the server is asked again what it offers.
    var client: TusClient?
    var uploads: [String: Task<Void, Never>] = [:]
    var choosingUploads = false
    /// Keyed by `Key.of(direction, path)`.
    var moving: [String: Moving] = [:]
    var failed: [String: Failure] = [:]
    /// Checked downloads (by SHA-256) and how many callers hold each until their apply is done.
    var downloadHolds: [String: Int] = [:]
    /// Downloads running, by the SHA-256 of their content: a second caller waits for the first.
    var downloading: [String: Task<ApplyFailure?, any Error>] = [:]

    enum Key {
        static func of(_ direction: TransferStatus.Direction, _ path: String) -> String { direction.rawValue + ":" + path }
        static func path(of key: String) -> String { String(key[key.index(after: key.firstIndex(of: ":")!)...]) }
    }

    mutating func progress(_ key: String, done: Int64, new: Int64? = nil) {
        guard var entry = moving[key] else { return }
        entry.done = min(entry.total, max(0, done))
        if let new { entry.new = new }
        if entry.since == nil { entry.since = (Clock.monotonic(), entry.done) }
        moving[key] = entry
    }

    /// What `sinkid status` lists: files moving now, then the failed ones.
    func statuses(now: Int64 = Clock.monotonic()) -> [TransferStatus] {
        var out: [TransferStatus] = []
        for (key, entry) in moving.sorted(by: { $0.key < $1.key }) {
            var rate = 0.0
            if let since = entry.since, now > since.at + 100_000_000 {
                rate = Double(entry.done - since.done) / (Double(now - since.at) / 1e9)
            }
            out.append(TransferStatus(path: Key.path(of: key), direction: entry.direction, done: entry.done, total: entry.total,
                                      rate: max(0, rate), newBytes: entry.new))
        }
        for (key, failure) in failed.sorted(by: { $0.key < $1.key }) {
            out.append(TransferStatus(path: Key.path(of: key), direction: failure.direction, done: 0, total: failure.total, rate: 0,
                                      failed: failure.reason))
        }
        return out
    }
}
