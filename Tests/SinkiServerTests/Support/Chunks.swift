import Foundation
import SinkiRecord
import SinkiSupport

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
