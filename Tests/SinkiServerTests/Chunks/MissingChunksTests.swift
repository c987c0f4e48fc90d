import Foundation
@testable import SinkiServer
import SinkiRecord
import SinkiSupport
import SinkiTestSupport
import Testing

/// `POST /v1/chunks/missing`: which chunks the user lacks, in the order asked.
@Suite struct MissingChunksTests {
    @Test func theChunksTheUserLacksInTheOrderAskedEachOnce() throws {
        let fixture = try ServerFixture.withAccounts()
        let alice = try fixture.issue(user: "alice")
        let file = ChunkedFile.random([1000, 2000, 3000, 4000])
        #expect(try fixture.uploadChunk(file.chunks[1], token: alice.secret).status == 201)
        #expect(try fixture.uploadChunk(file.chunks[3], token: alice.secret).status == 201)
        fixture.age(user: "alice", file.names[1], seconds: 3600)
        let asked = [file.names[3], file.names[0], file.names[1], file.names[2], file.names[0]]
        let response = try fixture.missing(asked, token: alice.secret)
        #expect(response.status == 200)
        #expect(try MissingChunksResponse.parse(response.body).missing == [file.names[0], file.names[2]])
        // Found present: touched, so that garbage collection keeps it another grace.
        #expect(try #require(fixture.chunkModified(user: "alice", file.names[1])) >= Clock.now() / 1_000_000_000 - 60)
        #expect(try MissingChunksResponse.parse(fixture.missing([], token: alice.secret).body).missing.isEmpty)
    }

    @Test func anotherUsersChunksAreMissingForThisOne() throws {
        let held = try AliceHoldsAChunk(size: 5000)
        let (fixture, alice, bob, bytes, name) = (held.fixture, held.alice, held.bob, held.bytes, held.name)
        #expect(try MissingChunksResponse.parse(fixture.missing([name], token: bob.secret).body).missing == [name])
        #expect(try MissingChunksResponse.parse(fixture.missing([name], token: alice.secret).body).missing.isEmpty)
        // Bob uploads it too: one copy each, never shared.
        #expect(try fixture.uploadChunk(bytes, token: bob.secret).status == 201)
        #expect(fixture.heldChunkNames(user: "alice") == [name] && fixture.heldChunkNames(user: "bob") == [name])
        let (alices, bobs) = (fixture.heldChunks(user: "alice").chunks[name], fixture.heldChunks(user: "bob").chunks[name])
        #expect(alices != nil && bobs != nil && alices?.path != bobs?.path)
    }

    @Test func aTokenNarrowedToAPrefixIsToldEveryChunkIsMissing() throws {
        let fixture = try ServerFixture.withAccounts()
        let full = try fixture.issue(user: "alice")
        let narrow = try fixture.issue(user: "alice", device: "phone", scope: TokenScope(prefix: "S/a"))
        let bytes = randomBytes(5000)
        let name = Digest.sha256Hex(bytes)
        #expect(try fixture.uploadChunk(bytes, token: full.secret).status == 201)
        fixture.age(user: "alice", name, seconds: 3600)
        #expect(try MissingChunksResponse.parse(fixture.missing([name], token: narrow.secret).body).missing == [name])
        // Nor is it touched for the narrowed token: that would tell nothing, but keep what it cannot see.
        #expect(try #require(fixture.chunkModified(user: "alice", name)) < Clock.now() / 1_000_000_000 - 3000)
        // It uploads what it sends; the server keeps the one copy it holds.
        #expect(try fixture.uploadChunk(bytes, token: narrow.secret).status == 201)
        #expect(fixture.heldChunkNames(user: "alice") == [name])
        #expect(try MissingChunksResponse.parse(fixture.missing([name], token: narrow.secret).body).missing == [name])
    }

    struct Refusal: CustomTestStringConvertible, Sendable {
        var name: String
        var body: String
        var contentType = "application/json"
        var status: Int
        var code: String
        var field: String? = nil
        var testDescription: String { name }
    }

    static let good = Digest.sha256Hex(Array("x".utf8))
    static let refusals: [Refusal] = [
        Refusal(name: "a name in capitals", body: #"{"chunks": ["\#(good)", "\#(good.uppercased())"]}"#, status: 400, code: "bad-request", field: "chunks"),
        Refusal(name: "a short name", body: #"{"chunks": ["abc"]}"#, status: 400, code: "bad-request", field: "chunks"),
        Refusal(name: "not a list", body: #"{"chunks": "\#(good)"}"#, status: 400, code: "bad-json"),
        Refusal(name: "no list", body: #"{"names": []}"#, status: 400, code: "bad-json"),
        Refusal(name: "not JSON", body: "chunks", status: 400, code: "bad-json"),
        Refusal(name: "another type", body: #"{"chunks": []}"#, contentType: "text/plain", status: 415, code: "unsupported-media-type"),
        Refusal(name: "too many names", body: #"{"chunks": [\#(Array(repeating: "\"\(good)\"", count: 4097).joined(separator: ","))]}"#,
                status: 413, code: "too-large", field: "chunks"),
    ]

    @Test(arguments: refusals)
    func malformedQuestionsAreRefused(_ row: Refusal) throws {
        let fixture = try ServerFixture()
        let response = try fixture.request("POST", Routes.missingChunks, headers: [("Content-Type", row.contentType)], body: Array(row.body.utf8))
        #expect(response.status == row.status)
        let problem = try response.problem()
        #expect(problem.code == row.code)
        #expect(problem.field == row.field)
        if row.name == "a name in capitals" { #expect(problem.detail.contains("chunks[1]") && problem.detail.contains(Self.good.uppercased())) }
    }

    @Test func aReadOnlyTokenMayNotAsk() throws {
        let fixture = try ServerFixture.withAccounts()
        let reader = try fixture.issue(user: "alice", scope: TokenScope(readOnly: true))
        let response = try fixture.missing([Self.good], token: reader.secret)
        #expect(response.status == 403)
        #expect(try response.problem().code == "read-only-token")
        // The most names a request may carry are answered.
        let full = try fixture.issue(user: "alice")
        let many = (0..<4096).map { Digest.sha256Hex(Array(String($0).utf8)) }
        #expect(try MissingChunksResponse.parse(fixture.missing(many, token: full.secret).body).missing == many)
    }
}
