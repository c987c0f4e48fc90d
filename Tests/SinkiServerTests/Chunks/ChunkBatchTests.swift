import Foundation
import Glibc
@testable import SinkiServer
import SinkiRecord
import SinkiSupport
import SinkiTestSupport
import Testing

/// `POST /v1/chunks/batch`: several chunks in one request, framed, each named as its last byte is in.
@Suite struct ChunkBatchTests {
    @Test func everyFrameBecomesAChunkUnderItsName() throws {
        let fixture = try ServerFixture()
        let chunks = [randomBytes(1), randomBytes(100_000), randomBytes(Int(ChunkStore.maxChunkBytes))]
        let response = try fixture.sendBatch(chunks)
        #expect(response.status == 200)
        #expect(try ChunkBatchResponse.parse(response.body) == ChunkBatchResponse(stored: 3, refused: []))
        for chunk in chunks { #expect(fixture.heldChunk(Digest.sha256Hex(chunk)) == chunk) }
        #expect(try MissingChunksResponse.parse(fixture.missing(chunks.map { Digest.sha256Hex($0) }).body).missing.isEmpty)
        // Sent again: held already, the same bytes; a chunk twice in one body is taken twice, stored once.
        let again = try fixture.sendBatch([chunks[1], chunks[1], chunks[0]])
        #expect(try ChunkBatchResponse.parse(again.body) == ChunkBatchResponse(stored: 3, refused: []))
        #expect(fixture.heldChunkNames() == Set(chunks.map { Digest.sha256Hex($0) }))
        // No body: no frames.
        #expect(try ChunkBatchResponse.parse(fixture.sendBatch([]).body) == ChunkBatchResponse(stored: 0, refused: []))
    }

    @Test func aFrameDamagedOnTheWayIsNeverStoredAndEndsTheBatch() throws {
        let fixture = try ServerFixture()
        let good = randomBytes(5000), damaged = randomBytes(5000), after = randomBytes(5000)
        var body = ChunkFrames.encode([(Digest.sha256Hex(good), good)])
        // The CRC-32 of other bytes: what the sender read is not what came.
        body += ChunkFrames.header(name: Digest.sha256Hex(damaged), length: damaged.count, crc32: Digest.hash(after, .crc32)) + damaged
        body += ChunkFrames.encode([(Digest.sha256Hex(after), after)])
        let response = try fixture.request("POST", Routes.chunkBatch, headers: [("Content-Type", ChunkFrames.mediaType)], body: body)
        #expect(response.status == 460)
        #expect(try response.problem().code == "checksum-mismatch")
        #expect(fixture.heldChunkNames() == [Digest.sha256Hex(good)])
    }

    @Test func malformedOrRefusedBodiesAnswerWhyAndStoreNothingPastTheFault() throws {
        let fixture = try ServerFixture.withAccounts()
        let full = try fixture.issue(user: "alice")
        let reader = try fixture.issue(user: "alice", device: "tv", scope: TokenScope(readOnly: true))
        let small = try fixture.issue(user: "alice", device: "watch", scope: TokenScope(maxUploadBytes: 1000))
        let chunk = randomBytes(2000)
        let frame = ChunkFrames.encode([(Digest.sha256Hex(chunk), chunk)])
        let tooLong = ChunkFrames.header(name: Digest.sha256Hex(chunk), length: Int(ChunkStore.maxChunkBytes) + 1, crc32: [0, 0, 0, 0])
        let cases: [(name: String, token: String, type: String, body: [UInt8], status: Int, code: String)] = [
            ("ends inside a frame", full.secret, ChunkFrames.mediaType, Array(frame.dropLast(10)), 400, "bad-request"),
            ("ends inside a header", full.secret, ChunkFrames.mediaType, Array(frame.prefix(20)), 400, "bad-request"),
            ("a frame of no bytes", full.secret, ChunkFrames.mediaType, ChunkFrames.header(name: Digest.sha256Hex([]), length: 0, crc32: [0, 0, 0, 0]), 400, "bad-request"),
            ("a frame longer than a chunk", full.secret, ChunkFrames.mediaType, tooLong, 413, "too-large"),
            ("not framed", full.secret, "application/octet-stream", frame, 415, "unsupported-media-type"),
            ("a read-only token", reader.secret, ChunkFrames.mediaType, frame, 403, "read-only-token"),
            ("over the token's maxUploadBytes", small.secret, ChunkFrames.mediaType, frame, 403, "beyond-scope"),
        ]
        for item in cases {
            let response = try fixture.request("POST", Routes.chunkBatch, token: item.token, headers: [("Content-Type", item.type)], body: item.body)
            #expect(response.status == item.status, "\(item.name): \(response.text)")
            #expect(try response.problem().code == item.code, "\(item.name)")
            #expect(fixture.heldChunkNames(user: "alice").isEmpty, "\(item.name)")
        }
        #expect(try fixture.sendBatch([chunk], token: full.secret).status == 200)
        #expect(fixture.heldChunk(user: "alice", Digest.sha256Hex(chunk)) == chunk)
    }

    @Test func aNarrowedTokensBytesMustHashToTheirName() throws {
        let fixture = try ServerFixture.withAccounts()
        let full = try fixture.issue(user: "alice")
        let narrow = try fixture.issue(user: "alice", device: "phone", scope: TokenScope(prefix: "S/a"))
        let held = randomBytes(3000), planted = randomBytes(3000), honest = randomBytes(3000)
        #expect(try fixture.sendBatch([held], token: full.secret).status == 200)
        // Other bytes under a name the user holds, and under a new name: both refused, nothing replaced.
        var body = ChunkFrames.header(name: Digest.sha256Hex(held), length: planted.count, crc32: Digest.hash(planted, .crc32)) + planted
        body += ChunkFrames.header(name: Digest.sha256Hex(honest), length: planted.count, crc32: Digest.hash(planted, .crc32)) + planted
        body += ChunkFrames.encode([(Digest.sha256Hex(honest), honest)])
        let response = try fixture.request("POST", Routes.chunkBatch, token: narrow.secret, headers: [("Content-Type", ChunkFrames.mediaType)], body: body)
        #expect(response.status == 200)
        #expect(try ChunkBatchResponse.parse(response.body) == ChunkBatchResponse(stored: 1, refused: [Digest.sha256Hex(held), Digest.sha256Hex(honest)]))
        #expect(fixture.heldChunk(user: "alice", Digest.sha256Hex(held)) == held)
        #expect(fixture.heldChunk(user: "alice", Digest.sha256Hex(honest)) == honest)
        // It proved it has `honest`: it may read it; `held` it never proved.
        #expect(try fixture.request("GET", Routes.chunks + Digest.sha256Hex(honest), token: narrow.secret).body == honest)
        #expect(try fixture.request("GET", Routes.chunks + Digest.sha256Hex(held), token: narrow.secret).status == 404)
    }

    @Test func eachChunkIsHeldOnceItsFrameIsInAndABodyCutOffKeepsTheWholeOnes() throws {
        let fixture = try ServerFixture()
        let first = randomBytes(50_000), second = randomBytes(50_000)
        let body = ChunkFrames.encode([(Digest.sha256Hex(first), first), (Digest.sha256Hex(second), second)])
        let connection = try fixture.connect()
        try connection.send("POST", Routes.chunkBatch, headers: [("Content-Type", ChunkFrames.mediaType), ("Content-Length", String(body.count))])
        // The first frame and half the second: the first is a chunk already, while the request is open.
        try connection.write(Array(body.prefix(ChunkFrames.Kind.upload.headerBytes * 2 + first.count + 20_000)))
        try waitUntilSync("the first chunk held before the body ends") { fixture.heldChunk(Digest.sha256Hex(first)) == first }
        // Fetched meanwhile, as a receiver streaming the file does.
        let fetched = try fixture.fetch([Digest.sha256Hex(first)])
        #expect(fetched.status == 200 && Array(fetched.body.dropFirst(ChunkFrames.Kind.answer.headerBytes)) == first)
        shutdown(connection.fd, Int32(SHUT_RDWR))
        // The cut-off frame was never named (a chunk is named only once its last byte is in), and never
        // will be: its unnamed file goes with the request.
        #expect(fixture.heldChunkNames() == [Digest.sha256Hex(first)])
        #expect(try MissingChunksResponse.parse(fixture.missing([Digest.sha256Hex(second)]).body).missing == [Digest.sha256Hex(second)])
    }
}

extension ServerFixture {
    /// `POST /v1/chunks/batch` of `chunks`, each framed with its CRC-32.
    func sendBatch(_ chunks: [[UInt8]], token: String? = nil) throws -> TestResponse {
        try request("POST", Routes.chunkBatch, token: token, headers: [("Content-Type", ChunkFrames.mediaType)],
                    body: ChunkFrames.encode(chunks.map { (Digest.sha256Hex($0), $0) }))
    }

    /// `POST /v1/chunks/fetch` of `names`.
    func fetch(_ names: [String], token: String? = nil) throws -> TestResponse {
        try request("POST", Routes.fetchChunks, token: token, headers: [("Content-Type", "application/json")],
                    body: ChunkNamesRequest(chunks: names).jsonBytes)
    }
}
