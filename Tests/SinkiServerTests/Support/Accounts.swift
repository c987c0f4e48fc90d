import Foundation
import SinkiRecord
@testable import SinkiServer
import SinkiSupport
import SinkiTestSupport

/// A device token made for a test: its id, and the secret a client sends.
struct IssuedToken {
    let id: String
    let secret: String

    var header: (String, String) { ("Authorization", "Bearer \(secret)") }
}

extension ServerFixture {
    /// A server that checks device tokens, with none yet: tests issue theirs with `issue`.
    static func withAccounts(logger: Logger = testLogger(), configure: (inout ServerConfiguration) -> Void = { _ in }) throws -> ServerFixture {
        try ServerFixture(tokens: [:], logger: logger, configure: configure)
    }

    /// A new token in the server's store, as `sinkid serve token add` makes one.
    func issue(user: String, device: String = "laptop", scope: TokenScope = .full) throws -> IssuedToken {
        let id = TokenSecret.makeID()
        let secret = TokenSecret.make(id: id)
        try server.store.addUser(user, at: Clock.now())
        try server.store.addToken(DeviceToken(id: id, user: user, device: device, scope: scope, parentID: nil, chainID: id,
                                              secretHash: secret.hash, createdAt: Clock.now()))
        return IssuedToken(id: id, secret: secret.text)
    }

    /// `POST /v1/tokens` with `body` (JSON text) under `token`.
    func mint(_ body: String, token: IssuedToken) throws -> TestResponse {
        try request("POST", Routes.tokens, token: token.secret, headers: [("Content-Type", "application/json")], body: Array(body.utf8))
    }

    /// A minted token from a 201 answer.
    func minted(_ body: String, token: IssuedToken) throws -> IssuedToken {
        let response = try mint(body, token: token)
        guard response.status == 201 else { throw ClientError(description: "mint: expected 201, got \(response.status): \(response.text)") }
        let json = try JSONValue.parse(response.body)
        guard let id = json["id"]?.text, let secret = json["token"]?.text else {
            throw ClientError(description: "mint: no id or token in \(response.text)")
        }
        return IssuedToken(id: id, secret: secret)
    }

    /// A tus creation (`POST /v1/uploads/`) of `length` bytes.
    func createUpload(length: Int, token: IssuedToken, extra: [(String, String)] = []) throws -> TestResponse {
        try request("POST", Routes.uploads, token: token.secret, headers: [("Tus-Resumable", "1.0.0"), ("Upload-Length", String(length))] + extra)
    }

    /// A finished upload of `bytes` (creation with upload): its id.
    func upload(_ bytes: [UInt8], token: IssuedToken) throws -> String {
        let response = try request("POST", Routes.uploads, token: token.secret,
                                   headers: [("Tus-Resumable", "1.0.0"), ("Upload-Length", String(bytes.count)),
                                             ("Content-Type", "application/offset+octet-stream")], body: bytes)
        guard response.status == 201, let location = response.header("Location") else {
            throw ClientError(description: "upload: expected 201, got \(response.status): \(response.text)")
        }
        return String(location.split(separator: "/").last!)
    }
}

/// A record whose content is the finished upload `id` of `bytes`.
func assetRecord(_ path: String, id: String, bytes: [UInt8]) -> Record {
    let sha = Digest.sha256Hex(bytes)
    return Record(path: path, type: "keep-both", asset: Asset(id: id, size: Int64(bytes.count), sha256: sha), size: Int64(bytes.count),
                  sha256: sha, mode: 0o644, modifiedAt: 1_764_422_400_123_456_789, device: "laptop")
}

/// A problem's shape with what legitimately differs between two answers (the request id) left out.
struct ProblemShape: Equatable, CustomStringConvertible {
    var status: Int
    var type: String
    var title: String
    var detail: String
    var code: String
    var contentType: String?
    var authenticate: String?

    init(_ response: TestResponse) throws {
        let problem = try response.problem()
        status = response.status
        type = problem.type
        title = problem.title
        detail = problem.detail
        code = problem.code
        contentType = response.header("Content-Type")
        authenticate = response.header("WWW-Authenticate")
    }

    var description: String { "\(status) \(code) \(quoted(detail))" }
}

extension JSONValue {
    var text: String? {
        if case let .string(value) = self { return value }
        return nil
    }

    var integer: Int64? {
        if case let .int(value) = self { return value }
        return nil
    }

    var flag: Bool? {
        if case let .bool(value) = self { return value }
        return nil
    }
}
