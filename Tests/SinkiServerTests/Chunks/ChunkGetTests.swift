import Foundation
@testable import SinkiServer
import SinkiRecord
import SinkiSupport
import SinkiTestSupport
import Testing

/// `GET /v1/chunks/HASH`: a chunk's bytes, whole or by one Range, to its user only.
@Suite struct ChunkGetTests {
    @Test func servesTheChunkWholeAndByRange() throws {
        let fixture = try ServerFixture()
        let bytes = randomBytes(100_000)
        let name = Digest.sha256Hex(bytes)
        #expect(try fixture.uploadChunk(bytes).status == 201)
        let whole = try fixture.request("GET", Routes.chunks + name)
        #expect(whole.status == 200 && whole.body == bytes)
        #expect(whole.header("Content-Type") == "application/octet-stream")
        #expect(whole.header("ETag") == "\"\(name)\"")
        #expect(whole.header("Accept-Ranges") == "bytes")
        let cases: [(String, Int, String?, Range<Int>?)] = [
            ("bytes=10-19", 206, "bytes 10-19/100000", 10..<20),
            ("bytes=99990-", 206, "bytes 99990-99999/100000", 99_990..<100_000),
            ("bytes=-5", 206, "bytes 99995-99999/100000", 99_995..<100_000),
            ("bytes=100000-", 416, "bytes */100000", nil),
            ("bytes=0-1,5-6", 200, nil, 0..<100_000),
        ]
        for (range, status, contentRange, slice) in cases {
            let response = try fixture.request("GET", Routes.chunks + name, headers: [("Range", range)])
            #expect(response.status == status, "\(range)")
            #expect(response.header("Content-Range") == contentRange, "\(range)")
            if let slice { #expect(response.body == Array(bytes[slice]), "\(range)") }
        }
        #expect(try fixture.request("GET", Routes.chunks + name, headers: [("Range", "bytes=10-19"), ("If-Range", "\"other\"")]).status == 200)
    }

    @Test func anotherUsersChunkAnswersLikeAnUnknownOne() throws {
        let held = try AliceHoldsAChunk(size: 1000)
        let (fixture, alice, bob, bytes, name) = (held.fixture, held.alice, held.bob, held.bytes, held.name)
        let unknown = Digest.sha256Hex(Array("unknown".utf8))
        func shape(_ id: String) throws -> ProblemShape {
            var shape = try ProblemShape(try fixture.request("GET", Routes.chunks + id, token: bob.secret))
            shape.detail = shape.detail.replacingOccurrences(of: id, with: "ID")
            return shape
        }
        #expect(try shape(name) == shape(unknown))
        #expect(try shape(name).status == 404 && shape(name).code == "not-found")
        #expect(try fixture.request("GET", Routes.chunks + "nothex", token: alice.secret).status == 404)
        #expect(try fixture.request("GET", Routes.chunks + name, token: alice.secret).body == bytes)
        // A read-only token reads.
        let reader = try fixture.issue(user: "alice", scope: TokenScope(readOnly: true))
        #expect(try fixture.request("GET", Routes.chunks + name, token: reader.secret).body == bytes)
    }

    @Test func aNarrowedTokenReadsOnlyTheChunksItUploaded() throws {
        let fixture = try ServerFixture.withAccounts()
        let full = try fixture.issue(user: "alice")
        let narrow = try fixture.issue(user: "alice", device: "phone", scope: TokenScope(prefix: "S/a"))
        let theirs = randomBytes(1000), mine = randomBytes(1000)
        #expect(try fixture.uploadChunk(theirs, token: full.secret).status == 201)
        #expect(try fixture.uploadChunk(mine, token: narrow.secret).status == 201)
        #expect(try fixture.request("GET", Routes.chunks + Digest.sha256Hex(theirs), token: narrow.secret).status == 404)
        #expect(try fixture.request("GET", Routes.chunks + Digest.sha256Hex(mine), token: narrow.secret).body == mine)
        #expect(try fixture.request("GET", Routes.chunks + Digest.sha256Hex(mine), token: full.secret).body == mine)
        // Uploading the same bytes proves it has them: then it may read that chunk too.
        #expect(try fixture.uploadChunk(theirs, token: narrow.secret).status == 201)
        #expect(try fixture.request("GET", Routes.chunks + Digest.sha256Hex(theirs), token: narrow.secret).body == theirs)
    }
}
