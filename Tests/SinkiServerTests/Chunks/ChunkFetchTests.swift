import Foundation
@testable import SinkiServer
import SinkiRecord
import SinkiSupport
import SinkiTestSupport
import Testing

/// `POST /v1/chunks/fetch`: several chunks in one answer, framed in the order asked, to their user only.
@Suite struct ChunkFetchTests {
    /// The frames of an answer: (name, bytes), in order.
    func frames(_ response: TestResponse) throws -> [(String, [UInt8])] {
        var reader = ChunkFrameReader(.answer, maxLength: 4 << 20)
        var out: [(String, [UInt8])] = []
        try response.body.withUnsafeBytes { body in
            try reader.feed(body) { event in
                switch event {
                case let .begin(name, _, crc32):
                    #expect(crc32 == nil)
                    out.append((name, []))
                case let .bytes(bytes): out[out.count - 1].1 += bytes
                case .end: break
                }
            }
        }
        try reader.finish()
        return out
    }

    @Test func answersEveryChunkInTheOrderAskedAndAnEmptyFrameForOneNotHeld() throws {
        let fixture = try ServerFixture()
        let chunks = [randomBytes(1), randomBytes(300_000), randomBytes(Int(ChunkStore.maxChunkBytes))]
        #expect(try fixture.sendBatch(chunks).status == 200)
        let unknown = Digest.sha256Hex(Array("unknown".utf8))
        let names = [Digest.sha256Hex(chunks[2]), unknown, Digest.sha256Hex(chunks[0]), Digest.sha256Hex(chunks[2]), Digest.sha256Hex(chunks[1])]
        let response = try fixture.fetch(names)
        #expect(response.status == 200 && response.header("Content-Type") == ChunkFrames.mediaType)
        let got = try frames(response)
        // Each once, in the order first asked.
        #expect(got.map(\.0) == [names[0], unknown, names[2], names[4]])
        #expect(got.map(\.1) == [chunks[2], [], chunks[0], chunks[1]])
        #expect(try frames(fixture.fetch([])).isEmpty)
    }

    @Test func badRequestsAnswerWhy() throws {
        let fixture = try ServerFixture()
        let tooMany = (0..<(ChunkNamesRequest.mostToFetch + 1)).map { Digest.sha256Hex(Array(String($0).utf8)) }
        let cases: [(name: String, type: String, body: [UInt8], status: Int, code: String)] = [
            ("a name that is no hash", "application/json", ChunkNamesRequest(chunks: ["nothex"]).jsonBytes, 400, "bad-request"),
            ("more names than one answer holds", "application/json", ChunkNamesRequest(chunks: tooMany).jsonBytes, 413, "too-large"),
            ("not JSON", "application/json", Array("chunks".utf8), 400, "bad-json"),
            ("not said to be JSON", "text/plain", ChunkNamesRequest(chunks: []).jsonBytes, 415, "unsupported-media-type"),
        ]
        for item in cases {
            let response = try fixture.request("POST", Routes.fetchChunks, headers: [("Content-Type", item.type)], body: item.body)
            #expect(response.status == item.status, "\(item.name): \(response.text)")
            #expect(try response.problem().code == item.code, "\(item.name)")
        }
    }

    @Test func anotherUsersChunksAndThoseANarrowedTokenDidNotSendAreNotHeldForIt() throws {
        let held = try AliceHoldsAChunk(size: 1000)
        let (fixture, alice, bob, bytes, name) = (held.fixture, held.alice, held.bob, held.bytes, held.name)
        #expect(try frames(fixture.fetch([name], token: bob.secret)).map(\.1) == [[]])
        #expect(try frames(fixture.fetch([name], token: alice.secret)).map(\.1) == [bytes])
        // A read-only token reads.
        let reader = try fixture.issue(user: "alice", device: "tv", scope: TokenScope(readOnly: true))
        #expect(try frames(fixture.fetch([name], token: reader.secret)).map(\.1) == [bytes])
        // A narrowed token reads only what it sent itself.
        let narrow = try fixture.issue(user: "alice", device: "phone", scope: TokenScope(prefix: "S/a"))
        let mine = randomBytes(700)
        #expect(try fixture.sendBatch([mine], token: narrow.secret).status == 200)
        #expect(try frames(fixture.fetch([name, Digest.sha256Hex(mine)], token: narrow.secret)).map(\.1) == [[], mine])
    }
}
