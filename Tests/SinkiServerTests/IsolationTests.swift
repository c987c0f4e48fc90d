import Foundation
import SinkiRecord
@testable import SinkiServer
import SinkiSupport
import SinkiTestSupport
import Testing

/// What a refused token and another user's ids look like: the same answer whatever the reason, so that
/// probing tells nothing.
@Suite struct IsolationTests {
    /// Every route, with what it needs to get past its own checks (so only authentication refuses).
    static let routes: [(String, String, [(String, String)], [UInt8]?)] = [
        ("POST", Routes.modify, [("Content-Type", "application/json")], Array(#"{"records": []}"#.utf8)),
        ("GET", "/v1/records?path=S", [], nil),
        ("GET", "/v1/changes", [], nil),
        ("GET", "/v1/changes?wait=5", [], nil),
        ("OPTIONS", Routes.uploads, [], nil),
        ("POST", Routes.uploads, [("Tus-Resumable", "1.0.0"), ("Upload-Length", "5")], nil),
        ("HEAD", Routes.uploads + "0123456789abcdef0123456789abcdef", [("Tus-Resumable", "1.0.0")], nil),
        ("PATCH", Routes.uploads + "0123456789abcdef0123456789abcdef",
         [("Tus-Resumable", "1.0.0"), ("Content-Type", "application/offset+octet-stream"), ("Upload-Offset", "0")], Array("abc".utf8)),
        ("DELETE", Routes.uploads + "0123456789abcdef0123456789abcdef", [("Tus-Resumable", "1.0.0")], nil),
        ("GET", Routes.assets + "0123456789abcdef0123456789abcdef", [("Range", "bytes=0-")], nil),
        ("POST", Routes.missingChunks, [("Content-Type", "application/json")], Array(#"{"chunks": []}"#.utf8)),
        ("GET", Routes.chunks + String(repeating: "ab", count: 32), [], nil),
        ("DELETE", Routes.chunks + String(repeating: "ab", count: 32), [], nil),
        ("POST", Routes.tokens, [("Content-Type", "application/json")], Array("{}".utf8)),
        ("DELETE", Routes.tokens + "/t0123456789ab", [], nil),
        ("GET", "/no/such/route", [], nil),
    ]

    @Test func everyRefusedTokenGetsTheSameAnswerOnEveryRoute() throws {
        let fixture = try ServerFixture.withAccounts()
        let revoked = try fixture.issue(user: "alice")
        _ = try fixture.server.store.revoke(id: revoked.id, at: Clock.now())
        let expired = try fixture.issue(user: "alice", scope: TokenScope(expiresAt: Clock.now() - 1))
        let live = try fixture.issue(user: "alice")
        let wrongSecret = "sinki_\(live.id)_" + String(repeating: "A", count: 43)
        let authorizations: [String?] = [nil, "Bearer", "Bearer ", "Basic YWxpY2U6cHc=", "bearer nope", "Bearer sinki__", "Bearer \(wrongSecret)",
                                         "Bearer \(revoked.secret)", "Bearer \(expired.secret)", "Bearer \(live.secret) extra",
                                         "Bearer " + String(repeating: "x", count: 4000)]
        var first: ProblemShape?
        for (method, target, headers, body) in Self.routes {
            for authorization in authorizations {
                let response = try fixture.connect().request(method, target, headers: headers + (authorization.map { [("Authorization", $0)] } ?? []),
                                                             body: body)
                // HEAD carries no body: its status and headers must still match.
                if method == "HEAD" {
                    #expect(response.status == 401 && response.header("WWW-Authenticate") == "Bearer realm=\"sinki\"")
                    continue
                }
                let shape = try ProblemShape(response)
                if first == nil { first = shape }
                #expect(shape == first, "\(method) \(target) with \(authorization ?? "no header")")
            }
        }
        #expect(first?.status == 401 && first?.code == "unauthorized")
        #expect(first?.detail == Authenticator.refusal)
    }

    @Test func anotherUsersIdsAnswerLikeUnknownOnes() throws {
        let fixture = try ServerFixture.withAccounts()
        let alice = try fixture.issue(user: "alice")
        let bob = try fixture.issue(user: "bob")
        let bytes = randomBytes(2048)
        let asset = try fixture.upload(bytes, token: alice)
        let open = try #require(try fixture.createUpload(length: 10, token: alice).locationPath)
        let openID = String(open.split(separator: "/").last!)
        _ = try fixture.modify([assetRecord("S/big", id: asset, bytes: bytes)], token: alice.secret)
        let unknown = RandomID.hex(bytes: 16)
        let tus = [("Tus-Resumable", "1.0.0")]
        let patch = tus + [("Content-Type", "application/offset+octet-stream"), ("Upload-Offset", "0")]

        func shape(_ method: String, _ base: String, _ id: String, _ headers: [(String, String)], body: [UInt8]? = nil) throws -> ProblemShape {
            var shape = try ProblemShape(try fixture.request(method, base + id, token: bob.secret, headers: headers, body: body))
            shape.detail = shape.detail.replacingOccurrences(of: id, with: "ID")
            return shape
        }
        for id in [asset, openID] {
            #expect(try shape("GET", Routes.assets, id, []) == shape("GET", Routes.assets, unknown, []))
            #expect(try shape("GET", Routes.assets, id, [("Range", "bytes=5-")]) == shape("GET", Routes.assets, unknown, [("Range", "bytes=5-")]))
            #expect(try shape("PATCH", Routes.uploads, id, patch, body: [1, 2]) == shape("PATCH", Routes.uploads, unknown, patch, body: [1, 2]))
            #expect(try shape("DELETE", Routes.uploads, id, tus) == shape("DELETE", Routes.uploads, unknown, tus))
            let head = try fixture.request("HEAD", Routes.uploads + id, token: bob.secret, headers: tus)
            let unknownHead = try fixture.request("HEAD", Routes.uploads + unknown, token: bob.secret, headers: tus)
            #expect(head.status == 404 && unknownHead.status == 404 && head.header("Content-Length") == unknownHead.header("Content-Length"))
        }
        #expect(try shape("GET", Routes.assets, asset, []).status == 404)
        // Naming Alice's asset in Bob's record is refused as naming no upload at all.
        let named = try fixture.modify([assetRecord("S/mine", id: asset, bytes: bytes)], token: bob.secret)
        let guessed = try fixture.modify([assetRecord("S/mine", id: unknown, bytes: bytes)], token: bob.secret)
        #expect(named.first?.problem?.detail.replacingOccurrences(of: asset, with: "ID")
                == guessed.first?.problem?.detail.replacingOccurrences(of: unknown, with: "ID"))
        // Alice's path is nothing to Bob: a look-up finds nothing, a save of it is Bob's first.
        #expect(try fixture.request("GET", "/v1/records?path=S/big", token: bob.secret).page().records.isEmpty)
        let conflict = try fixture.modify([fileRecord("S/big", "b", baseTag: 7)], token: bob.secret)
        let nowhere = try fixture.modify([fileRecord("S/nowhere", "b", baseTag: 7)], token: bob.secret)
        #expect(conflict.first?.status == .conflict && conflict.first?.record?.changeTag == 0)
        #expect(nowhere.first?.status == .conflict && nowhere.first?.record?.changeTag == 0)
        // Alice's upload is untouched by it all.
        #expect(try fixture.request("GET", Routes.assets + asset, token: alice.secret).body == bytes)
        #expect(try fixture.request("HEAD", open, token: alice.secret, headers: tus).header("Upload-Offset") == "0")
    }
}
