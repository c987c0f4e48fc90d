import Glibc
import SinkiRecord
import SinkiSupport

/// Takes a chunk whose bytes arrive whole in one request (a frame of `POST /v1/chunks/batch`, or a tus
/// creation-with-upload whose `Content-Length` is its `Upload-Length`) straight into the user's chunks:
/// written into a slot of the user's current pack as the bytes arrive, its checksum computed as they
/// go, named once the body is in and checked. No upload info is written and no file is made: at some
/// 2,600 chunks a GiB, a file per chunk was most of the server's time for a large file. The price: a
/// body cut off leaves nothing to resume (the client sends the chunk again, at most 2 MiB; the slot is
/// left for repacking). A token narrowed to a prefix must send bytes that hash to the chunk's name,
/// checked as they arrive (`ChunkStore.arrive` says why). Confined to the worker thread of its request;
/// ends once (`commit` or `abandon`).
final class DirectChunkWriter: BodySink {
    private let chunks: ChunkStore
    let user: String
    let name: String
    let length: Int64
    private let intake: ChunkIntake
    private let checksum: (algorithm: Digest.Algorithm, expected: [UInt8])?
    private let digest: Digest?
    /// The narrowed token whose bytes must hash to `name`.
    private let prefix: String?
    private var ended = false

    init(chunks: ChunkStore, user: String, name: String, length: Int64, checksum: (Digest.Algorithm, [UInt8])?,
         prefix: String? = nil) throws {
        self.chunks = chunks
        self.user = user
        self.name = name
        self.length = length
        self.checksum = checksum.map { (algorithm: $0.0, expected: $0.1) }
        digest = checksum.map { Digest($0.0) }
        self.prefix = prefix
        intake = try chunks.intake(user: user, chunk: name, length: length, checked: prefix != nil)
    }

    var received: Int64 { intake.received }

    func write(_ chunk: UnsafeRawBufferPointer) throws {
        guard !ended else { return }
        guard intake.received + Int64(chunk.count) <= length else {
            ended = true
            throw Problem(.tooLarge, detail: "the body goes past the chunk's Upload-Length of \(length) bytes")
        }
        try intake.write(chunk)
        digest?.update(chunk)
    }

    /// The body is in: checked (its length, its checksum) and named (or left unused when the user holds
    /// the chunk already). Returns what became of it.
    func commit() throws -> ChunkStore.Adoption {
        precondition(!ended, "bug: a direct chunk ended twice")
        ended = true
        guard intake.isWhole else {
            throw Problem(.badRequest, detail: "the chunk's body ended after \(intake.received) of its \(length) bytes; send it again")
        }
        if let checksum, let digest {
            let actual = digest.finish()
            guard actual == checksum.expected else {
                throw Problem(.checksumMismatch, detail: "the chunk's \(checksum.algorithm.rawValue) is \(Base64.encode(actual)), "
                              + "Upload-Checksum says \(Base64.encode(checksum.expected)); the chunk was discarded")
            }
        }
        return try chunks.arrive([intake], user: user, prefix: prefix)[0]
    }

    /// The client went away before the body was in: what was written is left for repacking.
    func abandon() { ended = true }
}
