import CCurl
import SinkiLoop
import SinkiSupport

/// The agent's HTTP client: libcurl's multi interface on the agent's one libuv loop.
///
/// Loop-confined and not Sendable: create it anywhere, then use it only on the loop's thread, from an
/// actor whose executor is the loop. `send` runs on its caller's executor, so a request costs no
/// thread hop; many can be in flight at once, sharing the multi handle's connection cache
/// (keep-alive). With nothing in flight the client keeps no timer and watches no socket.
public final class HTTPClient {
    public let loop: EventLoop
    public let userAgent: String
    private let logger: Logger
    private let multi: MultiHandle

    /// Bytes per second sent by all of this client's transfers together (`RateLimit`); 0: unlimited.
    /// A new rate holds at once for transfers under way; a limit set or lifted holds for those
    /// started afterwards.
    public var maxSendRate: Int64 = 0 {
        didSet { sendLimit = Self.limit(sendLimit, maxSendRate, .send, loop) }
    }
    /// Bytes per second received by all of this client's transfers together; 0: unlimited.
    public var maxReceiveRate: Int64 = 0 {
        didSet { receiveLimit = Self.limit(receiveLimit, maxReceiveRate, .receive, loop) }
    }
    private var sendLimit: RateLimit?
    private var receiveLimit: RateLimit?

    private static func limit(_ current: RateLimit?, _ rate: Int64, _ direction: RateLimit.Direction, _ loop: EventLoop) -> RateLimit? {
        guard rate > 0 else { return nil }
        guard let current else { return RateLimit(bytesPerSecond: rate, direction: direction, loop: loop) }
        current.update(rate)
        return current
    }
    /// Certificates (a PEM file) trusted for `https://` instead of the system's (`[server] ca-file`).
    public var caFile: String?

    /// `sinkid/VERSION libcurl/VERSION`.
    public static let defaultUserAgent = "sinkid/0.1 " + (String(cString: curl_version()).split(separator: " ").first.map(String.init) ?? "libcurl")

    public init(loop: EventLoop, logger: Logger, userAgent: String = HTTPClient.defaultUserAgent) {
        self.loop = loop
        self.logger = logger
        self.userAgent = userAgent
        multi = MultiHandle(loop: loop, logger: logger)
    }

    /// Transfers started and not yet finished.
    public var activeTransfers: Int {
        loop.checkIsolated()
        return multi.activeTransfers
    }

    /// No transfer in flight, no socket watched and no timer armed on the loop for libcurl.
    public var isIdle: Bool {
        loop.checkIsolated()
        return multi.activeTransfers == 0 && multi.watchedSockets == 0 && !multi.timerArmed
    }

    /// Sends `request` and waits for the whole response. A non-2xx status is a response, not an error.
    /// Cancelling the awaiting task removes the transfer from libcurl at once and throws `.cancelled`.
    /// `progress(done, total)` runs on the loop as bytes move: the upload's when the request has a
    /// body, else the download's (total 0 while unknown).
    ///
    /// Runs on the caller's executor, which must be the loop (an actor whose executor is the loop).
    /// `isolation` does that, not `nonisolated(nonsending)`: in Swift 6.3.1 `#isolation` is nil inside a
    /// `nonisolated(nonsending)` function, so `withTaskCancellationHandler` would run its operation on
    /// the global pool and the rest of the call would stay there. Closures below capture `isolation`
    /// so that they are isolated to it (SE-0420).
    public func send(_ request: HTTPRequest, sink: HTTPResponseSink = .memory(limit: 512 << 20),
                     progress: ((Int64, Int64) -> Void)? = nil, tap: HTTPTap? = nil,
                     isolation: isolated (any Actor)? = #isolation) async throws(TransferError) -> HTTPResponse {
        loop.checkIsolated()
        if Task.isCancelled { throw .cancelled }
        var request = request
        if sendLimit != nil || receiveLimit != nil, request.timeout > 0 {
            // Under a rate limit a body takes as long as its bytes need at the rate, shared with the
            // other transfers: what stays bounded is silence.
            request.stallTimeout = request.stallTimeout > 0 ? max(request.stallTimeout, request.timeout) : request.timeout
            request.timeout = 0
        }
        let settings = EasyHandle.Settings(userAgent: userAgent, sendLimit: sendLimit, receiveLimit: receiveLimit, caFile: caFile)
        let easy = try EasyHandle(request: request, sink: sink, settings: settings, progress: progress, tap: tap)
        let multi = self.multi
        let canceller = Canceller(loop: loop, multi: multi, easy: easy)
        let result = await withTaskCancellationHandler {
            _ = isolation
            return await withCheckedContinuation { continuation in
                multi.start(easy, continuation)
            }
        } onCancel: {
            canceller.cancel()
        }
        loop.checkIsolated()
        let milliseconds = (Clock.monotonic() - easy.started) / 1_000_000
        switch result {
        case .success(let response):
            logger.debug("\(easy.method) \(easy.url): \(response.status), \(response.body.count) bytes in memory, \(milliseconds) ms")
        case .failure(let error):
            logger.debug("\(easy.method) \(easy.url) failed after \(milliseconds) ms: \(error)")
        }
        return try result.get()
    }
}

@available(*, unavailable)
extension HTTPClient: Sendable {}

/// Carries a transfer to the loop when its task is cancelled; the cancellation handler runs on
/// whatever thread cancelled the task.
// @unchecked: the weak references are written once in `init`, on the loop, and read only inside the
// closure `cancel` queues on that same loop; no other thread dereferences them.
private final class Canceller: @unchecked Sendable {
    private let loop: EventLoop
    private weak var multi: MultiHandle?
    private weak var easy: EasyHandle?

    init(loop: EventLoop, multi: MultiHandle, easy: EasyHandle) {
        self.loop = loop
        self.multi = multi
        self.easy = easy
    }

    func cancel() {
        loop.execute { [self] in
            loop.checkIsolated()
            // Gone or already finished: nothing to do.
            guard let multi, let easy else { return }
            multi.cancel(easy)
        }
    }
}
