/// The body of `POST /v1/chunks/batch` and of the answer to `POST /v1/chunks/fetch` (docs/protocol.md,
/// "Chunks in batches"): frames back to back, one per chunk, each a header (the chunk's SHA-256 in 32
/// bytes and its length in 4 bytes, big-endian, as a manifest's entry; in an upload also the CRC-32 of
/// its bytes in 4 bytes, big-endian) and the chunk's bytes. In an answer, a length of 0 says the server
/// holds no such chunk for the token (a chunk is at least one byte).
public enum ChunkFrames {
    /// The media type of such a body.
    public static let mediaType = "application/vnd.sinki.chunks"

    /// Which way frames go, which says what their headers hold.
    public enum Kind: Sendable {
        /// Chunks sent to the server: each header carries the CRC-32 of the chunk's bytes, which the
        /// server checks before the chunk takes its name (as tus's `Upload-Checksum`), so that bytes
        /// damaged on the way are never stored under the name of the bytes the sender read.
        case upload
        /// A fetch's answer: a length of 0 is a chunk not held. The receiver checks each chunk's SHA-256.
        case answer

        /// Bytes of a frame's header.
        public var headerBytes: Int { self == .upload ? ManifestCoding.entryBytes + 4 : ManifestCoding.entryBytes }
    }

    /// The header of a frame: `name` (64 lowercase hex digits) and `length`, as a manifest's entry is,
    /// then for an upload the CRC-32 of its bytes (4 bytes, big-endian).
    public static func header(name: String, length: Int, crc32: [UInt8]? = nil) -> [UInt8] {
        precondition(crc32 == nil || crc32?.count == 4, "bug: a CRC-32 of \(crc32?.count ?? 0) bytes")
        return ManifestCoding.encode([(name, Int64(length))]) + (crc32 ?? [])
    }

    /// A whole upload's body of these chunks, each framed with its CRC-32.
    public static func encode(_ chunks: [(name: String, bytes: [UInt8])]) -> [UInt8] {
        var out: [UInt8] = []
        for chunk in chunks {
            out += header(name: chunk.name, length: chunk.bytes.count, crc32: Digest.hash(chunk.bytes, .crc32))
            out += chunk.bytes
        }
        return out
    }
}

/// Why a body of chunk frames cannot be read.
public struct ChunkFrameError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// A frame of length 0 where chunks are sent.
        case empty
        /// A frame longer than the most a chunk may be.
        case tooLong
        /// The body ends inside a frame.
        case truncated
    }

    public var kind: Kind
    /// The frame (counted from 0) and the byte of the body where it went wrong.
    public var frame: Int
    public var offset: Int64
    public var reason: String

    public var description: String { "chunk frame \(frame) (byte \(offset) of the body): \(reason)" }
}

/// Reads chunk frames from a body that arrives in pieces of any size, telling `handle` of each frame's
/// start, its bytes as they come (without copying them) and its end. Holds at most one header.
public struct ChunkFrameReader {
    /// What the reader found.
    public enum Event {
        /// A frame begins: its chunk's name and length, and for an upload the CRC-32 of its bytes.
        case begin(name: String, length: Int, crc32: [UInt8]?)
        /// Bytes of the current frame's chunk, in order.
        case bytes(UnsafeRawBufferPointer)
        /// The current frame's bytes are all in.
        case end
    }

    public let kind: ChunkFrames.Kind
    /// The longest chunk a frame may carry.
    public let maxLength: Int
    private var header: [UInt8] = []
    /// Bytes of the current frame still to come; nil between frames.
    private var remaining: Int?
    /// Frames begun so far.
    public private(set) var frames = 0
    /// Bytes taken so far.
    public private(set) var offset: Int64 = 0

    public init(_ kind: ChunkFrames.Kind, maxLength: Int) {
        self.kind = kind
        self.maxLength = maxLength
        header.reserveCapacity(kind.headerBytes)
    }

    /// Whether the bytes so far end on a frame's end (or are none): a body may end only there.
    public var atBoundary: Bool { remaining == nil && header.isEmpty }

    /// Takes the next piece of the body. Throws `ChunkFrameError` for a malformed frame, or whatever
    /// `handle` throws; nothing after that may be fed.
    public mutating func feed(_ piece: UnsafeRawBufferPointer, _ handle: (Event) throws -> Void) throws {
        var at = 0
        while at < piece.count {
            if let left = remaining {
                let take = min(left, piece.count - at)
                try handle(.bytes(UnsafeRawBufferPointer(rebasing: piece[at..<at + take])))
                at += take
                offset += Int64(take)
                remaining = left - take
                if left == take {
                    remaining = nil
                    try handle(.end)
                }
                continue
            }
            let headerBytes = kind.headerBytes
            let take = min(headerBytes - header.count, piece.count - at)
            header += piece[at..<at + take]
            at += take
            offset += Int64(take)
            guard header.count == headerBytes else { continue }
            let length = header[32..<36].reduce(0) { $0 << 8 | Int($1) }
            let name = Hex.encode(Array(header[0..<32]))
            let crc32 = kind == .upload ? Array(header[36..<40]) : nil
            header.removeAll(keepingCapacity: true)
            guard length <= maxLength, length > 0 || kind == .answer else {
                throw ChunkFrameError(kind: length == 0 ? .empty : .tooLong, frame: frames, offset: offset - Int64(headerBytes),
                                      reason: "a chunk of \(length) bytes; a chunk is 1 to \(maxLength) bytes")
            }
            frames += 1
            try handle(.begin(name: name, length: length, crc32: crc32))
            if length == 0 {
                try handle(.end)
            } else {
                remaining = length
            }
        }
    }

    /// The body ended: throws when it ended inside a frame.
    public func finish() throws(ChunkFrameError) {
        guard atBoundary else {
            throw ChunkFrameError(kind: .truncated, frame: max(0, frames - (header.isEmpty ? 1 : 0)), offset: offset,
                                  reason: header.isEmpty ? "the body ends \(remaining ?? 0) bytes before the chunk's end" : "the body ends inside a frame's header")
        }
    }
}
