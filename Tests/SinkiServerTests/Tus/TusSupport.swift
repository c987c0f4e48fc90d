import Foundation
@testable import SinkiServer
import SinkiRecord
import SinkiSupport
import SinkiTestSupport

/// A server for tus tests, with helpers that speak the protocol on raw connections.
final class TusFixture {
    let fixture: ServerFixture
    var port: Int { fixture.port }
    var uploadsDirectory: String { fixture.directory.child("data") + "/uploads" }

    init(tokens: [String: ServerIdentity]? = nil, configure: (inout ServerConfiguration) -> Void = { _ in }) throws {
        fixture = try ServerFixture(tokens: tokens, configure: configure)
    }

    static let version = ("Tus-Resumable", "1.0.0")
    static let chunk = ("Content-Type", "application/offset+octet-stream")

    func request(_ method: String, _ target: String, token: String? = nil, headers: [(String, String)] = [],
                 body: [UInt8]? = nil) throws -> TestResponse {
        try fixture.request(method, target, token: token, headers: headers, body: body)
    }

    /// Creates an upload and returns its id.
    func create(length: Int64? = nil, token: String? = nil, headers: [(String, String)] = []) throws -> String {
        var all = [Self.version] + headers
        if let length { all.append(("Upload-Length", String(length))) }
        let response = try request("POST", "/v1/uploads/", token: token, headers: all)
        guard response.status == 201, let location = response.header("Location") else {
            throw ClientError(description: "creation answered \(response.status): \(response.text)")
        }
        return String(location.split(separator: "/").last!)
    }

    func patch(_ id: String, offset: Int64, _ body: [UInt8], token: String? = nil, headers: [(String, String)] = []) throws -> TestResponse {
        try request("PATCH", "/v1/uploads/\(id)", token: token,
                    headers: [Self.version, Self.chunk, ("Upload-Offset", String(offset))] + headers, body: body)
    }

    func head(_ id: String, token: String? = nil) throws -> TestResponse {
        try request("HEAD", "/v1/uploads/\(id)", token: token, headers: [Self.version])
    }

    /// The bytes the server holds for upload `id` (nil: no data file).
    func stored(_ id: String) -> [UInt8]? {
        FileManager.default.contents(atPath: uploadsDirectory + "/\(id).bin").map { Array($0) }
    }

    /// Every file in the uploads folder with its size: what "nothing stored" compares.
    func snapshot() -> [String: Int] {
        var out: [String: Int] = [:]
        for name in (try? FileManager.default.contentsOfDirectory(atPath: uploadsDirectory)) ?? [] {
            let attributes = try? FileManager.default.attributesOfItem(atPath: uploadsDirectory + "/" + name)
            out[name] = (attributes?[.size] as? Int) ?? -1
        }
        return out
    }

    /// The info file's text: to see that a refused request left it alone.
    func info(_ id: String) -> String { readFile(uploadsDirectory + "/\(id).info") ?? "" }
}

func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

/// `count` bytes of a fixed pattern.
func pattern(_ count: Int, seed: Int = 0) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: ($0 &* 31 &+ seed) % 251) } }

func checksum(_ algorithm: Digest.Algorithm, _ data: [UInt8]) -> String {
    "\(algorithm.rawValue) \(Base64.encode(Digest.hash(data, algorithm)))"
}
