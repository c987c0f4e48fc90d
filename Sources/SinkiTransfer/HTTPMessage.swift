/// What `HTTPClient.send` sends: one HTTP request, with its limits.
public struct HTTPRequest: Sendable {
    public var method: String
    public var url: String
    /// Extra request headers in order, as `(name, value)`. A name or value holding CR or LF is refused.
    public var headers: [(String, String)]
    public var body: HTTPBody
    /// Sent as `Authorization: Bearer TOKEN` (surrounding whitespace, such as a token file's final
    /// newline, is dropped). Never logged.
    public var bearerToken: String?
    /// Whole-transfer limit in seconds, connecting included; 0: none (a long-poll sets its own).
    public var timeout: Double
    /// Limit for establishing the connection, in seconds; 0: libcurl's default (300 s).
    public var connectTimeout: Double
    /// Gives up when fewer than one byte per second moved for this many seconds; 0: never. For uploads
    /// and downloads, not for long-polls, which are silent by design.
    public var stallTimeout: Double

    public init(method: String = "GET", url: String, headers: [(String, String)] = [], body: HTTPBody = .none,
                bearerToken: String? = nil, timeout: Double = 0, connectTimeout: Double = 10, stallTimeout: Double = 0) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.bearerToken = bearerToken
        self.timeout = timeout
        self.connectTimeout = connectTimeout
        self.stallTimeout = stallTimeout
    }
}

/// A request body.
public enum HTTPBody: Sendable {
    case none
    /// Sent straight from the array (libcurl's read callback copies from it piece by piece).
    case bytes([UInt8])
    /// `length` bytes of the file at `path` from `offset`, streamed from disk, never loaded whole.
    case file(path: String, offset: Int64, length: Int64)
    /// The arrays one after another, as one body, never joined in memory (chunks and their frames' headers).
    case parts([[UInt8]])

    /// The byte count announced in `Content-Length`.
    public var length: Int64 {
        switch self {
        case .none: 0
        case .bytes(let bytes): Int64(bytes.count)
        case .file(_, _, let length): length
        case .parts(let parts): Int64(parts.reduce(0) { $0 + $1.count })
        }
    }
}

/// Where a response body goes.
public enum HTTPResponseSink: Sendable {
    /// Kept in memory; a body over `limit` bytes fails the transfer with `TransferError.tooLarge`.
    case memory(limit: Int)
    /// Streamed into the file at `path` (created when missing), for downloads. With `offset` > 0 the
    /// request asks for `Range: bytes=OFFSET-` and a `206` answer is written from `offset` on; a server
    /// that ignores the range answers `200` and the whole body is written from 0. Either way the file
    /// ends where the body ends. Only 2xx bodies reach the file: any other answer's body (a
    /// problem+json, say) comes back in `HTTPResponse.body`, up to 1 MiB, and the file is untouched.
    case file(path: String, offset: Int64)
    /// A 2xx body goes to the tap's `received` as it arrives and is kept nowhere (an answer read piece
    /// by piece as it streams); any other answer's body comes back in `HTTPResponse.body`, up to 1 MiB.
    case tap
}

/// A response of any status: non-2xx answers are responses, not errors, at this layer.
public struct HTTPResponse: Sendable {
    public var status: Int
    /// The final response's headers in order, names as the server spelled them.
    public var headers: [(String, String)]
    /// The body, for a memory sink or a non-2xx answer; empty when the body went to a file.
    public var body: [UInt8]

    public init(status: Int, headers: [(String, String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The first header named `name`, compared without regard to ASCII case.
    public func header(_ name: String) -> String? {
        let wanted = name.lowercased()
        return headers.first { $0.0.lowercased() == wanted }?.1
    }

    public var isSuccess: Bool { (200..<300).contains(status) }
}

/// Sees the bytes a transfer moves, with their offsets in the file, on the loop: a file body's as libcurl
/// reads them (a resend after a rewind reads some again), a file download's as they are written. For
/// hashing while the bytes stream, without a second read of the file.
public struct HTTPTap {
    public var sent: ((Int64, UnsafeRawBufferPointer) -> Void)?
    public var received: ((Int64, UnsafeRawBufferPointer) -> Void)?

    public init(sent: ((Int64, UnsafeRawBufferPointer) -> Void)? = nil, received: ((Int64, UnsafeRawBufferPointer) -> Void)? = nil) {
        self.sent = sent
        self.received = received
    }
}
