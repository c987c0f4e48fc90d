/// A file's content identity: what records carry as `sha256` and what agents compare (docs/chunking.md,
/// "Content identity"). Up to `wholeFileLimit` bytes it is the SHA-256 of the bytes; above, it is the
/// hash of the file's manifest (its content-defined chunks, each named by its SHA-256), so that a large
/// file is read and hashed once, chunk by chunk, and its identity is known when its last chunk is.
/// The limit is a protocol constant, not the inline limit an agent is configured with: two agents
/// with different `[transfer] inline-max` name the same bytes alike.
public enum ContentID {
    /// Files up to this size are named by the SHA-256 of their bytes.
    public static let wholeFileLimit: Int64 = 256 << 10

    /// Whether a file of `size` bytes is named by its manifest's hash.
    public static func isManifest(size: Int64) -> Bool { size > wholeFileLimit }

    /// The identity of `bytes`.
    public static func of(_ bytes: UnsafeRawBufferPointer) -> String {
        guard isManifest(size: Int64(bytes.count)) else { return Hex.encode(Digest.hash(bytes)) }
        return manifestHash(Chunker.chunks(of: bytes, profile: .forFileSize(Int64(bytes.count))))
    }

    public static func of(_ bytes: [UInt8]) -> String { bytes.withUnsafeBytes { of($0) } }

    /// The hash of a manifest: SHA-256 over, for each chunk in order, its 32-byte SHA-256 followed by
    /// its size as 8 bytes big-endian.
    public static func manifestHash(_ chunks: [Chunk]) -> String {
        let digest = Digest(.sha256)
        for chunk in chunks {
            digest.update(chunk.sha256)
            digest.update(bigEndian(Int64(chunk.length)))
        }
        return digest.finishHex()
    }

    /// The same hash from chunks named in hex (as records carry them); nil when a name is not 64 hex
    /// digits or a size is negative.
    public static func manifestHash(hex chunks: [(sha256: String, size: Int64)]) -> String? {
        let digest = Digest(.sha256)
        for chunk in chunks {
            guard chunk.size >= 0, let raw = rawHash(chunk.sha256) else { return nil }
            digest.update(raw)
            digest.update(bigEndian(chunk.size))
        }
        return digest.finishHex()
    }

    /// Largest chunk a manifest may name (the large profile's maximum).
    public static let maxChunkSize = Int64(ChunkProfile.large.maximum)

    /// What is wrong with a manifest that claims `size` bytes and the hash `hash`; nil when nothing
    /// is: every name 64 lowercase hex digits, every size 1 byte to 4 MiB, the sizes adding up to
    /// `size`, and the list hashing to `hash`.
    public static func manifestProblem(_ chunks: [(sha256: String, size: Int64)], size: Int64, hash: String) -> String? {
        var total: Int64 = 0
        for (index, chunk) in chunks.enumerated() {
            guard rawHash(chunk.sha256) != nil else { return "chunk \(index) is named \(chunk.sha256.prefix(80)), not 64 lowercase hex digits" }
            guard chunk.size >= 1 && chunk.size <= maxChunkSize else { return "chunk \(index) has \(chunk.size) bytes (1 to \(maxChunkSize) allowed)" }
            total += chunk.size
        }
        guard total == size else { return "the chunks add up to \(total) bytes, not \(size)" }
        guard let computed = manifestHash(hex: chunks), computed == hash else { return "the chunks hash to \(manifestHash(hex: chunks) ?? "?"), not \(hash)" }
        return nil
    }

    /// A chunk name's 32 bytes; nil unless it is exactly 64 lowercase hex digits.
    public static func rawHash(_ hex: String) -> [UInt8]? {
        guard hex.utf8.count == 64, hex.utf8.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) }) else { return nil }
        return Hex.decode(hex)
    }

    private static func bigEndian(_ value: Int64) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: UInt64(bitPattern: value) >> UInt64(56 - 8 * $0)) }
    }
}

/// A manifest's binary form, as the server's records and the agent's state keep it: per chunk, its
/// 32-byte SHA-256 and its size as 4 bytes big-endian (a chunk is at most 4 MiB).
public enum ManifestCoding {
    public static let entryBytes = 36

    public static func encode(_ chunks: [(sha256: String, size: Int64)]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(chunks.count * entryBytes)
        for chunk in chunks {
            precondition(chunk.size >= 0 && chunk.size <= Int64(UInt32.max), "bug: chunk size out of range")
            guard let raw = ContentID.rawHash(chunk.sha256) else { preconditionFailure("bug: chunk name \(chunk.sha256) is not 64 hex digits") }
            out += raw
            let size = UInt32(chunk.size)
            out += [UInt8(size >> 24), UInt8(truncatingIfNeeded: size >> 16), UInt8(truncatingIfNeeded: size >> 8), UInt8(truncatingIfNeeded: size)]
        }
        return out
    }

    /// Nil when the bytes are not whole entries.
    public static func decode(_ bytes: [UInt8]) -> [(sha256: String, size: Int64)]? {
        guard bytes.count % entryBytes == 0 else { return nil }
        var out: [(sha256: String, size: Int64)] = []
        out.reserveCapacity(bytes.count / entryBytes)
        var index = 0
        while index < bytes.count {
            let hash = Hex.encode(Array(bytes[index..<index + 32]))
            let size = bytes[index + 32..<index + 36].reduce(Int64(0)) { $0 << 8 | Int64($1) }
            out.append((hash, size))
            index += entryBytes
        }
        return out
    }
}

/// Computes a content identity from bytes fed in pieces (a file read once): the SHA-256 of the bytes
/// for a file of up to `ContentID.wholeFileLimit`, else its chunks and their manifest's hash. The way
/// is chosen from the size the file had when reading began; `finish` says whether the bytes fed match
/// that size (else the identity is not the file's and the caller reads it again).
public struct ContentHasher {
    public let expectedSize: Int64
    private var whole: Digest?
    private var builder: Chunker.Builder?
    public private(set) var fed: Int64 = 0

    public init(expectedSize: Int64) {
        self.expectedSize = expectedSize
        if ContentID.isManifest(size: expectedSize) {
            builder = Chunker.Builder(profile: .forFileSize(expectedSize))
        } else {
            whole = Digest(.sha256)
        }
    }

    public mutating func feed(_ bytes: UnsafeRawBufferPointer) {
        fed += Int64(bytes.count)
        if let whole { whole.update(bytes) } else { builder?.feed(bytes) }
    }

    /// The identity and, for a manifest-named file, its chunks; `complete` is false when the bytes fed
    /// were not `expectedSize` (the file changed while it was read).
    public mutating func finish() -> (id: String, chunks: [Chunk]?, complete: Bool) {
        let complete = fed == expectedSize
        if let whole { return (whole.finishHex(), nil, complete) }
        let chunks = builder?.finish() ?? []
        return (ContentID.manifestHash(chunks), chunks, complete)
    }
}
