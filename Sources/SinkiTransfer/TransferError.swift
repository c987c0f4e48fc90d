import CCurl
import SinkiSupport

/// Why a transfer failed. Non-2xx answers are not errors here: they come back as responses.
public enum TransferError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No connection could be made: refused, no route, name not resolved; or (`SyncClient`) a proxy in
    /// front answered 502, 503 or 504 for the server.
    case unreachable(url: String, detail: String)
    /// The request's `timeout`, `connectTimeout` or `stallTimeout` ran out.
    case timedOut(url: String, detail: String)
    /// The connection broke after it was made: reset, closed early, nothing answered.
    case connectionLost(url: String, detail: String)
    /// The awaiting task was cancelled; the transfer was removed from libcurl.
    case cancelled
    /// The response body was bigger than the memory sink's limit.
    case tooLarge(url: String, limit: Int)
    /// Reading the body file or writing the response file failed.
    case io(SystemError)
    /// The body file ended before the announced length: it changed while it was being sent.
    case bodyShrank(path: String, expected: Int64)
    /// The request could not be built (a header with a line break, a bad body range).
    case invalidRequest(String)
    /// The server answered in a way the request cannot use (a `Content-Range` that does not start
    /// where the download resumes).
    case badResponse(url: String, detail: String)
    /// Any other libcurl failure (TLS, malformed URL, ...), with libcurl's code and message.
    case curl(code: Int, message: String, url: String)

    public var description: String {
        switch self {
        case .unreachable(let url, _): "cannot reach \(Self.place(url)): \(cause)"
        case .timedOut(let url, _): "timed out: \(Self.place(url)): \(cause)"
        case .connectionLost(let url, _): "connection lost: \(Self.place(url)): \(cause)"
        case .tooLarge(let url, _), .badResponse(let url, _), .curl(_, _, let url): "\(Self.place(url)): \(cause)"
        case .cancelled, .io, .bodyShrank, .invalidRequest: cause
        }
    }

    /// What went wrong without where: libcurl's words for a failed connection, the rest as the
    /// description says it (status lines and `sinkid status` name the server once, themselves).
    public var cause: String {
        switch self {
        case .unreachable(_, let detail):
            // "Failed to connect to HOST port P after N ms: Couldn't connect to server (Connection refused)":
            // the host and port are the server's, named beside this; the system's reason is the news.
            if detail.hasPrefix("Failed to connect"), detail.hasSuffix(")"), let open = detail.lastIndex(of: "(") {
                String(detail[detail.index(after: open)..<detail.index(before: detail.endIndex)]).lowercased()
            } else {
                detail
            }
        case .timedOut(_, let detail), .connectionLost(_, let detail): detail
        case .cancelled: "transfer cancelled"
        case .tooLarge(_, let limit): "the response is larger than the \(limit)-byte limit"
        case .io(let error): error.description
        case .bodyShrank(let path, let expected): "\(path) changed while being sent: it is shorter than the \(expected) bytes announced"
        case .invalidRequest(let detail): "invalid request: \(detail)"
        case .badResponse(_, let detail): "unusable response: \(detail)"
        case .curl(let code, let message, _):
            "\(message) (libcurl error \(code))"
                + (isUntrustedCertificate ? "; a self-signed or private CA's certificate is trusted through [server] ca-file (sinkid upload: --ca-file)" : "")
        }
    }

    /// A URL as messages show it: without its query and fragment, which carry tokens, device names and
    /// feed positions that make a line long and say nothing to the reader.
    public static func place(_ url: String) -> String {
        String(url.prefix { $0 != "?" && $0 != "#" })
    }

    /// Whether trying again later may succeed (the network or the server, not the request, failed).
    public var isTemporary: Bool {
        switch self {
        case .unreachable, .timedOut, .connectionLost: true
        default: false
        }
    }

    /// The server's TLS certificate was not trusted, or the certificates to trust could not be read:
    /// a setting to fix (`ca-file`), not a fault to retry.
    public var isUntrustedCertificate: Bool {
        guard case let .curl(code, _, _) = self else { return false }
        return [Int(CURLE_PEER_FAILED_VERIFICATION.rawValue), Int(CURLE_SSL_CACERT_BADFILE.rawValue), Int(CURLE_SSL_CERTPROBLEM.rawValue)].contains(code)
    }

    /// Maps a libcurl result; `detail` is libcurl's error buffer, or its generic text when empty.
    init(code: CURLcode, detail: String, url: String) {
        switch code {
        case CURLE_COULDNT_RESOLVE_PROXY, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_CONNECT:
            self = .unreachable(url: url, detail: detail)
        case CURLE_OPERATION_TIMEDOUT:
            self = .timedOut(url: url, detail: detail)
        case CURLE_GOT_NOTHING, CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_PARTIAL_FILE, CURLE_HTTP2, CURLE_HTTP2_STREAM:
            self = .connectionLost(url: url, detail: detail)
        default:
            self = .curl(code: Int(code.rawValue), message: detail, url: url)
        }
    }
}
