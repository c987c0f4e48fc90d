import CMicroHTTPD
import SinkiRecord

/// Who a request speaks for: the user whose records it reaches, the device the token was given to,
/// and what the token may do.
public struct ServerIdentity: Sendable, Equatable, Hashable {
    public var user: String
    public var device: String
    /// The token's id (nil when the server runs without tokens).
    public var tokenID: String?
    /// The first token of its chain of refreshes (the upload count is the chain's).
    public var chainID: String?
    public var scope: TokenScope

    public init(user: String, device: String, tokenID: String? = nil, chainID: String? = nil, scope: TokenScope = .full) {
        self.user = user
        self.device = device
        self.tokenID = tokenID
        self.chainID = chainID
        self.scope = scope
    }

    /// Everyone, when the server runs without tokens.
    public static let anonymous = ServerIdentity(user: "default", device: "default")
}

/// A libmicrohttpd connection, valid while libmicrohttpd calls the server about one of its requests.
struct Connection: @unchecked Sendable {
    // @unchecked: the pointer is only dereferenced by libmicrohttpd. Every call but `resume()` is made on
    // the worker thread serving the connection; MHD_resume_connection may be called from any thread, and
    // the waiter hub calls it exactly once per suspension, while the connection is suspended and alive.
    let raw: OpaquePointer

    func header(_ name: String) -> String? {
        MHD_lookup_connection_value(raw, .HEADER_KIND, name).map { String(cString: $0) }
    }

    /// Every value of header `name` (ASCII case ignored), in the order sent: a field sent twice is two.
    func headers(_ name: String) -> [String] {
        let found = HeaderValues(name: name.lowercased())
        let box = Unmanaged.passRetained(found)
        defer { box.release() }
        _ = MHD_get_connection_values(raw, .HEADER_KIND, { cls, _, key, value in
            let found = Unmanaged<HeaderValues>.fromOpaque(cls!).takeUnretainedValue()
            if let key, String(cString: key).lowercased() == found.name { found.values.append(value.map { String(cString: $0) } ?? "") }
            return MHD_Result.YES
        }, box.toOpaque())
        return found.values
    }

    /// A query argument, percent-decoded; `.invalid` when its bytes are not UTF-8.
    func argument(_ name: String) -> Argument {
        var value: UnsafePointer<CChar>?
        var size = 0
        guard MHD_lookup_connection_value_n(raw, .GET_ARGUMENT_KIND, name, name.utf8.count, &value, &size) == .YES else {
            return .absent
        }
        guard let value else { return .present("") }
        let bytes = UnsafeRawBufferPointer(start: value, count: size).bindMemory(to: UInt8.self)
        guard let text = String(validating: bytes, as: UTF8.self) else { return .invalid }
        return .present(text)
    }

    enum Argument: Equatable {
        case absent
        case present(String)
        case invalid
    }

    func suspend() { MHD_suspend_connection(raw) }
    func resume() { MHD_resume_connection(raw) }
}

/// One request as a route sees it. The body is filled in when it is buffered (`BodyPolicy.buffer`).
struct Request {
    let method: String
    let path: String
    /// The rest of the path after a prefix route (`/v1/uploads/ID` gives `ID`); empty for exact routes.
    let pathParameter: String
    let requestID: String
    let identity: ServerIdentity
    let connection: Connection
    var body: [UInt8] = []
    /// The sink the body streamed into (`BodyPolicy.stream`), for `respond`.
    var sink: (any BodySink)?
    /// The parser the body went through (`BodyPolicy.parse`), for `respond`.
    var parser: (any BodyParser)?

    func header(_ name: String) -> String? { connection.header(name) }

    /// The agent run a modify request saves for (`Sinki-Origin`); nil when not given.
    func saveOrigin() throws(Problem) -> SaveOrigin? { try SaveOrigin.fromWire(header(SaveOrigin.header), named: SaveOrigin.header) }

    /// A query argument; nil when absent. Bytes that are not UTF-8 answer `400 bad-request`.
    func query(_ name: String) throws(Problem) -> String? {
        switch connection.argument(name) {
        case .absent: return nil
        case let .present(text): return text
        case .invalid: throw Problem(.badRequest, detail: "query argument \(name) is not valid UTF-8")
        }
    }

    /// An integer query argument within `range`, `fallback` when absent or empty.
    func integerQuery(_ name: String, in range: ClosedRange<Int>, default fallback: Int) throws(Problem) -> Int {
        guard let text = try query(name), !text.isEmpty else { return fallback }
        guard let value = Int(text), range.contains(value) else {
            throw Problem(.badRequest, detail: "\(name) must be an integer from \(range.lowerBound) to \(range.upperBound), not \(quoted(text))")
        }
        return value
    }

    /// A yes-or-no query argument (`1`/`true`, `0`/`false`), false when absent or empty.
    func flagQuery(_ name: String) throws(Problem) -> Bool {
        switch try query(name) {
        case nil, "", "0", "false": return false
        case "1", "true": return true
        case let other?: throw Problem(.badRequest, detail: "\(name) must be 0 or 1, not \(quoted(other))")
        }
    }

    /// The declared body size, nil when the body is chunked or absent.
    var contentLength: Int? { header("Content-Length").flatMap { Int($0) } }
}

/// What a response carries.
enum ResponseBody {
    case bytes([UInt8])
    /// `length` bytes of an open file from `offset`, sent by libmicrohttpd straight from the descriptor
    /// (sendfile), which it owns and closes from here on.
    case file(fd: Int32, offset: Int64, length: Int64)
    /// `length` bytes read from `source` piece by piece as libmicrohttpd sends them (a manifest asset
    /// from its chunk files): nothing is built whole on disk or in memory.
    case stream(any ContentSource, length: Int64)
    /// `first`, then whatever `source` has as libmicrohttpd asks for more, in chunked encoding: an answer
    /// that goes on while there is news (a streamed feed), parked in the waiter hub between them.
    case live(first: [UInt8], any LiveSource)
}

extension ResponseBody {
    /// Bytes it sends.
    var count: Int {
        switch self {
        case let .bytes(bytes): return bytes.count
        case let .file(_, _, length), let .stream(_, length): return Int(clamping: length)
        case let .live(first, _): return first.count
        }
    }
}

/// A response body libmicrohttpd pulls as it sends. Used by the worker thread of its connection only.
protocol ContentSource: AnyObject {
    /// Copies the body's bytes from `offset` (counted from the body's start) into `buffer`, at least one
    /// and at most `buffer.count`; returns how many. Throwing ends the answer mid-body: the connection
    /// closes and the client, short of `Content-Length`, asks again.
    func read(at offset: Int64, into buffer: UnsafeMutableRawBufferPointer) throws -> Int
}

/// What a live body's source has when libmicrohttpd asks for more (`ResponseBody.live`).
enum LiveStep {
    /// More to send.
    case bytes([UInt8])
    /// Nothing yet: the connection parks until a commit for the source's user or its deadline.
    case wait
    /// The body is complete.
    case end
}

/// Where a live body's bytes after its first come from. Used by the worker thread of its connection only.
protocol LiveSource: AnyObject {
    /// Whose commits wake it.
    var user: String { get }
    /// The token it is read under: revoking it ends the body.
    var token: String? { get }
    /// Monotonic nanoseconds: the body ends here.
    var deadline: Int64 { get }
    /// What there is now. Throwing ends the body mid-way: the connection closes and the client, short of
    /// the last chunk, asks again.
    func next() throws -> LiveStep
}

struct Response {
    var status: Int
    var contentType: String?
    var headers: [(String, String)] = []
    var body: ResponseBody

    static func json(_ bytes: [UInt8], status: Int = 200) -> Response {
        Response(status: status, contentType: "application/json", body: .bytes(bytes))
    }
}

/// Takes a request body chunk by chunk as it arrives, for routes that must not hold it in memory
/// (tus `PATCH /v1/uploads/ID`).
protocol BodySink: AnyObject {
    /// Takes the next chunk. Throwing (a `Problem`, typically) refuses the rest of the body; the
    /// request is answered with that problem once the client has finished sending.
    func write(_ chunk: UnsafeRawBufferPointer) throws
    /// The request ended before the route answered it (the client hung up, a timeout, the server
    /// stopping). Called once libmicrohttpd is done with the request, after a `respond` too, so it
    /// must do nothing when the route already settled the body.
    func abandon()
}

/// An error answered with extra headers (`412` with `Tus-Version`, `416` with `Content-Range`).
struct RouteError: Error {
    var problem: Problem
    var headers: [(String, String)]

    init(_ problem: Problem, headers: [(String, String)]) {
        self.problem = problem
        self.headers = headers
    }
}

/// How a route takes its request body, decided when the headers arrive.
enum BodyPolicy {
    /// The route takes no body; any that comes is read and dropped.
    case none
    /// Collected in memory into `Request.body`, up to `limit` bytes (`413 too-large` beyond, at once when
    /// Content-Length says so).
    case buffer(limit: Int)
    /// Handed to the sink as it arrives.
    case stream(any BodySink)
    /// Read by the parser as it arrives, up to `limit` bytes (as `buffer`, and budgeted the same way),
    /// never held whole; the route takes what it made of it from `Request.parser`.
    case parse(limit: Int, any BodyParser)
}

extension BodyPolicy {
    /// The limit of a body held in memory while its request runs (buffered or parsed), nil for others.
    var heldLimit: Int? {
        switch self {
        case let .buffer(limit), let .parse(limit, _): return limit
        case .none, .stream: return nil
        }
    }
}

/// A body read as it arrives (`BodyPolicy.parse`). Used by the worker thread of its connection only.
protocol BodyParser: AnyObject {
    /// Takes the next chunk. Throwing (a `Problem`) refuses the rest of the body; the request is
    /// answered with that problem once the client has finished sending.
    func take(_ chunk: UnsafeRawBufferPointer) throws
}

/// A long-poll: the route has nothing to say yet and the connection is parked (suspended, holding no
/// thread) until a commit for `user`, the deadline, or the server stopping.
struct LongPoll {
    let user: String
    /// The token it waits under: revoking it answers the poll `401` at once.
    let token: String?
    /// Monotonic nanoseconds (`Clock.monotonic()`).
    let deadline: Int64
    /// The answer once there is something to say; nil keeps waiting.
    let poll: () throws -> Response?
    /// The answer when the time is up or the server stops.
    let expire: () throws -> Response
}

/// What a route answers once the request is in.
enum Reply {
    case response(Response)
    case longPoll(LongPoll)
}

/// One endpoint. Routes check requests and hand them on to the store; they run on the server's worker
/// threads and must not block for long (waiting is what `Reply.longPoll` is for).
protocol Route: Sendable {
    /// The headers are in: check them and say how to take the body. Throwing answers at once.
    func begin(_ request: Request) throws -> BodyPolicy
    /// The body is in (buffered or streamed): answer.
    func respond(to request: Request) throws -> Reply
    /// Headers sent with every answer of this route, errors included (tus: `Tus-Resumable`).
    var commonHeaders: [(String, String)] { get }
}

extension Route {
    func begin(_ request: Request) throws -> BodyPolicy { .none }
    var commonHeaders: [(String, String)] { [] }
}

/// The values `Connection.headers` collects, passed through libmicrohttpd's iterator.
private final class HeaderValues {
    let name: String
    var values: [String] = []
    init(name: String) { self.name = name }
}

extension SaveOrigin {
    /// An origin as a request gives it (the header, or the feed's `omitOrigin`): nil when absent or
    /// empty, `400 bad-request` naming `field` when malformed.
    static func fromWire(_ text: String?, named field: String) throws(Problem) -> SaveOrigin? {
        guard let text, !text.isEmpty else { return nil }
        guard let origin = SaveOrigin(validating: text) else {
            throw Problem(.badRequest, detail: "\(field) must be 16 to 64 of [0-9a-z-], not \(quoted(text))", field: field)
        }
        return origin
    }
}
