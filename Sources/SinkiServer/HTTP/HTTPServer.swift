import CMicroHTTPD
import CMicroHTTPDShim
import Dispatch
import Glibc
import SinkiRecord
import SinkiSupport
import Synchronization

/// The state of one request between libmicrohttpd's calls. Confined to the worker thread that serves
/// its connection (libmicrohttpd keeps a connection on one thread of its pool); it crosses into C as
/// `*con_cls`, retained, and is released exactly once in the completion callback.
final class RequestContext {
    var requestID = ""
    /// The target as it arrived, before libmicrohttpd decoded it (its URI callback).
    var rawTarget = ""
    /// Whether the access handler has seen the request's headers (its first call).
    var begun = false
    let started = Clock.monotonic()
    var method = ""
    var path = ""
    var request: Request?
    var route: (any Route)?
    var policy: BodyPolicy = .none
    var body: [UInt8] = []
    /// Bytes of a buffered or parsed body taken so far.
    var received = 0
    /// The answer owed once the client has finished sending (a body over its limit, a refusing sink).
    var refusal: (any Error)?
    var refusalHeaders: [(String, String)] = []
    /// The route's `commonHeaders`, once routed.
    var routeHeaders: [(String, String)] = []
    /// Set while the request is parked in the waiter hub.
    var longPoll: LongPoll?
    let wakeSlot = WaiterHub.WakeSlot()
    /// Counted in the server's set of parked requests until it completes.
    var countedAsParked = false
    /// The request's token (nil without accounts).
    var tokenID: String?
    /// Its entry among the streaming requests `Revocations` may cut.
    var streamRegistration: UInt64?
    /// The user whose long-poll quota this request holds (released when it ends).
    var longPollUser: String?
    /// Bytes of the server-wide body budget this request's buffered body holds (released when it ends).
    var budgeted = 0
}

/// How the server answers HTTP: libmicrohttpd with its own thread pool (epoll), the router, the
/// authenticator and the waiter hub.
///
/// A request goes through three kinds of calls from libmicrohttpd: the headers (`begin`: request id,
/// authentication, routing, body policy), zero or more body chunks (`receive`), and the end (`finish`:
/// the route answers, or parks a long-poll; a resumed long-poll comes back here too).
final class HTTPServer: Sendable {
    private let router: Router
    private let authenticator: Authenticator
    private let revocations: Revocations
    private let limiter: RateLimiter
    private let longPolls: LongPollQuota
    private let maxConnectionsPerAddress: Int
    /// libmicrohttpd's lines, one a minute per kind.
    private let mhdLines = LogThrottle()
    /// Bytes of buffered bodies held at once, server-wide.
    private let bodies: BodyBudget
    /// Connections whose request head is due, cut when it is late.
    let heads: HeadDeadlines
    /// Paths below which `X-HTTP-Method-Override` replaces the request's method (tus asks for it).
    private let methodOverridePrefixes: [String]
    let hub: WaiterHub
    private let logger: Logger
    private let running = Mutex<Running?>(nil)
    /// Requests libmicrohttpd has presented and not yet completed.
    private let liveRequests = Atomic<Int>(0)
    /// Requests that parked at least once and have not completed: `stop()` waits for them to be answered.
    private let parkedRequests = DispatchGroup()

    private struct Running: @unchecked Sendable {
        // @unchecked: the daemon pointer and the retained self are only used by `start` and `stop`, under
        // the `running` lock; libmicrohttpd's own threads reach the server through their callbacks.
        let daemon: OpaquePointer
        let retained: Unmanaged<HTTPServer>
        let logTarget: UnsafeMutablePointer<sinki_mhd_logger>
    }

    init(router: Router, authenticator: Authenticator, hub: WaiterHub, logger: Logger, methodOverridePrefixes: [String] = [],
         revocations: Revocations? = nil, limits: ServerLimits = ServerLimits()) {
        self.router = router
        self.revocations = revocations ?? Revocations(hub: hub)
        limiter = RateLimiter(rate: limits.requestsPerSecond, burst: limits.requestBurst)
        longPolls = LongPollQuota(perToken: limits.maxLongPollsPerToken, perUser: limits.maxLongPollsPerUser)
        bodies = BodyBudget(limit: limits.maxBufferedBodyBytes)
        maxConnectionsPerAddress = limits.maxConnectionsPerAddress
        heads = HeadDeadlines(seconds: limits.headDeadlineSeconds, logger: logger)
        self.methodOverridePrefixes = methodOverridePrefixes
        self.authenticator = authenticator
        self.hub = hub
        self.logger = logger
    }

    var liveRequestCount: Int { liveRequests.load(ordering: .relaxed) }
    /// Bytes of buffered bodies held now.
    var bufferedBodyBytes: Int { bodies.held }

    // MARK: Starting and stopping

    /// Serves on a duplicate of `listenSocket` (bound and listening), which libmicrohttpd owns from here;
    /// the caller closes its own. (Whether libmicrohttpd closes a socket it was given when it fails to
    /// start is not documented; with a duplicate, nothing is ever closed twice.)
    func start(listenSocket: Int32, threads: Int, connectionTimeout: Int, address: String) throws(ServerError) {
        try running.withLock { (running: inout Running?) throws(ServerError) in
            precondition(running == nil, "bug: HTTPServer started twice")
            let socket = fcntl(listenSocket, F_DUPFD_CLOEXEC, 0)
            guard socket >= 0 else {
                throw ServerError(.cannotStart, "cannot serve on \(address): \(SystemError("dup", errno: errno))")
            }
            let retained = Unmanaged.passRetained(self)
            let logTarget = UnsafeMutablePointer<sinki_mhd_logger>.allocate(capacity: 1)
            logTarget.initialize(to: sinki_mhd_logger(log: { cls, message in
                let server = Unmanaged<HTTPServer>.fromOpaque(cls!).takeUnretainedValue()
                if let line = server.mhdLines.line(for: message.map { String(cString: $0) } ?? "") { server.logger.warning("microhttpd: \(line)") }
            }, cls: retained.toOpaque()))
            let flags = MHD_USE_INTERNAL_POLLING_THREAD.rawValue | MHD_USE_EPOLL.rawValue
                | MHD_ALLOW_SUSPEND_RESUME.rawValue | MHD_USE_ERROR_LOG.rawValue
            let daemon = sinki_mhd_start(
                flags, socket, UInt32(max(1, threads)), UInt32(max(0, connectionTimeout)), Self.connectionMemory,
                { cls, connection, url, method, _, upload, uploadSize, context in
                    let server = Unmanaged<HTTPServer>.fromOpaque(cls!).takeUnretainedValue()
                    return server.handle(Connection(raw: connection!), url: url, method: method, upload: upload,
                                         uploadSize: uploadSize!, context: context!)
                }, retained.toOpaque(),
                { cls, connection, context, termination in
                    let server = Unmanaged<HTTPServer>.fromOpaque(cls!).takeUnretainedValue()
                    if let connection { server.heads.requestEnded(connection) }
                    server.completed(context: context, termination: termination)
                }, retained.toOpaque(),
                { cls, uri, connection in
                    let server = Unmanaged<HTTPServer>.fromOpaque(cls!).takeUnretainedValue()
                    if let connection { server.heads.lineArrived(connection) }
                    return server.arrived(rawTarget: uri.map { String(cString: $0) } ?? "")
                }, retained.toOpaque(),
                { cls, connection, _, event in
                    let server = Unmanaged<HTTPServer>.fromOpaque(cls!).takeUnretainedValue()
                    guard let connection else { return }
                    switch event {
                    case .CONNECTION_NOTIFY_STARTED: server.heads.opened(connection, socket: sinki_mhd_connection_fd(connection))
                    case .CONNECTION_NOTIFY_CLOSED: server.heads.closed(connection)
                    default: break
                    }
                }, retained.toOpaque(),
                UInt32(max(0, maxConnectionsPerAddress)),
                logTarget)
            guard let daemon else {
                retained.release()
                logTarget.deinitialize(count: 1)
                logTarget.deallocate()
                throw ServerError(.cannotStart, "cannot serve on \(address): libmicrohttpd did not start (see the log)")
            }
            running = Running(daemon: daemon, retained: retained, logTarget: logTarget)
        }
    }

    /// Answers every parked long-poll (waiting up to `grace` seconds for the answers to go out), then
    /// stops libmicrohttpd, which closes the listening socket and finishes the requests in hand first.
    func stop(grace: Double) {
        guard let current = running.withLock({ running -> Running? in
            defer { running = nil }
            return running
        }) else {
            hub.shutdown()
            return
        }
        // No MHD_quiesce_daemon: with a thread pool on epoll, it takes the listening socket out of each
        // worker's epoll set while the worker may be doing the same, and whichever loses the race aborts
        // the process ("Failed to remove listen FD from epoll set", libmicrohttpd 0.9.75). A request that
        // arrives during the grace is served, or cut by the stop; a long-poll is answered at once.
        hub.shutdown()
        if parkedRequests.wait(timeout: .now() + .milliseconds(Int(grace * 1000))) == .timedOut {
            logger.warning("stopping: some long-polls were not answered within \(grace) s; closing them")
        }
        MHD_stop_daemon(current.daemon)
        current.retained.release()
        current.logTarget.deinitialize(count: 1)
        current.logTarget.deallocate()
    }

    // MARK: libmicrohttpd's calls

    private func handle(_ connection: Connection, url: UnsafePointer<CChar>?, method: UnsafePointer<CChar>?,
                        upload: UnsafePointer<CChar>?, uploadSize: UnsafeMutablePointer<Int>,
                        context slot: UnsafeMutablePointer<UnsafeMutableRawPointer?>) -> MHD_Result {
        if slot.pointee == nil { slot.pointee = arrived(rawTarget: url.map { String(cString: $0) } ?? "") }
        let context = Unmanaged<RequestContext>.fromOpaque(slot.pointee!).takeUnretainedValue()
        if !context.begun {
            context.begun = true
            heads.headArrived(connection.raw)
            context.method = method.map { String(cString: $0) } ?? ""
            context.path = url.map { String(cString: $0) } ?? ""
            return begin(context, connection)
        }
        if uploadSize.pointee > 0 {
            receive(context, UnsafeRawBufferPointer(start: upload, count: uploadSize.pointee))
            uploadSize.pointee = 0
            return MHD_Result.YES
        }
        return finish(context, connection)
    }

    /// A request line is in: its context, holding the target as sent, before libmicrohttpd decodes it.
    private func arrived(rawTarget: String) -> UnsafeMutableRawPointer {
        let context = RequestContext()
        context.rawTarget = rawTarget
        liveRequests.add(1, ordering: .relaxed)
        return Unmanaged.passRetained(context).toOpaque()
    }

    private func completed(context slot: UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
                           termination: MHD_RequestTerminationCode) {
        guard let slot, let raw = slot.pointee else { return }
        slot.pointee = nil
        let context = Unmanaged<RequestContext>.fromOpaque(raw).takeRetainedValue()
        liveRequests.subtract(1, ordering: .relaxed)
        if context.countedAsParked { parkedRequests.leave() }
        bodies.give(context.budgeted)
        if let token = context.tokenID {
            if let registration = context.streamRegistration { revocations.unregister(token: token, id: registration) }
            if let user = context.longPollUser { longPolls.release(token: token, user: user) }
        }
        if case let .stream(sink) = context.policy { sink.abandon() }
        if termination != .REQUEST_TERMINATED_COMPLETED_OK, logger.isEnabled(.debug) {
            logger.debug("\(context.method) \(context.path) ended early (\(Self.describe(termination))) request \(context.requestID)")
        }
    }

    private static func describe(_ code: MHD_RequestTerminationCode) -> String {
        switch code {
        case .REQUEST_TERMINATED_WITH_ERROR: return "connection error"
        case .REQUEST_TERMINATED_TIMEOUT_REACHED: return "timeout"
        case .REQUEST_TERMINATED_DAEMON_SHUTDOWN: return "server stopping"
        case .REQUEST_TERMINATED_READ_ERROR: return "client went away"
        case .REQUEST_TERMINATED_CLIENT_ABORT: return "client aborted"
        default: return "code \(code.rawValue)"
        }
    }

    // MARK: The three steps of a request

    /// The headers are in: name the request, check who sends it, find its route, decide on the body.
    private func begin(_ context: RequestContext, _ connection: Connection) -> MHD_Result {
        context.requestID = Self.requestID(from: connection.header("X-Request-Id"))
        // Before the token is looked at: what could be read two ways is never read at all.
        if let problem = RequestHead.targetProblem(method: context.method, rawTarget: context.rawTarget)
            ?? RequestHead.framingProblem(contentLengths: connection.headers("Content-Length"),
                                          transferEncodings: connection.headers("Transfer-Encoding")) {
            context.refusalHeaders = [("Connection", "close")]
            return answer(context, connection, error: problem, headers: context.refusalHeaders)
        }
        let authorization = connection.header("Authorization")
        let identity: ServerIdentity
        do {
            guard let found = try authenticator.identify(authorization: authorization) else {
                return refuse(context, connection, Problem(.unauthorized, detail: Authenticator.refusal))
            }
            identity = found
        } catch {
            logger.error("\(error) (request \(context.requestID)); answered 503")
            return refuse(context, connection, Self.retryLater("the server cannot check tokens now; retry later"))
        }
        context.tokenID = identity.tokenID
        // A long-poll or a body may outlive the token: its expiry then cuts them as a revocation does.
        if let token = identity.tokenID, let expiresAt = identity.scope.expiresAt { revocations.cutAtExpiry(token: token, expiresAt: expiresAt) }
        let transfer = context.path.hasPrefix(Routes.chunks) || context.path.hasPrefix(Routes.uploads)
        if let token = identity.tokenID, let wait = limiter.take(token, cost: transfer ? RateLimiter.transferCost : 1) {
            return refuse(context, connection, RouteError(
                Problem(.rateLimited, detail: "token \(token) sent more than its \(limiter.description); retry in \(wait) s"),
                headers: [("Retry-After", String(wait))]))
        }
        if let override = connection.header("X-HTTP-Method-Override"), !override.isEmpty,
           methodOverridePrefixes.contains(where: { context.path.hasPrefix($0) }) {
            context.method = override.uppercased()
        }
        let route: any Route
        let parameter: String
        switch router.match(method: context.method, path: context.path) {
        case let .found(found, foundParameter):
            route = found
            parameter = foundParameter
        case let .wrongMethod(allowed):
            context.refusalHeaders = [("Allow", allowed.joined(separator: ", "))]
            return refuse(context, connection,
                          Problem(.methodNotAllowed, detail: "\(context.path) takes \(allowed.joined(separator: ", ")), not \(context.method)"))
        case .notFound:
            return refuse(context, connection, Problem(.notFound, detail: "no route \(context.method) \(quoted(context.path))"))
        }
        let request = Request(method: context.method, path: context.path, pathParameter: parameter,
                              requestID: context.requestID, identity: identity, connection: connection)
        context.routeHeaders = route.commonHeaders
        do {
            context.policy = try route.begin(request)
        } catch {
            return refuse(context, connection, error)
        }
        if case .stream = context.policy, let token = identity.tokenID {
            guard let registration = revocations.register(token: token, socket: sinki_mhd_connection_fd(connection.raw)) else {
                return refuse(context, connection, Problem(.unauthorized, detail: Authenticator.refusal))
            }
            context.streamRegistration = registration
        }
        if let limit = context.policy.heldLimit, let length = request.contentLength {
            guard length <= limit else {
                return refuse(context, connection, Problem(.tooLarge, detail: "the body is \(length) bytes; \(context.path) takes at most \(limit)"),
                              readBody: false)
            }
            guard bodies.take(length) else { return refuse(context, connection, Self.overBudget(bodies), readBody: false) }
            context.budgeted = length
            if case .buffer = context.policy { context.body.reserveCapacity(length) }
        }
        context.request = request
        context.route = route
        return MHD_Result.YES
    }

    /// Refuses a request whose headers were enough to decide. A request without a body is answered in
    /// the final call, which keeps the connection open for the next one; one with a body is answered
    /// now, so that libmicrohttpd drops the body unread and closes the connection after the answer.
    /// Refuses the request. `readBody` false: answered before any of the body is read, whatever its
    /// size (a body declared over the route's limit is never taken in).
    private func refuse(_ context: RequestContext, _ connection: Connection, _ error: any Error, readBody: Bool = true) -> MHD_Result {
        let length = connection.header("Content-Length").flatMap { Int($0) } ?? 0
        // A body of known, modest size is read and dropped before the answer: answered at once, the
        // connection is closed with the body unread, the kernel resets it, and the client (still
        // sending, or about to read) may lose the answer to the reset, seeing a dead server where a
        // 429 or a 401 was said. Larger or chunked bodies are answered at once, the connection closed.
        let answerAtOnce = length > 0 && !readBody || length > Self.refusedBodyReadLimit || connection.header("Transfer-Encoding") != nil
        guard answerAtOnce else {
            context.refusal = error
            return MHD_Result.YES
        }
        return answer(context, connection, error: error, headers: context.refusalHeaders)
    }

    /// The answer to a body that does not fit beside those the server holds.
    private static func overBudget(_ bodies: BodyBudget) -> RouteError {
        retryLater("the server holds \(bodies.limit >> 20) MiB of request bodies at once, the most it may; retry later")
    }

    /// `503 unavailable` with `Retry-After: 1`: not now, which clients wait out and ask again.
    private static func retryLater(_ detail: String) -> RouteError {
        RouteError(Problem(.unavailable, detail: detail), headers: [("Retry-After", "1")])
    }

    /// The largest body of a refused request that is read (and dropped) so its answer arrives whole.
    static let refusedBodyReadLimit = 8 << 20

    /// A chunk of the body.
    private func receive(_ context: RequestContext, _ chunk: UnsafeRawBufferPointer) {
        // Every byte read counts against its token's rate, taken in or drained.
        if let token = context.tokenID { limiter.charge(token, bytes: chunk.count) }
        guard context.refusal == nil else { return }
        switch context.policy {
        case .none:
            break
        case .buffer(let limit), .parse(let limit, _):
            let received = context.received + chunk.count
            if received > limit {
                context.body = []
                context.refusal = Problem(.tooLarge, detail: "the body is over \(limit) bytes, the most \(context.path) takes")
                return
            }
            if received > context.budgeted {
                // A body of no declared length (chunked) takes its share as it grows.
                let more = max(received - context.budgeted, 1 << 20)
                guard bodies.take(more) else {
                    context.body = []
                    context.refusal = Self.overBudget(bodies)
                    return
                }
                context.budgeted += more
            }
            context.received = received
            if case let .parse(_, parser) = context.policy {
                do { try parser.take(chunk) } catch { context.refusal = error }
            } else {
                context.body.append(contentsOf: chunk)
            }
        case let .stream(sink):
            // Between chunks: a token revoked mid-body writes no more (the watcher also shuts the socket).
            if let token = context.tokenID, revocations.isRevoked(token) {
                context.refusal = Problem(.unauthorized, detail: Authenticator.refusal)
                return
            }
            do { try sink.write(chunk) } catch { context.refusal = error }
        }
    }

    /// The request is in, or a parked long-poll was resumed: answer or park.
    private func finish(_ context: RequestContext, _ connection: Connection) -> MHD_Result {
        if let refusal = context.refusal { return answer(context, connection, error: refusal, headers: context.refusalHeaders) }
        if let longPoll = context.longPoll {
            context.longPoll = nil
            return drive(longPoll, context, connection, woken: context.wakeSlot.reason)
        }
        guard var request = context.request, let route = context.route else {
            logger.error("bug: request \(context.requestID) finished without a route; closing its connection")
            return MHD_Result.NO
        }
        context.request = nil
        context.route = nil
        request.body = context.body
        context.body = []
        if case let .stream(sink) = context.policy { request.sink = sink }
        if case let .parse(_, parser) = context.policy { request.parser = parser }
        do {
            switch try route.respond(to: request) {
            case let .response(response): return answer(context, connection, response)
            case let .longPoll(longPoll):
                if let token = longPoll.token {
                    if let refusal = longPolls.admit(token: token, user: longPoll.user) {
                        let detail = refusal == .token
                            ? "token \(token) has \(longPolls.perToken) long-polls open already, the most it may; retry later"
                            : "this user's tokens have \(longPolls.perUser) long-polls open already, the most they may together; retry later"
                        return answer(context, connection, error: RouteError(Problem(.rateLimited, detail: detail), headers: [("Retry-After", "1")]))
                    }
                    context.longPollUser = longPoll.user
                }
                return drive(longPoll, context, connection, woken: nil)
            }
        } catch {
            return answer(context, connection, error: error)
        }
    }

    /// Answers a long-poll if it has something to say or its time is up, else parks it in the hub.
    private func drive(_ longPoll: LongPoll, _ context: RequestContext, _ connection: Connection, woken: WaiterHub.WakeReason?) -> MHD_Result {
        do {
            if woken == .hangup { return answer(context, connection, try longPoll.expire()) }
            if woken == .revoked { return answer(context, connection, error: Problem(.unauthorized, detail: Authenticator.refusal)) }
            while true {
                let generation = hub.generation(of: longPoll.user)
                if let response = try longPoll.poll() { return answer(context, connection, response) }
                if woken == .timeout || woken == .shutdown || Clock.monotonic() >= longPoll.deadline {
                    return answer(context, connection, try longPoll.expire())
                }
                // Counted before it can be parked, so that `stop()`, once it has resumed everything parked,
                // waits for this answer too.
                if !context.countedAsParked {
                    context.countedAsParked = true
                    parkedRequests.enter()
                }
                let result = hub.park(user: longPoll.user, token: longPoll.token, seen: generation, deadline: longPoll.deadline,
                                      socket: sinki_mhd_connection_fd(connection.raw), slot: context.wakeSlot,
                                      suspend: connection.suspend, resume: connection.resume)
                switch result {
                case .parked:
                    context.longPoll = longPoll
                    return MHD_Result.YES
                case .changed:
                    continue
                case .stopping:
                    return answer(context, connection, try longPoll.expire())
                case .revoked:
                    return answer(context, connection, error: Problem(.unauthorized, detail: Authenticator.refusal))
                }
            }
        } catch {
            return answer(context, connection, error: error)
        }
    }

    // MARK: Answering

    /// Sends an error as `application/problem+json` with the request id, and logs it with that id.
    private func answer(_ context: RequestContext, _ connection: Connection, error: any Error,
                        headers: [(String, String)] = []) -> MHD_Result {
        var problem: Problem
        var headers = headers
        if let known = error as? Problem {
            problem = known
        } else if let known = error as? RouteError {
            problem = known.problem
            headers += known.headers
        } else {
            problem = Self.diskFull(error, requestID: context.requestID)
                ?? Problem(.internalError, detail: "the server failed; its log has request \(context.requestID)")
            logger.error("\(context.method) \(context.path) request \(context.requestID) failed: \(error)")
        }
        problem.requestId = context.requestID
        if problem.status >= 500 {
            logger.error("\(context.method) \(context.path) \(problem.status) \(problem.code) request \(context.requestID): \(problem.detail)")
        } else {
            logger.info("\(context.method) \(context.path) \(problem.status) \(problem.code) request \(context.requestID): \(problem.detail)")
        }
        var response = Response(status: problem.status, contentType: "application/problem+json", headers: headers,
                                body: .bytes(problem.jsonBytes))
        if problem.status == 401 { response.headers.append(("WWW-Authenticate", "Bearer realm=\"sinki\"")) }
        return answer(context, connection, response)
    }

    /// A failure because the server's disk (or its user's disk quota) is full: `507 disk-full`, which
    /// clients take as "not now" (an agent keeps its changes and asks again later, and status says
    /// why) where a 500 says only that the server failed. The detail names no server path: the log
    /// has the error.
    static func diskFull(_ error: any Error, requestID: String) -> Problem? {
        let full: Bool
        switch error {
        case let system as SystemError: full = system.errno == ENOSPC || system.errno == EDQUOT
        case let sqlite as SQLiteError: full = sqlite.isFull
        default: full = false
        }
        return full ? Problem(.diskFull, detail: "the server's disk is full; try again once it has room (its log has request \(requestID))") : nil
    }

    /// Each connection's memory pool (`MHD_OPTION_CONNECTION_MEMORY_LIMIT`): request line, headers and
    /// the read buffer bodies stream through. libmicrohttpd 0.9.75 zeroes the whole pool after every
    /// request on a keep-alive connection, so its size is paid per request: at 512 KiB that `memset`
    /// was a fifth of the server's CPU under the load benchmark, and 200 idle connections held 100 MiB.
    static let connectionMemory = 128 * 1024

    /// How much of a streamed body libmicrohttpd asks for at a time (its buffer for the response).
    private static let streamBlockSize = 256 * 1024

    /// Bodies up to this size are copied into libmicrohttpd; larger ones are lent to it in place.
    private static let copyLimit = 16 * 1024

    private func answer(_ context: RequestContext, _ connection: Connection, _ response: Response) -> MHD_Result {
        let made: OpaquePointer?
        switch response.body {
        case let .bytes(bytes) where bytes.count <= Self.copyLimit:
            made = bytes.withUnsafeBytes { buffer in
                MHD_create_response_from_buffer(buffer.count, UnsafeMutableRawPointer(mutating: buffer.baseAddress), .RESPMEM_MUST_COPY)
            }
        case let .file(fd, offset, length):
            made = MHD_create_response_from_fd_at_offset64(UInt64(length), fd, UInt64(offset))
            if made == nil { close(fd) }
        case let .stream(source, length):
            let box = Unmanaged.passRetained(SourceBox(source))
            made = MHD_create_response_from_callback(
                UInt64(length), Self.streamBlockSize,
                { cls, position, buffer, most in
                    let source = Unmanaged<SourceBox>.fromOpaque(cls!).takeUnretainedValue().source
                    guard let buffer, most > 0 else { return sinki_mhd_reader_error }
                    let got = try? source.read(at: Int64(position), into: UnsafeMutableRawBufferPointer(start: buffer, count: most))
                    return got.map { $0 > 0 ? $0 : sinki_mhd_reader_error } ?? sinki_mhd_reader_error
                },
                box.toOpaque(), { cls in Unmanaged<SourceBox>.fromOpaque(cls!).release() })
            if made == nil { box.release() }
        case let .live(first, source):
            let box = Unmanaged.passRetained(LiveBody(server: self, context: context, connection: connection, first: first, source: source))
            // Unknown length: libmicrohttpd sends it chunked (HTTP/1.1) or ends it by closing (HTTP/1.0).
            made = MHD_create_response_from_callback(
                UInt64.max, Self.streamBlockSize,
                { cls, _, buffer, most in
                    let live = Unmanaged<LiveBody>.fromOpaque(cls!).takeUnretainedValue()
                    guard let buffer, most > 0 else { return sinki_mhd_reader_error }
                    return live.server.read(live, into: UnsafeMutableRawBufferPointer(start: buffer, count: most))
                },
                box.toOpaque(), { cls in Unmanaged<LiveBody>.fromOpaque(cls!).release() })
            if made == nil { box.release() }
        case let .bytes(bytes):
            let pinned = Unmanaged.passRetained(PinnedBytes(bytes))
            made = MHD_create_response_from_buffer_with_free_callback_cls(
                bytes.count, UnsafeMutableRawPointer(mutating: pinned.takeUnretainedValue().base),
                { cls in Unmanaged<PinnedBytes>.fromOpaque(cls!).release() }, pinned.toOpaque())
            if made == nil { pinned.release() }
        }
        guard let made else {
            logger.error("request \(context.requestID): libmicrohttpd could not make a response; closing the connection")
            return MHD_Result.NO
        }
        if let token = context.tokenID { limiter.charge(token, bytes: response.body.count) }
        defer { MHD_destroy_response(made) }
        _ = MHD_add_response_header(made, "X-Request-Id", context.requestID)
        if let type = response.contentType { _ = MHD_add_response_header(made, "Content-Type", type) }
        for (name, value) in context.routeHeaders { _ = MHD_add_response_header(made, name, value) }
        for (name, value) in response.headers { _ = MHD_add_response_header(made, name, value) }
        if logger.isEnabled(.debug) {
            let milliseconds = Double(Clock.monotonic() - context.started) / 1_000_000
            logger.debug("\(context.method) \(context.path) \(response.status) \(milliseconds.formatted2) ms request \(context.requestID)")
        }
        return MHD_queue_response(connection.raw, UInt32(response.status), made)
    }

    /// libmicrohttpd asks a live body for more: what its source has, or, when it has nothing yet, the
    /// connection parks in the hub (suspended from inside this callback, which libmicrohttpd allows) and
    /// 0 tells libmicrohttpd to ask again once it is resumed. Its deadline, a hang-up, a revoked token or
    /// the server stopping end the body cleanly; the client asks again from the last page it read.
    fileprivate func read(_ live: LiveBody, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        while true {
            if live.offset < live.pending.count {
                let count = min(buffer.count, live.pending.count - live.offset)
                live.pending.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[live.offset..<(live.offset + count)])) }
                live.offset += count
                return count
            }
            if live.ended { return sinki_mhd_reader_end }
            if live.parked {
                live.parked = false
                if live.context.wakeSlot.reason != .changed {
                    live.ended = true
                    continue
                }
            }
            let source = live.source
            let generation = hub.generation(of: source.user)
            do {
                switch try source.next() {
                case let .bytes(bytes):
                    live.pending = bytes
                    live.offset = 0
                    if let token = live.context.tokenID { limiter.charge(token, bytes: bytes.count) }
                    if logger.isEnabled(.debug) {
                        logger.debug("\(live.context.method) \(live.context.path) goes on: \(bytes.count) bytes request \(live.context.requestID)")
                    }
                    continue
                case .end:
                    live.ended = true
                    continue
                case .wait:
                    break
                }
            } catch {
                logger.error("\(live.context.method) \(live.context.path) request \(live.context.requestID) cut mid-answer: \(error)")
                return sinki_mhd_reader_error
            }
            if Clock.monotonic() >= source.deadline {
                live.ended = true
                continue
            }
            if !live.context.countedAsParked {
                live.context.countedAsParked = true
                parkedRequests.enter()
            }
            let connection = live.connection
            switch hub.park(user: source.user, token: source.token, seen: generation, deadline: source.deadline,
                            socket: sinki_mhd_connection_fd(connection.raw), slot: live.context.wakeSlot,
                            suspend: connection.suspend, resume: connection.resume) {
            case .parked:
                live.parked = true
                return 0
            case .changed:
                continue
            case .stopping, .revoked:
                live.ended = true
            }
        }
    }

    /// The client's X-Request-Id when it is a sane token (so one id follows a change from agent to
    /// server log), else a fresh one.
    private static func requestID(from header: String?) -> String {
        if let header, (1...64).contains(header.utf8.count),
           header.utf8.allSatisfy({ $0 < 0x80 && (isalnum(Int32($0)) != 0 || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ".")) }) {
            return header
        }
        return RandomID.hex(bytes: 8)
    }
}

/// A streamed body's source, retained for libmicrohttpd until its free callback.
private final class SourceBox {
    let source: any ContentSource
    init(_ source: any ContentSource) { self.source = source }
}

/// A live body between libmicrohttpd's calls (`ResponseBody.live`), retained for it until its free
/// callback. Used by the worker thread of its connection only.
private final class LiveBody {
    let server: HTTPServer
    let context: RequestContext
    let connection: Connection
    let source: any LiveSource
    /// What is being sent, from `offset`.
    var pending: [UInt8]
    var offset = 0
    /// Parked in the hub since the last call: the wake slot says why it came back.
    var parked = false
    var ended = false

    init(server: HTTPServer, context: RequestContext, connection: Connection, first: [UInt8], source: any LiveSource) {
        self.server = server
        self.context = context
        self.connection = connection
        pending = first
        self.source = source
    }
}

/// A response body lent to libmicrohttpd without a copy: it reads `bytes` in place until it calls the
/// free callback, which releases this box.
private final class PinnedBytes {
    let bytes: [UInt8]
    let base: UnsafeRawPointer

    init(_ bytes: [UInt8]) {
        precondition(!bytes.isEmpty, "bug: pinning an empty body")
        self.bytes = bytes
        // The pointer is used after withUnsafeBytes returns. That holds here because `bytes` is an
        // immutable native array owned by this box: its storage neither moves nor goes away until the box
        // is released, which libmicrohttpd does only when it is done with the response.
        base = bytes.withUnsafeBytes { $0.baseAddress! }
    }
}

extension Double {
    /// Two decimals, for log lines.
    var formatted2: String {
        let hundredths = (self * 100).rounded()
        let whole = Int(hundredths / 100)
        let fraction = Int(abs(hundredths).truncatingRemainder(dividingBy: 100))
        return "\(whole).\(fraction < 10 ? "0" : "")\(fraction)"
    }
}
