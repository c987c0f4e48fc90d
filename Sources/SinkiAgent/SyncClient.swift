import SinkiLoop
import SinkiRecord
import SinkiSupport
import SinkiTransfer

/// Why a call to the sync server failed.
public enum SyncError: Error, Sendable, CustomStringConvertible {
    /// The server could not be reached or the connection broke.
    case transport(TransferError)
    /// The server answered with an error document.
    case problem(Problem)
    /// The server answered something that is not the protocol.
    case badResponse(String)

    public var description: String {
        switch self {
        case let .transport(error): return "\(error)"
        case let .problem(problem): return "server: \(problem)"
        case let .badResponse(detail): return "server answered outside the protocol: \(detail)"
        }
    }

    /// The server does not know our change token any more: start the feed over.
    public var isStaleToken: Bool {
        if case let .problem(problem) = self { return problem.code == ProblemKind.badToken.code || problem.code == ProblemKind.tokenExpired.code }
        return false
    }
}

/// The wire calls of docs/protocol.md, over the agent's HTTP client. Loop-confined.
final class SyncClient {
    let http: HTTPClient
    let base: String
    let token: String?
    let device: String

    init(http: HTTPClient, base: String, token: String?, device: String) {
        self.http = http
        self.base = base
        self.token = token
        self.device = device
    }

    private var headers: [(String, String)] {
        [("Accept", "application/json")]
    }

    // Every call takes the caller's isolation (the agent's actor, on the loop) so that libcurl is
    // only ever driven from the loop thread.

    /// Sends a modify batch whose JSON body was built off the loop.
    func modify(body: [UInt8], isolation: isolated (any Actor)? = #isolation) async throws(SyncError) -> ModifyResponse {
        var request = HTTPRequest(method: "POST", url: base + "/v1/records/modify", bearerToken: token)
        request.headers = headers + [("Content-Type", "application/json")]
        request.body = .bytes(body)
        request.timeout = 300
        let response = try await send(request, isolation: isolation)
        return try await parse(response, isolation: isolation) { try ModifyResponse.parse($0) }
    }

    /// One page of the change feed; waits up to `wait` seconds on the server when nothing is new.
    func changes(since token: String?, wait: Int, limit: Int, isolation: isolated (any Actor)? = #isolation) async throws(SyncError) -> RecordPage {
        var url = base + "/v1/changes?limit=\(limit)&wait=\(wait)&omitDataFrom=" + Self.escape(device)
        if let token, !token.isEmpty { url += "&since=" + Self.escape(token) }
        var request = HTTPRequest(method: "GET", url: url, bearerToken: token)
        request.headers = headers
        request.timeout = wait == 0 ? 300 : Double(wait + 60)
        let response = try await send(request, isolation: isolation)
        return try await parse(response, isolation: isolation) { try RecordPage.parse($0) }
    }

    /// The current record at exactly `path`, with its content.
    func record(at path: String, isolation: isolated (any Actor)? = #isolation) async throws(SyncError) -> Record? {
        var request = HTTPRequest(method: "GET", url: base + "/v1/records?limit=1&data=1&path=" + Self.escape(path), bearerToken: token)
        request.headers = headers
        request.timeout = 300
        let response = try await send(request, isolation: isolation)
        let page = try await parse(response, isolation: isolation) { try RecordPage.parse($0) }
        return page.records.first { $0.path == path }
    }

    private func send(_ request: HTTPRequest, isolation: isolated (any Actor)?) async throws(SyncError) -> HTTPResponse {
        let response: HTTPResponse
        do { response = try await http.send(request, isolation: isolation) } catch { throw .transport(error) }
        guard (200..<300).contains(response.status) else {
            if let problem = Problem.parse(response.body) { throw .problem(problem) }
            throw .badResponse("HTTP \(response.status) from \(request.url)")
        }
        return response
    }

    /// Parses a body off the loop: a feed page can be tens of megabytes.
    private func parse<T: Sendable>(_ response: HTTPResponse, isolation: isolated (any Actor)?, _ parser: @escaping @Sendable ([UInt8]) throws -> T) async throws(SyncError) -> T {
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
