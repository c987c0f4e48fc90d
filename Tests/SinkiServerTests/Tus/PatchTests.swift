import Foundation
import Testing
@testable import SinkiServer
import SinkiRecord
import SinkiSupport
import SinkiTestSupport

/// PATCH: chunks, checksums, offsets, what it refuses (changing nothing), cut-off bodies and the lock.
@Suite struct TusPatchTests {
    struct Refusal: CustomTestStringConvertible, Sendable {
        var name: String
        /// Replaces the default headers (Tus-Resumable, Content-Type, Upload-Offset 4) when given.
        var headers: [(String, String)]? = nil
        var extra: [(String, String)] = []
        var body = bytes("4567")
        var id: String? = nil
        var status: Int
        var code: String
        var testDescription: String { name }
    }

    static let refusals: [Refusal] = [
        Refusal(name: "no Tus-Resumable", headers: [TusFixture.chunk, ("Upload-Offset", "4")], status: 412, code: "tus-version"),
        Refusal(name: "another content type", headers: [TusFixture.version, ("Content-Type", "application/octet-stream"), ("Upload-Offset", "4")],
                status: 415, code: "unsupported-media-type"),
        Refusal(name: "no content type", headers: [TusFixture.version, ("Upload-Offset", "4")], status: 415, code: "unsupported-media-type"),
        Refusal(name: "no Upload-Offset", headers: [TusFixture.version, TusFixture.chunk], status: 400, code: "bad-request"),
        Refusal(name: "offset behind", headers: [TusFixture.version, TusFixture.chunk, ("Upload-Offset", "2")], status: 409, code: "offset-mismatch"),
        Refusal(name: "offset ahead", headers: [TusFixture.version, TusFixture.chunk, ("Upload-Offset", "6")], status: 409, code: "offset-mismatch"),
        Refusal(name: "past the length", body: bytes("456789ab"), status: 413, code: "too-large"),
        Refusal(name: "checksum mismatch sha1", extra: [("Upload-Checksum", checksum(.sha1, bytes("nope")))], status: 460, code: "checksum-mismatch"),
        Refusal(name: "checksum mismatch sha256", extra: [("Upload-Checksum", checksum(.sha256, bytes("nope")))], status: 460, code: "checksum-mismatch"),
        Refusal(name: "checksum mismatch crc32", extra: [("Upload-Checksum", checksum(.crc32, bytes("nope")))], status: 460, code: "checksum-mismatch"),
        Refusal(name: "unknown algorithm", extra: [("Upload-Checksum", "md5 \(Base64.encode([UInt8](repeating: 1, count: 16)))")], status: 400, code: "bad-request"),
        Refusal(name: "malformed checksum", extra: [("Upload-Checksum", "sha256")], status: 400, code: "bad-request"),
        Refusal(name: "digest of the wrong size", extra: [("Upload-Checksum", "sha256 \(Base64.encode([1, 2, 3]))")], status: 400, code: "bad-request"),
        Refusal(name: "a length that differs", extra: [("Upload-Length", "12")], status: 400, code: "bad-request"),
        Refusal(name: "unknown upload", id: "0123456789abcdef0123456789abcdef", status: 404, code: "not-found"),
    ]

    @Test(arguments: refusals)
    func refusedChunkChangesNothing(_ row: Refusal) throws {
        let tus = try TusFixture()
        let id = try tus.create(length: 10)
        let first = try tus.patch(id, offset: 0, bytes("0123"))
        try #require(first.status == 204, "the first chunk: \(first.status) \(first.text)")
        let info = tus.info(id)
        let files = tus.snapshot()
        let headers = (row.headers ?? [TusFixture.version, TusFixture.chunk, ("Upload-Offset", "4")]) + row.extra
        let response = try tus.request("PATCH", "/v1/uploads/\(row.id ?? id)", headers: headers, body: row.body)
        #expect(response.status == row.status)
        #expect(try response.problem().code == row.code)
        #expect(response.header("Tus-Resumable") == "1.0.0")
        #expect(tus.info(id) == info)
        #expect(tus.snapshot() == files)
        #expect(try tus.head(id).header("Upload-Offset") == "4")
        // And the upload goes on from where it stood.
        #expect(try tus.patch(id, offset: 4, bytes("456789")).status == 204)
        #expect(tus.stored(id) == bytes("0123456789"))
        // The upload's SHA-256 took nothing of the refused chunk.
        #expect(tus.fixture.server.uploadStore?.assetFacts(id, user: "default")?.sha256 == Digest.sha256Hex(bytes("0123456789")))
    }

    @Test(arguments: [nil, Digest.Algorithm.sha1, .sha256, .crc32])
    func chunksMoveTheOffsetAndCarryTheExpiry(algorithm: Digest.Algorithm?) throws {
        let tus = try TusFixture()
        let data = pattern(300_000)
        let id = try tus.create(length: Int64(data.count))
        var offset = 0
        for size in [100_000, 150_000, 50_000] {
            let piece = Array(data[offset..<offset + size])
            let response = try tus.patch(id, offset: Int64(offset), piece,
                                         headers: algorithm.map { [("Upload-Checksum", checksum($0, piece))] } ?? [])
            offset += size
            #expect(response.status == 204)
            #expect(response.body.isEmpty)
            #expect(response.header("Upload-Offset") == String(offset))
            if offset < data.count {
                #expect(response.header("Upload-Expires").flatMap(HTTPDate.parse) != nil)
            } else {
                #expect(response.header("Upload-Expires") == nil)
            }
        }
        #expect(tus.stored(id) == data)
        #expect(tus.fixture.server.uploadStore?.assetFacts(id, user: "default")?.sha256 == Digest.sha256Hex(data))
    }

    @Test func methodOverrideTurnsAPostIntoAPatch() throws {
        let tus = try TusFixture()
        let id = try tus.create(length: 5)
        let response = try tus.request("POST", "/v1/uploads/\(id)", headers: [TusFixture.version, TusFixture.chunk, ("Upload-Offset", "0"),
                                                                           ("X-HTTP-Method-Override", "PATCH")], body: bytes("hello"))
        #expect(response.status == 204)
        #expect(tus.stored(id) == bytes("hello"))
        let head = try tus.request("GET", "/v1/uploads/\(id)", headers: [TusFixture.version, ("X-HTTP-Method-Override", "HEAD")])
        #expect(head.header("Upload-Offset") == "5")
    }

    @Test func aCutOffBodyKeepsWhatArrived() async throws {
        let tus = try TusFixture()
        let id = try tus.create(length: 100_000)
        let connection = try tus.fixture.connect()
        try connection.write(bytes("PATCH /v1/uploads/\(id) HTTP/1.1\r\nHost: x\r\nTus-Resumable: 1.0.0\r\nContent-Type: application/offset+octet-stream\r\n"
                                   + "Upload-Offset: 0\r\nContent-Length: 100000\r\n\r\n"))
        let sent = pattern(60_000)
        try connection.write(sent)
        try await waitUntil("the server to have the bytes") { tus.stored(id)?.count == 60_000 }
        _ = consume connection
        try await waitUntil("HEAD to say where to go on") { try tus.head(id).header("Upload-Offset") == "60000" }
        #expect(tus.stored(id) == sent)
        let rest = try tus.patch(id, offset: 60_000, pattern(40_000, seed: 7))
        #expect(rest.status == 204)
        #expect(tus.stored(id) == sent + pattern(40_000, seed: 7))
        // The upload's SHA-256 went on from the bytes that were kept.
        #expect(tus.fixture.server.uploadStore?.assetFacts(id, user: "default")?.sha256 == Digest.sha256Hex(sent + pattern(40_000, seed: 7)))
    }

    @Test func aCutOffBodyGivesBackTheBlocksReservedForIt() async throws {
        let tus = try TusFixture()
        let declared = 64 << 20
        let id = try tus.create(length: Int64(declared))
        let connection = try tus.fixture.connect()
        try connection.write(bytes("PATCH /v1/uploads/\(id) HTTP/1.1\r\nHost: x\r\nTus-Resumable: 1.0.0\r\nContent-Type: application/offset+octet-stream\r\n"
                                   + "Upload-Offset: 0\r\nContent-Length: \(declared)\r\n\r\n"))
        try connection.write(pattern(60_000))
        try await waitUntil("the server to have the bytes") { tus.stored(id)?.count == 60_000 }
        var info = stat()
        #expect(stat(tus.uploadsDirectory + "/\(id).bin", &info) == 0)
        // While the chunk streams, its declared length is allocated past the file's end.
        #expect(Int(info.st_blocks) * 512 >= declared)
        _ = consume connection
        try await waitUntil("HEAD to say where to go on") { try tus.head(id).header("Upload-Offset") == "60000" }
        #expect(stat(tus.uploadsDirectory + "/\(id).bin", &info) == 0)
        #expect(info.st_size == 60_000)
        #expect(Int(info.st_blocks) * 512 < 1 << 20)
    }

    @Test func aCutOffBodyWithAChecksumIsDiscarded() async throws {
        let tus = try TusFixture()
        let id = try tus.create(length: 100_000)
        let connection = try tus.fixture.connect()
        try connection.write(bytes("PATCH /v1/uploads/\(id) HTTP/1.1\r\nHost: x\r\nTus-Resumable: 1.0.0\r\nContent-Type: application/offset+octet-stream\r\n"
                                   + "Upload-Offset: 0\r\nUpload-Checksum: \(checksum(.sha256, pattern(100_000)))\r\nContent-Length: 100000\r\n\r\n"))
        try connection.write(pattern(60_000))
        try await waitUntil("the server to have the bytes") { tus.stored(id)?.count == 60_000 }
        _ = consume connection
        try await waitUntil("the chunk to be discarded") { tus.stored(id)?.count == 0 }
        #expect(try tus.head(id).header("Upload-Offset") == "0")
        // Sent again whole, the upload hashes to its bytes: the discarded ones left no trace in its SHA-256.
        let again = pattern(100_000, seed: 3)
        #expect(try tus.patch(id, offset: 0, again, headers: [("Upload-Checksum", checksum(.crc32, again))]).status == 204)
        #expect(tus.fixture.server.uploadStore?.assetFacts(id, user: "default")?.sha256 == Digest.sha256Hex(again))
    }

    /// A PATCH of 10 bytes at 0 whose first 5 are on disk, on a connection left open: the writer
    /// that holds the upload.
    func halfAPatch(_ tus: TusFixture, _ id: String) async throws -> TestConnection {
        let writer = try tus.fixture.connect()
        try writer.write(bytes("PATCH /v1/uploads/\(id) HTTP/1.1\r\nHost: x\r\nTus-Resumable: 1.0.0\r\nContent-Type: application/offset+octet-stream\r\n"
                               + "Upload-Offset: 0\r\nContent-Length: 10\r\n\r\n01234"))
        try await waitUntil("the first chunk to be under way") { tus.stored(id)?.count == 5 }
        return writer
    }

    @Test func oneWriterAtATime() async throws {
        // The first writer pauses on purpose; on a loaded machine the pause must not pass for a stall.
        let tus = try TusFixture { $0.uploads.stalledWriterSeconds = 600 }
        let id = try tus.create(length: 100)
        let first = try await halfAPatch(tus, id)
        let second = try tus.patch(id, offset: 0, bytes("abcde"))
        #expect(second.status == 423)
        #expect(try second.problem().code == "upload-locked")
        #expect(try tus.request("DELETE", "/v1/uploads/\(id)", headers: [TusFixture.version]).status == 423)
        try first.write(bytes("56789"))
        let answer = try first.receive()
        #expect(answer.status == 204)
        #expect(answer.header("Upload-Offset") == "10")
        #expect(tus.stored(id) == bytes("0123456789"))
    }

    /// The soak's stuck upload: a PATCH whose client was gone held the lock (the server never heard of
    /// the hang-up), so every retry of the same upload got 423 until the connection timeout. Here the
    /// holder stays connected and silent, which the server cannot tell from that: once it has been
    /// silent for `stalledWriterSeconds`, a PATCH ends it, and the retry after goes on from what it kept.
    @Test func aSilentWriterIsEndedByTheNextPatch() async throws {
        let tus = try TusFixture { $0.uploads.stalledWriterSeconds = 0.3 }
        let id = try tus.create(length: 10)
        let first = try await halfAPatch(tus, id)
        // Each try asks where the upload stands, as a client does; 423 until the silent one has been ended.
        try await waitUntil("a PATCH to get past the silent writer", timeout: 60) {
            guard let offset = try tus.head(id).header("Upload-Offset").flatMap({ Int($0) }) else { return false }
            let rest = Array(bytes("0123456789")[offset...])
            let answer = try tus.patch(id, offset: Int64(offset), rest)
            #expect(answer.status == 204 || answer.status == 423)
            return answer.status == 204
        }
        #expect(tus.stored(id) == bytes("0123456789"))
        #expect(try tus.head(id).header("Upload-Offset") == "10")
        // The silent writer's connection was shut: it gets no answer that could be taken for success.
        #expect((try? first.receive(timeout: 2))?.status != 204)
    }

    @Test func aFinishedUploadTakesNoMoreBytes() throws {
        let tus = try TusFixture()
        let id = try tus.create(length: 3)
        #expect(try tus.patch(id, offset: 0, bytes("abc")).status == 204)
        let more = try tus.patch(id, offset: 3, bytes("d"))
        #expect(more.status == 413)
        #expect(tus.stored(id) == bytes("abc"))
    }

    @Test func aRestartedServerGoesOnAndHashesWhatIsOnDisk() throws {
        let directory = TemporaryDirectory("sinki-tus-restart")
        let data = pattern(500_000, seed: 3)
        func start() throws -> SyncServer {
            var configuration = ServerConfiguration(listen: "127.0.0.1:0", dataDirectory: directory.child("data"))
            configuration.authentication = .none // a tus protocol test, not an authentication one
            let server = try SyncServer(configuration: configuration, logger: testLogger())
            try server.start()
            return server
        }
        var server = try start()
        var connection = try TestConnection(port: server.boundPort)
        let created = try connection.request("POST", "/v1/uploads/", headers: [TusFixture.version, ("Upload-Length", String(data.count))])
        let location = try #require(created.locationPath)
        let half = try connection.request("PATCH", location, headers: [TusFixture.version, TusFixture.chunk, ("Upload-Offset", "0")],
                                          body: Array(data[0..<200_000]))
        #expect(half.status == 204)
        server.stop()
        server = try start()
        defer { server.stop() }
        connection = try TestConnection(port: server.boundPort)
        #expect(try connection.request("HEAD", location, headers: [TusFixture.version]).header("Upload-Offset") == "200000")
        let rest = try connection.request("PATCH", location, headers: [TusFixture.version, TusFixture.chunk, ("Upload-Offset", "200000")],
                                          body: Array(data[200_000...]))
        #expect(rest.status == 204)
        let id = String(location.split(separator: "/").last!)
        #expect(server.uploadStore?.assetFacts(id, user: "default")?.sha256 == Digest.sha256Hex(data))
    }
}
