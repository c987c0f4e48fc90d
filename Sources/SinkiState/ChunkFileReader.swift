import Glibc
import SinkiLoop
import SinkiRecord
import SinkiSupport
import Synchronization

/// Reads a large file once, from a chunk boundary to its end, cutting it into content-defined chunks
/// and naming each by its SHA-256: the sender's one read and one hash
/// of a file it sends as chunks. The chunks come a batch at a time, so that those already read can be
/// sent while the next are read; each batch is hashed on every core.
///
/// Used by one caller at a time (its state is behind a lock only so that it may cross threads).
public final class ChunkFileReader: Sendable {
    /// What one read takes from the file.
    static let readSize = 2 << 20

    private struct State {
        /// One read's worth, kept for the whole file: a new one per batch was a fresh 4 MiB to map.
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: ChunkFileReader.readSize, alignment: 64)
        var cutter: ChunkCutter
        /// The bytes of the chunk under way, read but not yet cut.
        var carry: [UInt8] = []
        /// Where the next read starts (the cutter has seen everything before it).
        var position: Int64
        /// Where the next chunk starts.
        var chunkStart: Int64
    }

    private let file: HeldFile
    private let size: Int64
    private let state: Mutex<State>

    /// Reads `file`, whose size was `size` when it was opened, from `offset`, which must be where a
    /// chunk starts (0, or the end of a chunk an earlier run cut).
    public init(file: HeldFile, size: Int64, from offset: Int64) {
        self.file = file
        self.size = size
        state = Mutex(State(cutter: ChunkCutter(profile: .forFileSize(size)), position: offset, chunkStart: offset))
    }

    deinit { state.withLock { $0.buffer.deallocate() } }

    /// Where the chunk after the last one returned starts.
    public var offset: Int64 { state.withLock { $0.chunkStart } }

    /// The next chunks, about `maxBytes` of them (at least one while the file lasts); empty at the end.
    /// A file that is shorter than its size said throws `fileChanged`.
    public func next(maxBytes: Int) throws -> [ChunkPayload] {
        let raw: [(offset: Int64, bytes: [UInt8])] = try state.withLock { state in
            var out: [(Int64, [UInt8])] = []
            var total = 0
            let buffer = state.buffer
            while total < maxBytes && state.position < size {
                let want = Int(min(Int64(Self.readSize), size - state.position))
                let got = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]), at: state.position)
                guard got > 0 else { throw ChunkReadError.fileChanged(path: file.procPath) }
                state.position += Int64(got)
                var rest = UnsafeRawBufferPointer(rebasing: buffer[0..<got])
                while let length = state.cutter.cut(in: rest) {
                    var bytes = state.carry
                    state.carry = []
                    bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: rest[..<length]))
                    out.append((state.chunkStart, bytes))
                    state.chunkStart += Int64(bytes.count)
                    total += bytes.count
                    rest = UnsafeRawBufferPointer(rebasing: rest[length...])
                }
                state.carry.append(contentsOf: rest)
            }
            if state.position >= size, state.cutter.finish() != nil {
                out.append((state.chunkStart, state.carry))
                state.chunkStart += Int64(state.carry.count)
                state.carry = []
            }
            return out
        }
        // Naming is the costly part: every core, a chunk each. The CRC-32 the wire wants is left for the
        // chunks the server lacks (`withChecksums`): after an edit, a few of thousands.
        return Blocking.map(raw) { piece in
            piece.bytes.withUnsafeBytes { bytes in
                ChunkPayload(ref: ChunkRef(sha256: Hex.encode(Digest.hash(bytes)), size: Int64(piece.bytes.count)), bytes: piece.bytes, crc32: [])
            }
        }
    }

    /// Chunk `ref` read again from `offset` (where an earlier `next` found it), checked against its
    /// name; nil when the bytes there are no longer that chunk (the file changed since).
    public func reread(_ ref: ChunkRef, at offset: Int64) throws -> ChunkPayload? {
        var bytes = [UInt8](repeating: 0, count: Int(ref.size))
        let got = try bytes.withUnsafeMutableBytes { buffer in try file.read(into: buffer, at: offset) }
        guard got == bytes.count, Hex.encode(Digest.hash(bytes)) == ref.sha256 else { return nil }
        return ChunkPayload(ref: ref, bytes: bytes, crc32: [])
    }

    /// `chunks` with their CRC-32s, computed on every core.
    public static func withChecksums(_ chunks: [ChunkPayload]) -> [ChunkPayload] {
        Blocking.map(chunks) { chunk in
            var out = chunk
            out.crc32 = Digest.hash(chunk.bytes, .crc32)
            return out
        }
    }
}

/// Why a chunked read stopped.
public enum ChunkReadError: Error, Sendable, CustomStringConvertible {
    /// The file ended before the size it had when it was opened: it changed.
    case fileChanged(path: String)

    public var description: String {
        switch self {
        case let .fileChanged(path): return "\(path) became shorter while it was read"
        }
    }
}
