import Foundation
import SinkiRecord
@testable import SinkiServer
import SinkiSupport
import SinkiTestSupport
import Testing

/// A narrowed token holds on every route: read-only, a path prefix, upload size and count, expiry.
@Suite struct TokenScopeTests {
    @Test func aReadOnlyTokenReadsButWritesNothing() throws {
        let fixture = try ServerFixture.withAccounts()
        let full = try fixture.issue(user: "alice")
        let reader = try fixture.issue(user: "alice", device: "tablet", scope: TokenScope(readOnly: true))
        #expect(try fixture.modify([fileRecord("S/a", "a")], token: full.secret).map(\.status) == [.saved])
        let bytes = randomBytes(1000)
        let asset = try fixture.upload(bytes, token: full)
        let open = try fixture.createUpload(length: 10, token: full)
        let openID = String(try #require(open.header("Location")).split(separator: "/").last!)

        // Every write answers 403 read-only-token, and nothing is kept.
        let json = [("Content-Type", "application/json")]
        let tus = [("Tus-Resumable", "1.0.0")]
        let chunk = tus + [("Content-Type", "application/offset+octet-stream"), ("Upload-Offset", "0")]
        let writes: [(String, String, [(String, String)], [UInt8]?)] = [
            ("POST", Routes.modify, json, ModifyRequest(records: [fileRecord("S/b", "b")]).jsonBytes),
            ("POST", Routes.uploads, tus + [("Upload-Length", "10")], nil),
            ("POST", Routes.uploads, tus + [("Upload-Length", "3"), ("Content-Type", "application/offset+octet-stream")], Array("abc".utf8)),
            ("PATCH", Routes.uploads + openID, chunk, Array("0123456789".utf8)),
            ("DELETE", Routes.uploads + openID, tus, nil),
        ]
        for (method, target, headers, body) in writes {
            let response = try fixture.request(method, target, token: reader.secret, headers: headers, body: body)
            #expect(response.status == 403, "\(method) \(target)")
            let problem = try response.problem()
            #expect(problem.code == "read-only-token" && problem.field == "readOnly")
            #expect(problem.detail.contains("read-only"))
        }
        let head = try fixture.request("HEAD", Routes.uploads + openID, token: full.secret, headers: tus)
        #expect(head.status == 200 && head.header("Upload-Offset") == "0")
        #expect(try fixture.request("GET", "/v1/records?path=S/b", token: full.secret).page().records.isEmpty)

        // Every read works.
        #expect(try fixture.changes(token: reader.secret).records.map(\.path) == ["S/a"])
        #expect(try fixture.request("GET", "/v1/records?path=S", token: reader.secret).page().records.map(\.path) == ["S/a"])
        #expect(try fixture.request("OPTIONS", Routes.uploads, token: reader.secret).status == 204)
        #expect(try fixture.request("HEAD", Routes.uploads + openID, token: reader.secret, headers: tus).status == 200)
        let got = try fixture.request("GET", Routes.assets + asset, token: reader.secret, headers: [("Range", "bytes=10-19")])
        #expect(got.status == 206 && got.body == Array(bytes[10...19]))
    }

    @Test func aPrefixNarrowsTheFeedAndTheLookUpAndItsTokenResumesExactly() throws {
        let fixture = try ServerFixture.withAccounts()
        let full = try fixture.issue(user: "alice")
        let narrow = try fixture.issue(user: "alice", device: "phone", scope: TokenScope(prefix: "S/a"))
        _ = try fixture.modify([fileRecord("S/a/1", "1"), fileRecord("S/b/2", "2"), fileRecord("T/c", "3"), fileRecord("S/ab", "4")],
                               token: full.secret)
        let first = try fixture.changes(token: narrow.secret)
        #expect(first.records.map(\.path) == ["S/a/1"])
        _ = try fixture.modify([fileRecord("S/b/5", "5"), fileRecord("S/a/6", "6"), fileRecord("S/b/7", "7")], token: full.secret)
        let second = try fixture.changes(since: first.token, token: narrow.secret)
        #expect(second.records.map(\.path) == ["S/a/6"])
        #expect(try fixture.changes(since: second.token, token: narrow.secret).records.isEmpty)
        // Paged one by one, the narrowed feed still holds every in-scope record once.
        var token: String?
        var paths: [String] = []
        repeat {
            let page = try fixture.changes(since: token, limit: 1, token: narrow.secret)
            paths += page.records.map(\.path)
            token = page.token
            if !page.more { break }
        } while true
        #expect(paths == ["S/a/1", "S/a/6"])

        func lookup(_ query: String) throws -> [String] {
            try fixture.request("GET", "/v1/records" + query, token: narrow.secret).page().records.map(\.path)
        }
        #expect(try lookup("") == ["S/a/1", "S/a/6"])
        #expect(try lookup("?path=S") == ["S/a/1", "S/a/6"])
        #expect(try lookup("?path=S/a/1") == ["S/a/1"])
        #expect(try lookup("?path=T").isEmpty)
        #expect(try lookup("?path=S/b").isEmpty)
    }

    @Test func aModifyOutsideThePrefixIsRefusedItemByItem() throws {
        let fixture = try ServerFixture.withAccounts()
        let full = try fixture.issue(user: "alice")
        let narrow = try fixture.issue(user: "alice", device: "phone", scope: TokenScope(prefix: "S/a"))
        _ = try fixture.modify([fileRecord("S/b/src", "moved")], token: full.secret)
        var move = Record(path: "S/a/dst", type: "keep-both", size: 5, sha256: Digest.sha256Hex(Array("moved".utf8)), device: "phone",
                          movedFrom: "S/b/src")
        move.mode = 0o644
        let results = try fixture.modify([fileRecord("S/a/in", "in"), fileRecord("S/b/out", "out"), fileRecord("S/ab", "sibling"), move],
                                         token: narrow.secret)
        #expect(results.map(\.status) == [.saved, .refused, .refused, .refused])
        #expect(results[1].problem?.code == "beyond-scope" && results[1].problem?.field == "path")
        #expect(results[2].problem?.field == "path")
        #expect(results[3].problem?.field == "movedFrom")
        let all = try fixture.request("GET", "/v1/records", token: full.secret).page().records.map(\.path)
        #expect(all == ["S/a/in", "S/b/src"])
    }

    @Test(arguments: ["../x", "/abs", "S/a/../../b", "S/./a", "S//a", "S\\a", "S/a/"])
    func pathsThatReachOutAreRefused(path: String) throws {
        let fixture = try ServerFixture.withAccounts()
        let narrow = try fixture.issue(user: "alice", scope: TokenScope(prefix: "S/a"))
        let results = try fixture.modify([fileRecord(path, "x")], token: narrow.secret)
        #expect(results.map(\.status) == [.refused])
        #expect(results.first?.problem?.code == "bad-path")
        #expect(try fixture.request("GET", "/v1/records", token: narrow.secret).page().records.isEmpty)
    }

    @Test func aNarrowedLongPollWakesOnlyForItsPrefix() throws {
        let fixture = try ServerFixture.withAccounts()
        let full = try fixture.issue(user: "alice")
        let narrow = try fixture.issue(user: "alice", device: "phone", scope: TokenScope(prefix: "S/a"))
        let start = try fixture.changes(token: narrow.secret)
        let poll = try fixture.connect()
        try poll.send("GET", changesTarget(since: start.token, wait: 20), headers: [narrow.header])
        try waitUntilSync("the poll to park") { fixture.server.waitingLongPolls == 1 }
        _ = try fixture.modify([fileRecord("S/b/outside", "x")], token: full.secret)
        // The commit wakes the poll; it finds nothing in its prefix and parks again.
        try waitUntilSync("the poll to park again") { fixture.server.waitingLongPolls == 1 }
        #expect(!poll.isReadable(within: 0.2))
        _ = try fixture.modify([fileRecord("S/a/inside", "y")], token: full.secret)
        let page = try poll.receive(timeout: 5).page()
        #expect(page.records.map(\.path) == ["S/a/inside"])
    }

    @Test func uploadsAndAssetsOutsideThePrefixAnswerLikeUnknownOnes() throws {
        let fixture = try ServerFixture.withAccounts()
        let full = try fixture.issue(user: "alice")
        let narrow = try fixture.issue(user: "alice", device: "phone", scope: TokenScope(prefix: "S/a"))
        let tus = [("Tus-Resumable", "1.0.0")]
        let bytes = randomBytes(4096)
        let asset = try fixture.upload(bytes, token: full)
        let unknown = RandomID.hex(bytes: 16)

        func shape(_ method: String, _ base: String, _ id: String, headers: [(String, String)] = []) throws -> ProblemShape {
            var shape = try ProblemShape(try fixture.request(method, base + id, token: narrow.secret, headers: headers))
            shape.detail = shape.detail.replacingOccurrences(of: id, with: "ID")
            return shape
        }
        // Made by a token without the prefix: the narrowed token cannot tell it from no upload at all.
        #expect(try shape("GET", Routes.assets, asset) == shape("GET", Routes.assets, unknown))
        #expect(try shape("GET", Routes.assets, asset).status == 404)
        let patch = tus + [("Content-Type", "application/offset+octet-stream"), ("Upload-Offset", "0")]
        #expect(try shape("PATCH", Routes.uploads, asset, headers: patch) == shape("PATCH", Routes.uploads, unknown, headers: patch))
        #expect(try shape("DELETE", Routes.uploads, asset, headers: tus) == shape("DELETE", Routes.uploads, unknown, headers: tus))
        #expect(try fixture.request("HEAD", Routes.uploads + asset, token: narrow.secret, headers: tus).status == 404)
        // A record outside the prefix naming it does not open it; one inside does.
        #expect(try fixture.modify([assetRecord("S/b/big", id: asset, bytes: bytes)], token: full.secret).map(\.status) == [.saved])
        #expect(try fixture.request("GET", Routes.assets + asset, token: narrow.secret).status == 404)
        // Nor may the narrowed token name it in a record of its own.
        let borrowed = try fixture.modify([assetRecord("S/a/borrowed", id: asset, bytes: bytes)], token: narrow.secret)
        #expect(borrowed.map(\.status) == [.refused])
        #expect(try fixture.modify([assetRecord("S/a/big", id: asset, bytes: bytes)], token: full.secret).map(\.status) == [.saved])
        let got = try fixture.request("GET", Routes.assets + asset, token: narrow.secret)
        #expect(got.status == 200 && got.body == bytes)
        // An upload the narrowed token made is its own, and the full token's too.
        let mine = try fixture.upload(Array("mine".utf8), token: narrow)
        #expect(try fixture.request("HEAD", Routes.uploads + mine, token: narrow.secret, headers: tus).status == 200)
        #expect(try fixture.request("GET", Routes.assets + mine, token: full.secret).status == 200)
    }

    @Test func uploadSizeAndCountLimitsHold() throws {
        let fixture = try ServerFixture.withAccounts()
        let limited = try fixture.issue(user: "alice", scope: TokenScope(maxUploadBytes: 100, maxUploads: 3))
        let over = try fixture.createUpload(length: 101, token: limited)
        #expect(over.status == 413)
        #expect(try over.problem().field == "maxUploadBytes" && over.problem().code == "too-large")
        #expect(try fixture.createUpload(length: 100, token: limited).status == 201)
        // Deferred: the length given on a PATCH is held to the same limit.
        let deferred = try fixture.request("POST", Routes.uploads, token: limited.secret,
                                           headers: [("Tus-Resumable", "1.0.0"), ("Upload-Defer-Length", "1")])
        #expect(deferred.status == 201)
        let location = try #require(deferred.locationPath)
        let patch = try fixture.request("PATCH", location, token: limited.secret,
                                        headers: [("Tus-Resumable", "1.0.0"), ("Content-Type", "application/offset+octet-stream"),
                                                  ("Upload-Offset", "0"), ("Upload-Length", "500")], body: Array("abc".utf8))
        #expect(try patch.status == 413 && patch.problem().field == "maxUploadBytes")
        // Three uploads were started (the refused 101-byte one never counted); the fourth is refused.
        #expect(try fixture.createUpload(length: 5, token: limited).status == 201)
        let fourth = try fixture.createUpload(length: 5, token: limited)
        #expect(fourth.status == 403)
        #expect(try fourth.problem().code == "beyond-scope" && fourth.problem().field == "maxUploads")
    }

    @Test func anExpiredTokenIsRefusedLikeAnUnknownOne() throws {
        let fixture = try ServerFixture.withAccounts()
        let expired = try fixture.issue(user: "alice", scope: TokenScope(expiresAt: Clock.now() - 1_000_000_000))
        let soon = try fixture.issue(user: "alice", scope: TokenScope(expiresAt: Clock.now() + 1_500_000_000))
        let unknown = TokenSecret.make(id: TokenSecret.makeID()).text
        let answer = try ProblemShape(try fixture.request("GET", Routes.changes, token: expired.secret))
        #expect(answer == (try ProblemShape(try fixture.request("GET", Routes.changes, token: unknown))))
        #expect(answer.status == 401)
        #expect(try fixture.request("GET", Routes.changes, token: soon.secret).status == 200)
        try waitUntilSync("the short-lived token to expire", timeout: 5) {
            try fixture.request("GET", Routes.changes, token: soon.secret).status == 401
        }
    }
}
