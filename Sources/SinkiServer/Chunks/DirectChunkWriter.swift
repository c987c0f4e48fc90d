import CSystemShim
import Glibc
import SinkiRecord
import SinkiSupport

/// Takes a chunk upload whose creating `POST` carries the whole chunk (creation-with-upload, its
/// `Content-Length` the `Upload-Length`: what sinki's agents send) straight into the user's chunks:
/// an unnamed file in the chunk's folder, its checksum computed as the bytes arrive, linked under the
/// chunk's name once the body is in and checked. No upload info is written and no file is renamed:
/// at some 2,600 chunks a GiB, the two files and the renames of an ordinary upload were most of the
/// server's time for a large file. The price: a body cut off leaves nothing to resume (the client
/// sends the chunk again, at most 2 MiB); a chunk created without its body is an ordinary resumable
/// upload. A token narrowed to a prefix (`POST /v1/chunks/batch` takes its chunks here too) must send
/// bytes that hash to the chunk's name, checked as they arrive (`ChunkStore.adopt(source:…)` says why).
/// Confined to the worker thread of its request; ends once (`commit` or `abandon`).
final class DirectChunkWriter: BodySink {
    private let chunks: ChunkStore
    let user: String
    let name: String
    let length: Int64
    private let file: FileDescriptor
    private let checksum: (algorithm: Digest.Algorithm, expected: [UInt8])?
    private let digest: Digest?
    /// The narrowed token whose bytes must hash to `name`, and their SHA-256 so far.
    private let prefix: String?
    private let nameDigest: Digest?
    private(set) var received: Int64 = 0
    private var ended = false

    init(chunks: ChunkStore, user: String, name: String, length: Int64, checksum: (Digest.Algorithm, [UInt8])?,
         prefix: String? = nil) throws(SystemError) {
        self.chunks = chunks
        self.user = user
        self.name = name
        self.length = length
        self.checksum = checksum.map { (algorithm: $0.0, expected: $0.1) }
        digest = checksum.map { Digest($0.0) }
        self.prefix = prefix
        nameDigest = prefix == nil ? nil : Digest(.sha256)
        let folder = try chunks.fanOut(user: user, chunk: name)
        let directory = try FileDescriptor.open(folder, flags: O_RDONLY | O_DIRECTORY)
        let fd = sinki_open_anonymous(directory.raw, O_WRONLY | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw SystemError("open", errno: errno, path: folder + " (O_TMPFILE)") }
        file = FileDescriptor(raw: fd, path: folder + "/(chunk " + name.prefix(16) + "…)")
        file.reserve(0, length)
    }

    func write(_ chunk: UnsafeRawBufferPointer) throws {
        guard !ended else { return }
        guard received + Int64(chunk.count) <= length else {
            ended = true
            throw Problem(.tooLarge, detail: "the body goes past the chunk's Upload-Length of \(length) bytes")
        }
        try file.writeAll(chunk, at: received)
        digest?.update(chunk)
        nameDigest?.update(chunk)
        received += Int64(chunk.count)
    }

    /// The body is in: checked (its length, its checksum) and linked under the chunk's name (or dropped
    /// when the user holds the chunk already). Returns what became of it.
    func commit() throws -> ChunkStore.Adoption {
        precondition(!ended, "bug: a direct chunk ended twice")
        ended = true
        guard received == length else {
            throw Problem(.badRequest, detail: "the chunk's body ended after \(received) of its \(length) bytes; send it again")
        }
        if let checksum, let digest {
            let actual = digest.finish()
            guard actual == checksum.expected else {
                throw Problem(.checksumMismatch, detail: "the chunk's \(checksum.algorithm.rawValue) is \(Base64.encode(actual)), "
                              + "Upload-Checksum says \(Base64.encode(checksum.expected)); the chunk was discarded")
            }
        }
        if let nameDigest, nameDigest.finishHex() != name {
            chunks.logger.warning("chunk \(name) of a narrowed token's upload is other bytes than its name says; dropped")
            return .refused
        }
        let adoption = try chunks.adopt(anonymous: file, length: length, user: user, chunk: name, checkedFor: prefix)
        // The disk is written while more chunks arrive (a record naming it is committed only after a
        // `syncfs`, which then finds little left), but not on this thread: starting write-back waits
        // for the device's queue, which made every chunk's answer wait milliseconds.
        if adoption == .stored { ChunkStore.startWriteback(of: file, length: length) }
        return adoption
    }

    /// The client went away before the body was in: the unnamed file goes with its descriptor.
    func abandon() { ended = true }
}
