import Foundation
import Glibc
import Testing
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

    /// What the server holds of `user`'s chunks, read from its folder.
    func heldChunks(user: String = "default") -> ServerChunks { ServerChunks(chunksDirectory, user: user) }

    /// The chunk's bytes as the server holds them; nil when it does not.
    func heldChunk(user: String = "default", _ name: String) -> [UInt8]? { heldChunks(user: user).bytes(name) }

    /// Every chunk `user` holds, by name.
    func heldChunkNames(user: String = "default") -> Set<String> { heldChunks(user: user).names }

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

    /// Sets when a held chunk was last stored or found present `seconds` into the past, as if uploaded
    /// that long ago (and a narrowed token's marker of it).
    func age(user: String = "default", _ name: String, seconds: Int) {
        do { try heldChunks(user: user).age(name, seconds: seconds) } catch { Issue.record("aging chunk \(name): \(error)") }
    }

    /// When a held chunk was last stored or found present, seconds since the epoch.
    func chunkModified(user: String = "default", _ name: String) -> Int64? {
        heldChunks(user: user).chunks[name].map { $0.touched / 1_000_000_000 }
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
