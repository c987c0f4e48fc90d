import SinkiSupport
import SinkiTransfer

/// A time the server could not be reached: since when, the last failure's cause (without URLs) and
/// how many requests failed, so that status says it once, in one line, with a count.
struct Outage: Sendable, Equatable {
    /// Nanoseconds since the epoch.
    var since: Int64
    var cause: String
    var failures: Int

    /// "server URL unreachable: CAUSE; retrying (N failed requests in 2m)" at `now`: the log's warning
    /// says the same up to its first `;`, so status shows one of them.
    func words(server: String, now: Int64 = Clock.now()) -> String {
        let failed = "\(failures) failed request\(failures == 1 ? "" : "s")"
        return "server \(server) unreachable: \(cause); retrying (\(failed) in \(HumanUnits.duration(Double(max(0, now - since)) / 1e9)))"
    }

    /// A tus failure's cause, without URLs.
    static func cause(_ error: TusError) -> String {
        switch error {
        case .transfer(let transfer): transfer.cause
        case .gaveUp(_, let last): cause(last)
        default: error.description
        }
    }
}
