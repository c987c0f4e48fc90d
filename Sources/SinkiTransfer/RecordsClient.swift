import SinkiLoop
import SinkiRecord
import SinkiSupport

/// Why a call to the sync server failed.
public enum SyncError: Error, Sendable, CustomStringConvertible {
    /// The server could not be reached or the connection broke.
    case transport(TransferError)
    /// The server answered with an error document.
    case problem(Problem)
    /// The server answered something that is not the protocol.
    case badResponse(String)
    /// `429 Too Many Requests`: try again after the seconds of its `Retry-After` (nil: none given).
    case rateLimited(Problem?, retryAfterSeconds: Int?)

    public var description: String {
        switch self {
        case let .transport(error): return "\(error)"
        case let .problem(problem): return "server: \(problem)"
        case let .badResponse(detail): return "server answered outside the protocol: \(detail)"
        case let .rateLimited(problem, seconds):
            return "server: too many requests" + (seconds.map { ", retry after \($0) s" } ?? "") + (problem.map { " (\($0.detail))" } ?? "")
        }
    }

    /// What went wrong, without the URL (`TransferError.cause`): the server is named once by whoever
    /// says it.
    public var cause: String {
        if case let .transport(error) = self { return error.cause }
        return description
    }

    /// The server refused this device's token (401: unknown, revoked or expired; 403: beyond its scope):
    /// nothing sent with it can get through until the token changes.
    public var refusesToken: Bool {
        if case let .problem(problem) = self { return problem.status == 401 || problem.status == 403 }
        return false
    }

    /// The server does not know our change token any more: start the feed over.
    public var isStaleToken: Bool {
        if case let .problem(problem) = self { return problem.code == ProblemKind.badToken.code || problem.code == ProblemKind.tokenExpired.code }
        return false
    }
}

/// A modify batch encoded for the wire, in frames or in JSON.
public struct ModifyBody: Sendable {
    public let frames: Bool
    public let bytes: [UInt8]

    /// Encodes `batch`: a pass over all its content, so a large one is made off the loop.
    public init(_ batch: ModifyRequest, frames: Bool) {
        self.frames = frames
        bytes = frames ? batch.framesBytes : batch.jsonBytes
    }
}

/// The records calls of docs/protocol.md over the agent's HTTP client, beside the tus client: every request
/// goes through one builder that adds the device's token. Loop-confined.
public final class SyncClient {
    public let http: HTTPClient
    public let base: String
    /// This device's bearer token; every request carries it (`request(_:_:)`).
    public var bearerToken: String?
    public let device: String
    /// This run's origin (`Sinki-Origin`): its saves carry it, and the feed it reads passes over them.
    /// Nil for a client that saves nothing it learns from the answer alone (the history commands).
    public let origin: SaveOrigin?

    public init(http: HTTPClient, base: String, token: String?, device: String, origin: SaveOrigin? = nil) {
        self.http = http
        self.base = base
        bearerToken = token
        self.device = device
        self.origin = origin
    }

    /// A request to `path` (a route of `Routes`, with its query) that carries this device's token: the one
    /// place requests to the sync server are made, so none goes out without authentication.
    func request(_ method: String, _ path: String, timeout: Double) -> HTTPRequest {
        var request = HTTPRequest(method: method, url: base + path, bearerToken: bearerToken)
        request.headers = headers
        request.timeout = timeout
        return request
    }

    private var headers: [(String, String)] {
        [("Accept", "application/json")]
    }

    // Every call takes the caller's isolation (the agent's actor, on the loop) so that libcurl is
    // only ever driven from the loop thread.

    /// Whether modify batches go in frames (`RecordFrames`): as the server last answered a page of records.
    /// A server older than frames answers JSON and is sent JSON; one that answers in frames takes them.
    public private(set) var sendsFrames = false

    /// Sends a modify batch whose body was built off the loop (`ModifyBody`), under this run's origin:
    /// the caller records every answer, so the feed need not bring these saves back.
    public func modify(_ body: ModifyBody, isolation: isolated (any Actor)? = #isolation) async throws(SyncError) -> ModifyResponse {
        try await send(body, origin: origin, isolation: isolation)
    }

    /// A batch of one or a few records, encoded here.
    public func modify(records: [Record], isolation: isolated (any Actor)? = #isolation) async throws(SyncError) -> ModifyResponse {
        // Without the origin: such a save (a conflict resolved, a record shared) comes back by the feed.
        try await send(ModifyBody(ModifyRequest(records: records), frames: sendsFrames), origin: nil, isolation: isolation)
    }

    private func send(_ body: ModifyBody, origin: SaveOrigin?, isolation: isolated (any Actor)?) async throws(SyncError) -> ModifyResponse {
        var request = request("POST", Routes.modify, timeout: 300)
        request.headers.append(("Content-Type", body.frames ? RecordFrames.mediaType : "application/json"))
        if let origin { request.headers.append((SaveOrigin.header, origin.text)) }
        request.body = .bytes(body.bytes)
        let response = try await send(request, isolation: isolation)
        return try await parse(response, isolation: isolation) { try ModifyResponse.parse($0) }
    }

    /// A request for records, which come in frames when the server has them so (their content raw).
    private func recordsRequest(_ path: String, timeout: Double) -> HTTPRequest {
        var request = request("GET", path, timeout: timeout)
        request.headers = [("Accept", RecordFrames.mediaType + ", application/json;q=0.5")]
        return request
    }

    private func parsePage(_ response: HTTPResponse, isolation: isolated (any Actor)?) async throws(SyncError) -> RecordPage {
        let contentType = response.header("Content-Type")
        sendsFrames = RecordFrames.names(contentType)
        return try await parse(response, isolation: isolation) { try RecordPage.parse($0, contentType: contentType) }
    }

    /// One page of the change feed; waits up to `wait` seconds on the server when nothing is new. With
    /// `inflight` (a position in the in-flight news, 0 at first), the page also tells of the files other
    /// devices are sending now, and a long-poll answers as soon as there is such news.
    public func changes(since position: String?, wait: Int, limit: Int, inflight: Int64? = nil,
                        isolation: isolated (any Actor)? = #isolation) async throws(SyncError) -> RecordPage {
        let request = changesRequest(since: position, wait: wait, limit: limit, inflight: inflight, stream: false)
        let response = try await send(request, isolation: isolation)
        return try await parsePage(response, isolation: isolation)
    }

    /// The change feed as streamed answers into `pages` (docs/protocol.md, "A feed that streams"): each a
    /// long-poll whose pages, from the first commit after its position on, come as each arrives until the
    /// server ends it (its `wait` up, its bytes sent); the next is asked for from the last page read,
    /// until one fails or `pages` is cancelled. Only a server that answers in frames streams
    /// (`sendsFrames`); one older than streams answers a single page, which comes the same way.
    public func streamFeed(wait: Int, limit: Int, into pages: FeedPages, isolation: isolated (any Actor)? = #isolation) async {
        var position: (since: String?, inflight: Int64?)? = pages.start
        while let (since, inflight) = position {
            let request = changesRequest(since: since, wait: wait, limit: limit, inflight: inflight, stream: true)
            let tap = HTTPTap(received: { _, bytes in pages.take(bytes) })
            let result: Result<Void, SyncError>
            do {
                let response = try await http.send(request, sink: .tap, tap: tap, isolation: isolation)
                result = response.isSuccess ? .success(()) : .failure(Self.failure(response, url: request.url))
            } catch {
                result = .failure(.transport(error))
            }
            position = await pages.end(result, isolation: isolation)
        }
    }

    private func changesRequest(since position: String?, wait: Int, limit: Int, inflight: Int64?, stream: Bool) -> HTTPRequest {
        var path = Routes.changes + "?limit=\(limit)&wait=\(wait)&omitDataFrom=" + Self.escape(device)
        if let origin { path += "&\(SaveOrigin.query)=" + origin.text }
        if let position, !position.isEmpty { path += "&since=" + Self.escape(position) }
        if let inflight { path += "&inflight=\(inflight)" }
        if stream { path += "&stream=1" }
        // The server ends a long-poll (and a stream) by `wait`: one still silent a little after is on a dead connection.
        return recordsRequest(path, timeout: wait == 0 ? 300 : Double(wait) + Self.longPollMargin)
    }

    /// The current record at exactly `path`, with its content.
    public func record(at path: String, isolation: isolated (any Actor)? = #isolation) async throws(SyncError) -> Record? {
        let request = recordsRequest(Routes.records + "?limit=1&data=1&path=" + Self.escape(path), timeout: 300)
        let response = try await send(request, isolation: isolation)
        let page = try await parsePage(response, isolation: isolation)
        // By bytes: a look-up answer with another spelling of the name (NFC, NFD) is another path.
        return page.records.first { $0.path.utf8.elementsEqual(path.utf8) }
    }

    /// One page of the records at `prefix` or below, in bytewise path order after `after`, without
    /// content; its token is the feed position before the page was read.
    public func list(prefix: String, after: String?, limit: Int, isolation: isolated (any Actor)? = #isolation) async throws(SyncError) -> RecordPage {
        var query = Routes.records + "?limit=\(limit)&path=" + Self.escape(prefix)
        if let after { query += "&after=" + Self.escape(after) }
        let request = recordsRequest(query, timeout: 300)
        let response = try await send(request, isolation: isolation)
        return try await parsePage(response, isolation: isolation)
    }

    /// The digests of folder `path` (a root name or a folder's record path) as the server holds them,
    /// with those of the folders directly in it when `children` is set (docs/protocol.md, "Digests").
    public func digests(of path: String, children: Bool, isolation: isolated (any Actor)? = #isolation) async throws(SyncError) -> DigestReply {
        let request = request("GET", Routes.digests + "?path=" + Self.escape(path) + (children ? "&children=1" : ""), timeout: 60)
        let response = try await send(request, isolation: isolation)
        return try await parse(response, isolation: isolation) { try DigestReply.parse($0) }
    }

    /// Which of `chunks` (SHA-256 names) the server lacks, in the order asked; at most
    /// `ChunkNamesRequest.mostToCheck` names a request (the caller splits longer lists).
    public func missingChunks(_ chunks: [String], isolation: isolated (any Actor)? = #isolation) async throws(SyncError) -> [String] {
        var request = request("POST", Routes.missingChunks, timeout: 300)
        request.headers.append(("Content-Type", "application/json"))
        request.body = .bytes(ChunkNamesRequest(chunks: chunks).jsonBytes)
        let response = try await send(request, isolation: isolation)
        return try await parse(response, isolation: isolation) { try MissingChunksResponse.parse($0).missing }
    }

    /// Tells the server which chunks of a large file this device has uploaded so far (docs/protocol.md,
    /// "Files in flight"), so that other devices fetch them while the rest is sent.
    public func announce(_ announcement: InFlightAnnouncement, isolation: isolated (any Actor)? = #isolation) async throws(SyncError) {
        var request = request("POST", Routes.inflight, timeout: 60)
        request.headers.append(("Content-Type", "application/json"))
        request.body = .bytes(announcement.jsonBytes)
        _ = try await send(request, isolation: isolation)
    }

    /// A chunk's bytes as the server holds them (checked by the caller against the name).
    public func chunk(_ name: String, maxBytes: Int, isolation: isolated (any Actor)? = #isolation) async throws(SyncError) -> [UInt8] {
        var request = request("GET", Routes.chunks + name, timeout: 300)
        request.headers = [("Accept", "application/octet-stream")]
        let response: HTTPResponse
        do { response = try await http.send(request, sink: .memory(limit: maxBytes), isolation: isolation) } catch { throw .transport(error) }
        guard (200..<300).contains(response.status) else { throw Self.failure(response, url: request.url) }
        return response.body
    }

    /// Tells the server that a chunk's bytes do not hash to its name: it checks and removes it if so.
    /// True when it was removed.
    public func reportDamagedChunk(_ name: String, isolation: isolated (any Actor)? = #isolation) async throws(SyncError) -> Bool {
        let request = request("DELETE", Routes.chunks + name, timeout: 300)
        do {
            _ = try await send(request, isolation: isolation)
            return true
        } catch let .problem(problem) where problem.code == ProblemKind.chunkIntact.code {
            return false
        }
    }

    /// Bad gateway, service unavailable, gateway timeout.
    static let gatewayStatuses: Set<Int> = [502, 503, 504]

    /// Seconds a long-poll may outlast its `wait` (the server's clock, the round trip) before it counts as lost.
    public static let longPollMargin = 15.0

    func send(_ request: HTTPRequest, isolation: isolated (any Actor)?) async throws(SyncError) -> HTTPResponse {
        let response: HTTPResponse
        do { response = try await http.send(request, isolation: isolation) } catch { throw .transport(error) }
        guard (200..<300).contains(response.status) else { throw Self.failure(response, url: request.url) }
        return response
    }

    /// The error an answer outside 2xx stands for.
    static func failure(_ response: HTTPResponse, url: String) -> SyncError {
        let retryAfter = response.header("Retry-After").flatMap { Int($0.filter { $0 != " " }) }.map { max(0, $0) }
        if response.status == 503, let retryAfter, Problem.parse(response.body)?.code == ProblemKind.unavailable.code {
            // The server itself, busy (its bodies' budget full): wait as it says, as for a rate limit.
            return .rateLimited(Problem.parse(response.body), retryAfterSeconds: retryAfter)
        }
        if Self.gatewayStatuses.contains(response.status) {
            // A proxy in front answering for a server it cannot reach (restarting, say), or a server
            // shutting down: out of reach like a refused connection, so tried again with backoff. As a
            // problem it was sent again at once, thousands of times a second behind nginx.
            let detail = Problem.parse(response.body).map { "HTTP \(response.status): \($0.detail)" }
                ?? "HTTP \(response.status) (a proxy in front cannot reach the server)"
            return .transport(.unreachable(url: url, detail: detail))
        }
        if response.status == 429 { return .rateLimited(Problem.parse(response.body), retryAfterSeconds: retryAfter) }
        if let problem = Problem.parse(response.body) { return .problem(problem) }
        return .badResponse("HTTP \(response.status) from \(url)")
    }

    /// Parses a body off the loop: a feed page can be tens of megabytes.
    func parse<T: Sendable>(_ response: HTTPResponse, isolation: isolated (any Actor)?, _ parser: @escaping @Sendable ([UInt8]) throws -> T) async throws(SyncError) -> T {
        let body = response.body
        do {
            if body.count < 256 * 1024 { return try parser(body) }
            return try await Blocking.run { try parser(body) }
        } catch {
            throw .badResponse("\(error)")
        }
    }

    static func escape(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = Array("0123456789ABCDEF")
                out += "%" + String(hex[Int(byte >> 4)]) + String(hex[Int(byte & 15)])
            }
        }
        return out
    }
}
