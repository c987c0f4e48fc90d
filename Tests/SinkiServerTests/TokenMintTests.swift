import Foundation
import SinkiRecord
@testable import SinkiServer
import SinkiSupport
import SinkiTestSupport
import Testing

/// `POST /v1/tokens` and `DELETE /v1/tokens/ID`: narrower children, refreshes, revocation from the route.
@Suite struct TokenMintTests {
    @Test func aMintedTokenIsNarrowerAndInheritsWhatItDoesNotName() throws {
        let fixture = try ServerFixture.withAccounts()
        let parent = try fixture.issue(user: "alice", device: "laptop", scope: TokenScope(prefix: "S", maxUploadBytes: 1000))
        let response = try fixture.mint(#"{"device": "helper", "readOnly": true, "prefix": "S/a/", "expiresIn": 3600}"#, token: parent)
        #expect(response.status == 201)
        let json = try JSONValue.parse(response.body)
        #expect(json["user"]?.text == "alice" && json["device"]?.text == "helper")
        #expect(json["readOnly"]?.flag == true && json["prefix"]?.text == "S/a")
        #expect(json["maxUploadBytes"]?.integer == 1000)
        #expect(json["maxUploads"] == .null)
        let expires = try #require(json["expiresAt"]?.text)
        let at = try #require(RFC3339.parse(expires))
        #expect(abs(at - (Clock.now() + 3_600_000_000_000)) < 60_000_000_000)
        let id = try #require(json["id"]?.text)
        #expect(json["chainID"]?.text == id && json["parentID"]?.text == parent.id)
        let secret = try #require(json["token"]?.text)
        // Shown once: the store has only its hash.
        let kept = try #require(try fixture.server.store.token(id: id))
        #expect(kept.secretHash == TokenSecret(text: secret).hash && kept.parentID == parent.id)

        _ = try fixture.modify([fileRecord("S/a/x", "x"), fileRecord("S/b/y", "y")], token: parent.secret)
        let child = IssuedToken(id: id, secret: secret)
        #expect(try fixture.changes(token: child.secret).records.map(\.path) == ["S/a/x"])
        #expect(try fixture.request("POST", Routes.modify, token: child.secret, headers: [("Content-Type", "application/json")],
                                    body: ModifyRequest(records: [fileRecord("S/a/z", "z")]).jsonBytes).status == 403)
        // Asking for nothing gives the parent's scope, under the parent's device name.
        let same = try JSONValue.parse(try fixture.mint("{}", token: parent).body)
        #expect(same["prefix"]?.text == "S" && same["device"]?.text == "laptop" && same["readOnly"]?.flag == false)
    }

    @Test(arguments: [
        (#"{"prefix": "T"}"#, "prefix"),
        (#"{"prefix": "S2/x"}"#, "prefix"),
        (#"{"readOnly": false}"#, "readOnly"),
        (#"{"maxUploadBytes": 1001}"#, "maxUploadBytes"),
        (#"{"maxUploads": 6}"#, "maxUploads"),
        (#"{"expiresIn": 999999}"#, "expiresAt"),
        (#"{"expiresAt": "2200-01-01T00:00:00Z"}"#, "expiresAt"),
    ])
    func aWiderRequestIsRefusedNamingTheField(body: String, field: String) throws {
        let fixture = try ServerFixture.withAccounts()
        let parent = try fixture.issue(user: "alice", scope: TokenScope(readOnly: true, prefix: "S", maxUploadBytes: 1000, maxUploads: 5,
                                                                        expiresAt: Clock.now() + 86_400_000_000_000))
        let response = try fixture.mint(body, token: parent)
        #expect(response.status == 403)
        let problem = try response.problem()
        #expect(problem.code == "beyond-scope" && problem.field == field)
        #expect(problem.detail.contains(field))
        #expect(try fixture.server.store.tokens(user: "alice").count == 1)
    }

    @Test func aReadOnlyTokenMintsOnlyReadOnlyChildren() throws {
        let fixture = try ServerFixture.withAccounts()
        let reader = try fixture.issue(user: "alice", scope: TokenScope(readOnly: true))
        let child = try JSONValue.parse(try fixture.mint(#"{"device": "kiosk"}"#, token: reader).body)
        #expect(child["readOnly"]?.flag == true)
        #expect(try fixture.mint(#"{"readOnly": false}"#, token: reader).status == 403)
    }

    @Test func malformedRequestsAreRefused() throws {
        let fixture = try ServerFixture.withAccounts()
        let parent = try fixture.issue(user: "alice")
        #expect(try fixture.mint("{", token: parent).problem().code == "bad-json")
        #expect(try fixture.mint(#"{"prefix": "../x"}"#, token: parent).problem().code == "bad-path")
        #expect(try fixture.mint(#"{"expiresAt": "tomorrow"}"#, token: parent).problem().field == "expiresAt")
        #expect(try fixture.mint(#"{"expiresAt": "2001-01-01T00:00:00Z"}"#, token: parent).status == 400)
        #expect(try fixture.mint(#"{"expiresIn": 5, "expiresAt": "2200-01-01T00:00:00Z"}"#, token: parent).status == 400)
        #expect(try fixture.mint(#"{"maxUploads": -1}"#, token: parent).status == 400)
        #expect(try fixture.mint(#"{"device": "has space"}"#, token: parent).problem().field == "device")
        let untyped = try fixture.request("POST", Routes.tokens, token: parent.secret, body: Array("{}".utf8))
        #expect(untyped.status == 415)
        let huge = try fixture.request("POST", Routes.tokens, token: parent.secret, headers: [("Content-Type", "application/json")],
                                       body: Array(("{\"device\": \"" + String(repeating: "x", count: 70_000) + "\"}").utf8))
        #expect(huge.status == 413)
        let at = try #require(RFC3339.parse("2030-01-01T01:00:00.5+01:00"))
        #expect(at == 1_893_456_000_500_000_000)
    }

    @Test func uploadsGivenToAChildComeOutOfItsParentsAllowance() throws {
        let fixture = try ServerFixture.withAccounts()
        let parent = try fixture.issue(user: "alice", scope: TokenScope(maxUploads: 4))
        #expect(try fixture.createUpload(length: 1, token: parent).status == 201)
        #expect(try fixture.mint(#"{"maxUploads": 4}"#, token: parent).problem().field == "maxUploads")
        let child = try fixture.minted(#"{"maxUploads": 2}"#, token: parent)
        #expect(try fixture.createUpload(length: 1, token: child).status == 201)
        #expect(try fixture.createUpload(length: 1, token: child).status == 201)
        #expect(try fixture.createUpload(length: 1, token: child).status == 403)
        // 1 used and 2 given away: one left for the parent.
        #expect(try fixture.createUpload(length: 1, token: parent).status == 201)
        #expect(try fixture.createUpload(length: 1, token: parent).status == 403)
    }

    /// Minting stops at the user's live-token cap (issue 24 item 6: 300 tokens in 0.2 s); a revoked or
    /// expired token frees its place, and a refresh (which replaces one) always may.
    @Test func aUserMintsAtMostTheServersLiveTokens() throws {
        let fixture = try ServerFixture.withAccounts { $0.limits.maxLiveTokensPerUser = 3 }
        let root = try fixture.issue(user: "alice")
        let children = try (0..<2).map { try fixture.minted("{\"device\": \"c\($0)\"}", token: root) }
        let refused = try fixture.mint("{\"device\": \"one-too-many\"}", token: root)
        #expect(refused.status == 403)
        #expect(try refused.problem().code == "too-many-tokens")
        #expect(try fixture.mint("{\"continues\": \"\(children[0].id)\"}", token: root).status == 201)
        #expect(try fixture.request("DELETE", Routes.tokens + "/" + children[1].id, token: root.secret).status == 204)
        #expect(try fixture.mint("{\"device\": \"in-its-place\"}", token: root).status == 201)
        // Another user's count is their own.
        let bob = try fixture.issue(user: "bob")
        #expect(try fixture.mint("{\"device\": \"b\"}", token: bob).status == 201)
    }

    @Test func revokingAParentThroughTheRouteRevokesWhatItMinted() throws {
        let fixture = try ServerFixture.withAccounts()
        let root = try fixture.issue(user: "alice")
        let child = try fixture.minted(#"{"device": "child"}"#, token: root)
        let grandchild = try fixture.minted(#"{"device": "grandchild"}"#, token: child)
        let sibling = try fixture.minted(#"{"device": "sibling"}"#, token: root)
        let bob = try fixture.issue(user: "bob")
        // Not its own and not below it: exactly like an unknown id.
        func shape(_ id: String, by token: IssuedToken) throws -> ProblemShape {
            var shape = try ProblemShape(try fixture.request("DELETE", Routes.tokens + "/" + id, token: token.secret))
            shape.detail = shape.detail.replacingOccurrences(of: id, with: "ID")
            return shape
        }
        let unknown = try shape(TokenSecret.makeID(), by: child)
        #expect(unknown.status == 404)
        #expect(try shape(sibling.id, by: child) == unknown)
        #expect(try shape(root.id, by: child) == unknown)
        #expect(try shape(child.id, by: bob) == unknown)
        #expect(try fixture.request("GET", Routes.changes, token: sibling.secret).status == 200)

        let revoked = try fixture.request("DELETE", Routes.tokens + "/" + child.id, token: root.secret)
        #expect(revoked.status == 204)
        #expect(try fixture.request("GET", Routes.changes, token: child.secret).status == 401)
        #expect(try fixture.request("GET", Routes.changes, token: grandchild.secret).status == 401)
        #expect(try fixture.request("GET", Routes.changes, token: sibling.secret).status == 200)
        #expect(try fixture.request("GET", Routes.changes, token: root.secret).status == 200)
        // A token may revoke itself.
        #expect(try fixture.request("DELETE", Routes.tokens + "/" + sibling.id, token: sibling.secret).status == 204)
        #expect(try fixture.request("GET", Routes.changes, token: sibling.secret).status == 401)
    }

    @Test func continuingATokenRefreshesItInItsChain() throws {
        let fixture = try ServerFixture.withAccounts()
        let root = try fixture.issue(user: "alice")
        let helper = try fixture.minted(#"{"device": "helper", "maxUploads": 2, "expiresIn": 60}"#, token: root)
        let helpersChild = try fixture.minted(#"{"device": "helpers-child", "maxUploads": 0}"#, token: helper)
        #expect(try fixture.createUpload(length: 1, token: helper).status == 201)

        let response = try fixture.mint(#"{"continues": "\#(helper.id)", "expiresIn": 7200}"#, token: root)
        #expect(response.status == 201)
        let json = try JSONValue.parse(response.body)
        let fresh = IssuedToken(id: try #require(json["id"]?.text), secret: try #require(json["token"]?.text))
        #expect(json["chainID"]?.text == helper.id && json["device"]?.text == "helper" && json["maxUploads"]?.integer == 2)
        #expect(json["parentID"]?.text == root.id)
        // The old secret is revoked, the new one works, and the chain's count carried over.
        #expect(try fixture.request("GET", Routes.changes, token: helper.secret).status == 401)
        #expect(try fixture.request("GET", Routes.changes, token: fresh.secret).status == 200)
        #expect(try fixture.createUpload(length: 1, token: fresh).status == 201)
        #expect(try fixture.createUpload(length: 1, token: fresh).status == 403)
        // What the old token minted lives on, now below the new one.
        #expect(try fixture.request("GET", Routes.changes, token: helpersChild.secret).status == 200)
        #expect(try fixture.server.store.token(id: helpersChild.id)?.parentID == fresh.id)
        // A refresh may not raise the chain's limits.
        #expect(try fixture.mint(#"{"continues": "\#(fresh.id)", "maxUploads": 3}"#, token: root).problem().field == "maxUploads")
        // Only its own or its minted tokens: the revoked one, or one of another branch, is no token.
        #expect(try fixture.mint(#"{"continues": "\#(helper.id)"}"#, token: root).status == 404)
        let other = try fixture.issue(user: "alice", device: "other")
        #expect(try fixture.mint(#"{"continues": "\#(fresh.id)"}"#, token: other).status == 404)
        // A token refreshes itself (a new secret, the same chain).
        let again = try fixture.minted(#"{"continues": "\#(fresh.id)"}"#, token: fresh)
        #expect(try fixture.request("GET", Routes.changes, token: fresh.secret).status == 401)
        #expect(try fixture.server.store.token(id: again.id)?.chainID == helper.id)
        // Revoking the chain's first id reaches its live member.
        #expect(try fixture.server.store.revoke(id: helper.id, at: Clock.now()).contains(again.id))
        #expect(try fixture.request("GET", Routes.changes, token: again.secret).status == 401)
    }
}
