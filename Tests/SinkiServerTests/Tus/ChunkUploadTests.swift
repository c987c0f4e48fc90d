import Foundation
import Glibc
@testable import SinkiServer
import SinkiRecord
import SinkiSupport
import SinkiTestSupport
import Testing

/// Chunk uploads: a tus upload whose `Upload-Metadata` has `chunk` goes, once whole, to the user's
/// chunks under that name (docs/protocol.md, "Chunks").
@Suite struct ChunkUploadTests {
    struct Refusal: CustomTestStringConvertible, Sendable {
        var name: String
        var headers: [(String, String)]
        var status: Int
        var code: String
        var testDescription: String { name }
    }

    static let name = Digest.sha256Hex(Array("chunk".utf8))

    static let refusals: [Refusal] = [
        Refusal(name: "a deferred length", headers: [chunkMetadata(name), ("Upload-Defer-Length", "1")], status: 400, code: "bad-request"),
        Refusal(name: "no length", headers: [chunkMetadata(name)], status: 400, code: "bad-request"),
        Refusal(name: "an empty chunk", headers: [chunkMetadata(name), ("Upload-Length", "0")], status: 400, code: "bad-request"),
        Refusal(name: "over the largest chunk", headers: [chunkMetadata(name), ("Upload-Length", String(ContentID.maxChunkSize + 1))],
                status: 413, code: "too-large"),
        Refusal(name: "a name in capitals", headers: [chunkMetadata(name.uppercased()), ("Upload-Length", "5")], status: 400, code: "bad-request"),
        Refusal(name: "a short name", headers: [chunkMetadata(String(name.dropLast())), ("Upload-Length", "5")], status: 400, code: "bad-request"),
        Refusal(name: "a name that is not hex", headers: [chunkMetadata(String(name.dropLast()) + "g"), ("Upload-Length", "5")],
                status: 400, code: "bad-request"),
        Refusal(name: "the key without a value", headers: [("Upload-Metadata", "chunk"), ("Upload-Length", "5")], status: 400, code: "bad-request"),
        Refusal(name: "a partial upload", headers: [chunkMetadata(name), ("Upload-Length", "5"), ("Upload-Concat", "partial")],
                status: 400, code: "bad-request"),
    ]

    @Test(arguments: refusals)
    func refusedChunkCreationStoresNothing(_ row: Refusal) throws {
        let tus = try TusFixture()
        let response = try tus.request("POST", Routes.uploads, headers: [TusFixture.version] + row.headers)
        #expect(response.status == row.status)
        #expect(try response.problem().code == row.code)
        #expect(response.header("Location") == nil)
        #expect(tus.snapshot().isEmpty)
        #expect(tus.fixture.heldChunkNames().isEmpty)
    }

    @Test(arguments: [nil, Digest.Algorithm.crc32, .sha1, .sha256])
    func aChunkSentInItsCreationGoesToTheChunks(algorithm: Digest.Algorithm?) throws {
        let tus = try TusFixture()
        let bytes = randomBytes(300_000)
        let name = Digest.sha256Hex(bytes)
        let response = try tus.fixture.uploadChunk(bytes, headers: algorithm.map { [("Upload-Checksum", checksum($0, bytes))] } ?? [])
        #expect(response.status == 201)
        #expect(response.header("Upload-Offset") == "300000")
        // The server computed no SHA-256 of it: no ETag, unlike an ordinary upload.
        #expect(response.header("ETag") == nil)
        #expect(tus.fixture.heldChunk(name) == bytes)
        // The upload itself is done with: nothing left in the uploads folder, its id unknown.
        #expect(tus.snapshot().isEmpty)
        let id = String(try #require(response.header("Location")).split(separator: "/").last!)
        #expect(try tus.head(id).status == 404)
    }

    @Test func aChunkSentByPatchesGoesToTheChunksWithItsLastByte() throws {
        let tus = try TusFixture()
        let bytes = randomBytes(1 << 20)
        let name = Digest.sha256Hex(bytes)
        let id = try tus.create(length: Int64(bytes.count), headers: [chunkMetadata(name)])
        let first = try tus.patch(id, offset: 0, Array(bytes[..<400_000]), headers: [("Upload-Checksum", checksum(.crc32, Array(bytes[..<400_000])))])
        #expect(first.status == 204 && first.header("Upload-Offset") == "400000")
        #expect(tus.fixture.heldChunk(name) == nil)
        #expect(try tus.head(id).header("Upload-Offset") == "400000")
        let rest = Array(bytes[400_000...])
        let last = try tus.patch(id, offset: 400_000, rest, headers: [("Upload-Checksum", checksum(.crc32, rest))])
        #expect(last.status == 204 && last.header("Upload-Offset") == String(bytes.count))
        #expect(tus.fixture.heldChunk(name) == bytes)
        #expect(tus.snapshot().isEmpty)
    }

    @Test func aChunkWhoseChecksumDoesNotMatchIsRefusedAndNotStored() throws {
        let tus = try TusFixture()
        let bytes = randomBytes(100_000)
        let name = Digest.sha256Hex(bytes)
        let created = try tus.fixture.uploadChunk(bytes, headers: [("Upload-Checksum", checksum(.crc32, Array("other".utf8)))])
        #expect(created.status == 460)
        #expect(try created.problem().code == "checksum-mismatch")
        let id = try tus.create(length: Int64(bytes.count), headers: [chunkMetadata(name)])
        let patched = try tus.patch(id, offset: 0, bytes, headers: [("Upload-Checksum", checksum(.crc32, Array("other".utf8)))])
        #expect(patched.status == 460)
        #expect(try tus.head(id).header("Upload-Offset") == "0")
        #expect(tus.fixture.heldChunkNames().isEmpty)
        #expect(try tus.patch(id, offset: 0, bytes, headers: [("Upload-Checksum", checksum(.crc32, bytes))]).status == 204)
        #expect(tus.fixture.heldChunk(name) == bytes)
    }

    @Test func aChunkCutOffMidPatchIsResumedFromWhereItStopped() throws {
        let tus = try TusFixture()
        let bytes = randomBytes(2 << 20)
        let name = Digest.sha256Hex(bytes)
        let id = try tus.create(length: Int64(bytes.count), headers: [chunkMetadata(name)])
        do {
            let cut = try tus.fixture.connect()
            var head = "PATCH /v1/uploads/\(id) HTTP/1.1\r\nHost: localhost\r\nTus-Resumable: 1.0.0\r\n"
            head += "Content-Type: application/offset+octet-stream\r\nUpload-Offset: 0\r\nContent-Length: \(bytes.count)\r\n\r\n"
            try cut.write(Array(head.utf8) + Array(bytes[..<700_000]))
            try waitUntilSync("the first bytes to be written") { (tus.stored(id)?.count ?? 0) >= 700_000 }
        }
        // The client is gone: what arrived is kept, and HEAD says where to go on.
        var offset: Int64 = 0
        try waitUntilSync("the cut-off PATCH to end") {
            let head = try tus.head(id)
            offset = Int64(head.header("Upload-Offset") ?? "") ?? 0
            return head.status == 200 && offset == 700_000
        }
        #expect(tus.fixture.heldChunk(name) == nil)
        #expect(try tus.patch(id, offset: offset, Array(bytes[Int(offset)...])).status == 204)
        #expect(tus.fixture.heldChunk(name) == bytes)
    }

    @Test func aChunkHeldAlreadyIsNotStoredTwice() throws {
        let tus = try TusFixture()
        let bytes = randomBytes(200_000)
        let name = Digest.sha256Hex(bytes)
        #expect(try tus.fixture.uploadChunk(bytes).status == 201)
        let before = try #require(tus.fixture.heldChunks().chunks[name])
        tus.fixture.age(name, seconds: 3600)
        let again = try tus.fixture.uploadChunk(bytes)
        #expect(again.status == 201 && again.header("Upload-Offset") == "200000")
        let after = try #require(tus.fixture.heldChunks().chunks[name])
        // The same bytes in the same place, not a second copy; its time refreshed.
        #expect(after.path == before.path && after.offset == before.offset)
        #expect(tus.fixture.heldChunkNames() == [name])
        #expect(tus.snapshot().isEmpty)
        #expect(try #require(tus.fixture.chunkModified(name)) >= Clock.now() / 1_000_000_000 - 60)
    }

    @Test func theServerDoesNotHashAChunkUpload() throws {
        // The name is taken as given: receivers check every chunk and report damage (DELETE).
        let tus = try TusFixture()
        let name = Digest.sha256Hex(Array("what it should be".utf8))
        #expect(try tus.fixture.uploadChunk(Array("something else".utf8), name: name).status == 201)
        #expect(tus.fixture.heldChunk(name) == Array("something else".utf8))
    }

    @Test func chunkUploadsAreNotCountedButHeldToTheTokensSizeAndWrites() throws {
        let fixture = try ServerFixture.withAccounts()
        let limited = try fixture.issue(user: "alice", scope: TokenScope(maxUploadBytes: 1000, maxUploads: 1))
        for index in 0..<3 { #expect(try fixture.uploadChunk(randomBytes(1000 - index), token: limited.secret).status == 201) }
        let over = try fixture.uploadChunk(randomBytes(1001), token: limited.secret)
        #expect(over.status == 413)
        #expect(try over.problem().field == "maxUploadBytes")
        // The one ordinary upload it may start is still there to start.
        #expect(try fixture.createUpload(length: 10, token: limited).status == 201)
        #expect(try fixture.createUpload(length: 10, token: limited).status == 403)
        #expect(fixture.heldChunkNames(user: "alice").count == 3)
        let reader = try fixture.issue(user: "alice", scope: TokenScope(readOnly: true))
        let refused = try fixture.uploadChunk(randomBytes(10), token: reader.secret)
        #expect(refused.status == 403)
        #expect(try refused.problem().code == "read-only-token")
    }

    @Test func aChunkUploadBegunThroughOneServerIsFinishedThroughAnother() throws {
        let shared = TemporaryDirectory("sinki-shared-chunks")
        func server() throws -> ServerFixture {
            try ServerFixture {
                $0.uploadsDirectory = shared.child("uploads")
                $0.chunksDirectory = shared.child("chunks")
            }
        }
        let one = try server(), two = try server()
        let bytes = randomBytes(500_000)
        let name = Digest.sha256Hex(bytes)
        let created = try one.request("POST", Routes.uploads, headers: [TusFixture.version, ("Upload-Length", "500000"), chunkMetadata(name)])
        let id = String(try #require(created.header("Location")).split(separator: "/").last!)
        let chunk = [TusFixture.version, TusFixture.chunk]
        #expect(try one.request("PATCH", Routes.uploads + id, headers: chunk + [("Upload-Offset", "0")], body: Array(bytes[..<100_000])).status == 204)
        #expect(try two.request("PATCH", Routes.uploads + id, headers: chunk + [("Upload-Offset", "100000")], body: Array(bytes[100_000...])).status == 204)
        #expect(ServerChunks(shared.child("chunks"), user: "default").bytes(name) == bytes)
        // Finished through the second: the first knows the upload no more.
        #expect(try one.request("HEAD", Routes.uploads + id, headers: [TusFixture.version]).status == 404)
        #expect(try one.request("GET", Routes.chunks + name).body == bytes)
    }
}
