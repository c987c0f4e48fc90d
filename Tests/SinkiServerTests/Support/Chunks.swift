import Foundation
import Glibc
import SinkiRecord
@testable import SinkiServer
import SinkiSupport
import SinkiTestSupport

/// A large file of test content cut into given chunks (not by the chunker: the server never cuts), and
/// the manifest that names them.
struct ChunkedFile {
    let chunks: [[UInt8]]
    /// Each chunk's name and size, hashed once.
    let refs: [ChunkRef]
    /// The manifest's hash.
    let hash: String

    init(chunks: [[UInt8]]) {
        self.chunks = chunks
        refs = chunks.map { ChunkRef(sha256: Digest.sha256Hex($0), size: Int64($0.count)) }
        hash = ContentID.manifestHash(hex: refs.map { ($0.sha256, $0.size) })!
    }

    /// Random chunks of these sizes.
    static func random(_ sizes: [Int]) -> ChunkedFile { ChunkedFile(chunks: sizes.map(randomBytes)) }

    var names: [String] { refs.map(\.sha256) }
    var size: Int64 { Int64(chunks.reduce(0) { $0 + $1.count }) }
    var bytes: [UInt8] { chunks.flatMap { $0 } }
    var asset: Asset { Asset(manifestHash: hash, chunks: refs) }

    /// Its record: `sha256` the manifest hash above `ContentID.wholeFileLimit`, the bytes' hash below.
    func record(_ path: String, baseTag: Int64 = 0, device: String = "laptop") -> Record {
        Record(path: path, type: "keep-both", asset: asset, baseTag: baseTag, size: size,
               sha256: ContentID.isManifest(size: size) ? hash : Digest.sha256Hex(bytes), mode: 0o644,
               modifiedAt: 1_764_422_400_123_456_789, device: device)
    }
}

/// `Upload-Metadata` of a chunk upload.
func chunkMetadata(_ name: String) -> (String, String) { ("Upload-Metadata", "\(Tus.chunkMetadataKey) " + Base64.encode(Array(name.utf8))) }

extension ServerFixture {
    var chunksDirectory: String { directory.child("data") + "/chunks" }

    /// Where the server keeps `user`'s chunk `name`.
    func chunkPath(user: String = "default", _ name: String) -> String {
        chunksDirectory + "/" + Digest.sha256Hex(Array(user.utf8)) + "/" + name.prefix(2) + "/" + name
    }

    /// The chunk's bytes as the server holds them; nil when it does not.
    func heldChunk(user: String = "default", _ name: String) -> [UInt8]? {
        FileManager.default.contents(atPath: chunkPath(user: user, name)).map { Array($0) }
    }

    /// Every chunk file `user` holds, by name.
    func heldChunkNames(user: String = "default") -> Set<String> {
        let folder = chunksDirectory + "/" + Digest.sha256Hex(Array(user.utf8))
        var names = Set<String>()
        for fanOut in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] where fanOut.count == 2 {
            for name in (try? FileManager.default.contentsOfDirectory(atPath: folder + "/" + fanOut)) ?? [] { names.insert(name) }
        }
        return names
    }

    /// One chunk upload by creation-with-upload, under `name` (its SHA-256 unless told otherwise).
    func uploadChunk(_ bytes: [UInt8], name: String? = nil, token: String? = nil, headers: [(String, String)] = []) throws -> TestResponse {
        try request("POST", Routes.uploads, token: token,
                    headers: [("Tus-Resumable", "1.0.0"), ("Upload-Length", String(bytes.count)), ("Content-Type", "application/offset+octet-stream"),
                              chunkMetadata(name ?? Digest.sha256Hex(bytes))] + headers,
                    body: bytes)
    }

    /// Uploads every chunk of `file`, each expected to answer 201.
    func uploadChunks(of file: ChunkedFile, token: String? = nil) throws {
        for chunk in file.chunks {
            let response = try uploadChunk(chunk, token: token)
            guard response.status == 201 else { throw ClientError(description: "chunk upload answered \(response.status): \(response.text)") }
        }
    }

    /// `POST /v1/chunks/missing`.
    func missing(_ names: [String], token: String? = nil) throws -> TestResponse {
        try request("POST", Routes.missingChunks, token: token, headers: [("Content-Type", "application/json")],
                    body: ChunkNamesRequest(chunks: names).jsonBytes)
    }

    /// Waits for the retention pass a server runs at start, so that a test's own pass (`purgeNow`) is
    /// the one that finds what it set up.
    func settleRetention() throws {
        try waitUntilSync("the retention pass at start") { server.retentionPasses >= 1 }
    }

    /// Sets a held chunk's mtime `seconds` into the past, as if uploaded that long ago.
    func age(user: String = "default", _ name: String, seconds: Int) {
        let then = Clock.now() / 1_000_000_000 - Int64(seconds)
        var times = [timespec(tv_sec: time_t(then), tv_nsec: 0), timespec(tv_sec: time_t(then), tv_nsec: 0)]
        utimensat(AT_FDCWD, chunkPath(user: user, name), &times, 0)
    }

    /// A held chunk's mtime, seconds since the epoch.
    func chunkModified(user: String = "default", _ name: String) -> Int64? {
        var info = stat()
        guard stat(chunkPath(user: user, name), &info) == 0 else { return nil }
        return Int64(info.st_mtim.tv_sec)
    }
}

/// Sets the mtime of every file below `path` `seconds` into the past.
func ageFiles(under path: String, seconds: Int) {
    let then = timespec(tv_sec: time_t(Clock.now() / 1_000_000_000 - Int64(seconds)), tv_nsec: 0)
    for case let relative as String in FileManager.default.enumerator(atPath: path)?.allObjects ?? [] {
        var times = [then, then]
        utimensat(AT_FDCWD, path + "/" + relative, &times, 0)
    }
}

/// A server with accounts where alice holds one chunk of random bytes and bob none.
struct AliceHoldsAChunk {
    let fixture: ServerFixture
    let alice: IssuedToken
    let bob: IssuedToken
    let bytes: [UInt8]
    var name: String { Digest.sha256Hex(bytes) }

    init(size: Int) throws {
        fixture = try ServerFixture.withAccounts()
        alice = try fixture.issue(user: "alice")
        bob = try fixture.issue(user: "bob")
        bytes = randomBytes(size)
        let response = try fixture.uploadChunk(bytes, token: alice.secret)
        guard response.status == 201 else { throw ClientError(description: "chunk upload answered \(response.status): \(response.text)") }
    }
}
