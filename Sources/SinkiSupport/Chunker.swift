import Glibc

// Content-defined chunking, FastCDC-style (Xia et al., "FastCDC: a Fast and Efficient
// Content-Defined Chunking Approach for Data Deduplication", USENIX ATC 2016): a gear rolling hash,
// the first `minimum` bytes of every chunk skipped unhashed, and normalized chunking (a harder mask
// before the normal point, an easier one after). docs/chunking.md is the specification; its test
// vectors are checked by Tests/SinkiSupportTests/ChunkerTests.swift.

/// The sizes and masks one chunking run uses; both ends of a transfer must use the same profile.
public struct ChunkProfile: Sendable, Hashable, CustomStringConvertible {
    /// No cut falls at or before this many bytes into a chunk (these bytes are not even hashed).
    public let minimum: Int
    /// Where the mask changes from `smallMaskBits` to `largeMaskBits`: the centre of the size distribution.
    public let normal: Int
    /// A chunk that found no cut by this length is cut here.
    public let maximum: Int
    /// Bits the hash must have clear for a cut before `normal` (more bits: cuts rarer).
    public let smallMaskBits: Int
    /// Bits the hash must have clear for a cut from `normal` on (fewer bits: cuts likelier).
    public let largeMaskBits: Int

    public init(minimum: Int, normal: Int, maximum: Int, smallMaskBits: Int, largeMaskBits: Int) {
        precondition(minimum > 0 && minimum < normal && normal < maximum, "bug: chunk profile sizes out of order")
        precondition((1...63).contains(smallMaskBits) && (1...63).contains(largeMaskBits), "bug: chunk mask bits")
        self.minimum = minimum
        self.normal = normal
        self.maximum = maximum
        self.smallMaskBits = smallMaskBits
        self.largeMaskBits = largeMaskBits
    }

    /// For large files: min 128 KiB, normal 384 KiB, max 2 MiB, masks of 19 and 17 bits (about 2,600 chunks
    /// a GiB). Chosen by measurement (docs/chunking.md, "Choosing the sizes") so that a 1 MiB edit of a
    /// large file resends at most 3 MiB: with chunks near 1 MiB an edit resent up to 4.9 MiB.
    public static let large = ChunkProfile(minimum: 128 << 10, normal: 384 << 10, maximum: 2 << 20, smallMaskBits: 19, largeMaskBits: 17)

    /// For files under `smallFileLimit`: smaller still (64 KiB, 256 KiB, 1 MiB; 19 and 17 bits), so a
    /// 1 MiB edit of a 5 MiB file does not resend most of it.
    public static let small = ChunkProfile(minimum: 64 << 10, normal: 256 << 10, maximum: 1 << 20, smallMaskBits: 19, largeMaskBits: 17)

    /// Files of this size and over use `large`.
    public static let smallFileLimit: Int64 = 16 << 20

    /// The profile for a file of `size` bytes.
    public static func forFileSize(_ size: Int64) -> ChunkProfile { size < smallFileLimit ? .small : .large }

    /// A cut needs the hash's top `bits` bits clear. The top bits, not the bottom ones: in a gear hash
    /// (shifted left once per byte) bit k depends only on the last k+1 bytes, so the top bits see the
    /// longest window (with 17 to 21 bits, the lowest masked bit sees the last 44 to 48 bytes) where
    /// low-bit masks would cut on patterns of the last 17 to 21 bytes.
    static func mask(_ bits: Int) -> UInt64 { ~UInt64(0) << UInt64(64 - bits) }

    public var description: String {
        "min \(minimum >> 10) KiB, normal \(normal >> 10) KiB, max \(maximum >> 10) KiB, masks \(smallMaskBits)/\(largeMaskBits) bits"
    }
}

/// The gear table: 256 random 64-bit values, entry i being the first 8 bytes (big-endian) of
/// SHA-256 of the ASCII text `sinki chunker gear table` followed by the single byte i.
public enum GearTable {
    public static let seed = "sinki chunker gear table"

    /// The 256 entries, for other implementations and tests; the cutter reads `pointer`.
    public static let entries: [UInt64] = (0..<256).map { index in
        let digest = Digest.hash(Array(seed.utf8) + [UInt8(index)])
        return digest[0..<8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    }

    /// The same entries where the hot loop reads them without bounds checks or reference counting.
    /// Made once and never freed or written: immutable after its lazy, thread-safe initialization,
    /// so sharing it between threads is safe though the pointer type is not Sendable.
    nonisolated(unsafe) static let pointer: UnsafePointer<UInt64> = {
        let table = UnsafeMutablePointer<UInt64>.allocate(capacity: 256)
        for (index, value) in entries.enumerated() { table[index] = value }
        return UnsafePointer(table)
    }()
}

/// A streaming content-defined cutter: fed a stream in pieces of any size, it says where each chunk
/// ends, the same places whatever the pieces (the state carries across them).
public struct ChunkCutter: Sendable {
    public let profile: ChunkProfile
    /// Bytes of the current, unfinished chunk seen so far.
    public private(set) var pending = 0
    /// Bytes consumed in all, i.e. the offset in the stream of the next byte.
    public private(set) var offset: Int64 = 0
    private var hash: UInt64 = 0
    private let smallMask: UInt64
    private let largeMask: UInt64

    public init(profile: ChunkProfile = .large) {
        self.profile = profile
        smallMask = ChunkProfile.mask(profile.smallMaskBits)
        largeMask = ChunkProfile.mask(profile.largeMaskBits)
    }

    /// Consumes `bytes` up to the end of the current chunk: returns how many bytes of `bytes` complete
    /// it (1...count; the caller cuts there and calls again with the rest), or nil when all of `bytes`
    /// belongs to a chunk that goes on.
    public mutating func cut(in bytes: UnsafeRawBufferPointer) -> Int? {
        guard let raw = bytes.baseAddress, bytes.count > 0 else { return nil }
        let base = raw.assumingMemoryBound(to: UInt8.self)
        let count = bytes.count
        var index = 0
        // FastCDC skips the first `minimum` bytes: no cut can fall there, so hashing them is waste.
        // The hash restarts from 0 at `minimum`, which keeps cuts independent of how bytes were fed.
        if pending < profile.minimum {
            let skip = min(profile.minimum - pending, count)
            index = skip
            pending += skip
            if index == count {
                offset += Int64(count)
                return nil
            }
        }
        let gear = GearTable.pointer
        var state = hash
        if pending < profile.normal {
            let end = min(count, index + (profile.normal - pending))
            let start = index
            if let cut = Self.scan(base, from: index, to: end, hash: &state, mask: smallMask, gear: gear) {
                return finishChunk(at: cut)
            }
            pending += end - start
            index = end
        }
        if index < count {
            let end = min(count, index + (profile.maximum - pending))
            let start = index
            if let cut = Self.scan(base, from: index, to: end, hash: &state, mask: largeMask, gear: gear) {
                return finishChunk(at: cut)
            }
            pending += end - start
            index = end
            if pending == profile.maximum { return finishChunk(at: index) }
        }
        hash = state
        offset += Int64(count)
        return nil
    }

    /// At the end of the stream: the length of the last chunk, shorter than `minimum` perhaps, or nil
    /// when nothing came after the last cut. The cutter is ready for a new stream afterwards.
    public mutating func finish() -> Int? {
        let last = pending
        pending = 0
        hash = 0
        offset = 0
        return last > 0 ? last : nil
    }

    /// Feeds `bytes` and returns the stream offsets where chunks ended within them (each the offset
    /// just past a chunk's last byte), for callers that want offsets rather than lengths.
    public mutating func push(_ bytes: UnsafeRawBufferPointer) -> [Int64] {
        var cuts: [Int64] = []
        var rest = bytes
        while let length = cut(in: rest) {
            cuts.append(offset)
            rest = UnsafeRawBufferPointer(rebasing: rest[length...])
        }
        return cuts
    }

    /// The chunk ends after `index` bytes of the piece being fed: `offset` moves past them and the
    /// next chunk starts afresh.
    private mutating func finishChunk(at index: Int) -> Int {
        offset += Int64(index)
        pending = 0
        hash = 0
        return index
    }

    /// The hot loop: rolls the gear hash over `from..<to` and returns the index just past the first
    /// byte after which the masked bits are all clear. Raw pointers, so no bounds checks or ARC.
    @inline(__always)
    private static func scan(_ base: UnsafePointer<UInt8>, from: Int, to end: Int, hash: inout UInt64, mask: UInt64,
                             gear: UnsafePointer<UInt64>) -> Int? {
        var state = hash
        var index = from
        // Four bytes a round, each hash computed from the round's starting state rather than from the
        // hash before it: h(k+1) = 2·h(k) + g is a 2-cycle dependency per byte, while the gear sums
        // (u) depend only on the bytes, so the chain carried across rounds is 2 cycles per 4 bytes.
        // Each of the four is still checked, in order.
        while index &+ 4 <= end {
            let u1 = gear[Int(base[index])]
            let u2 = (u1 &<< 1) &+ gear[Int(base[index &+ 1])]
            let u3 = (u2 &<< 1) &+ gear[Int(base[index &+ 2])]
            let u4 = (u3 &<< 1) &+ gear[Int(base[index &+ 3])]
            let first = (state &<< 1) &+ u1
            let second = (state &<< 2) &+ u2
            let third = (state &<< 3) &+ u3
            state = (state &<< 4) &+ u4
            if first & mask == 0 {
                hash = first
                return index &+ 1
            }
            if second & mask == 0 {
                hash = second
                return index &+ 2
            }
            if third & mask == 0 {
                hash = third
                return index &+ 3
            }
            index &+= 4
            if state & mask == 0 {
                hash = state
                return index
            }
        }
        while index < end {
            state = (state &<< 1) &+ gear[Int(base[index])]
            index &+= 1
            if state & mask == 0 {
                hash = state
                return index
            }
        }
        hash = state
        return nil
    }
}

/// One content-defined chunk of a file: where it starts, how long it is, and its SHA-256.
public struct Chunk: Sendable, Hashable, CustomStringConvertible {
    public var offset: Int64
    public var length: Int
    public var sha256: [UInt8]

    public init(offset: Int64, length: Int, sha256: [UInt8]) {
        self.offset = offset
        self.length = length
        self.sha256 = sha256
    }

    public var description: String { "\(offset)+\(length) \(Hex.encode(sha256))" }
}

/// Cuts and hashes whole inputs in one pass: each byte is read once, fed to the cutter and to the
/// chunk's SHA-256 together.
public enum Chunker {
    /// How much of a file one read takes: large enough that the system calls cost nothing next to the
    /// hashing, small enough to stay in the L2 cache between cutting and hashing.
    public static let readSize = 256 << 10

    /// Chunks of a buffer held in memory.
    public static func chunks(of bytes: UnsafeRawBufferPointer, profile: ChunkProfile) -> [Chunk] {
        var builder = Builder(profile: profile)
        builder.feed(bytes)
        return builder.finish()
    }

    public static func chunks(of bytes: [UInt8], profile: ChunkProfile) -> [Chunk] {
        bytes.withUnsafeBytes { chunks(of: $0, profile: profile) }
    }

    /// Chunks of an open file, read from its start to its end; the profile is chosen from its size
    /// unless given.
    public static func chunks(of file: FileDescriptor, profile: ChunkProfile? = nil) throws(SystemError) -> [Chunk] {
        var chosen = ChunkProfile.large
        if let profile { chosen = profile } else { chosen = ChunkProfile.forFileSize(try file.stat().size) }
        var builder = Builder(profile: chosen)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: readSize, alignment: 64)
        defer { buffer.deallocate() }
        var position: Int64 = 0
        while true {
            let got = try file.read(into: buffer, at: position)
            if got == 0 { break }
            builder.feed(UnsafeRawBufferPointer(rebasing: buffer[0..<got]))
            position += Int64(got)
        }
        return builder.finish()
    }

    /// Chunks of the file at `path`.
    public static func chunks(ofPath path: String, profile: ChunkProfile? = nil) throws(SystemError) -> [Chunk] {
        try chunks(of: FileDescriptor.open(path, flags: O_RDONLY), profile: profile)
    }

    /// A cutter and the running SHA-256 of the current chunk.
    struct Builder {
        var cutter: ChunkCutter
        let digest = Digest(.sha256)
        var start: Int64 = 0
        var chunks: [Chunk] = []

        init(profile: ChunkProfile) { cutter = ChunkCutter(profile: profile) }

        mutating func feed(_ bytes: UnsafeRawBufferPointer) {
            var rest = bytes
            while let length = cutter.cut(in: rest) {
                digest.update(UnsafeRawBufferPointer(rebasing: rest[..<length]))
                close(length: Int(cutter.offset - start))
                rest = UnsafeRawBufferPointer(rebasing: rest[length...])
            }
            digest.update(rest)
        }

        mutating func finish() -> [Chunk] {
            if let last = cutter.finish() { close(length: last) }
            return chunks
        }

        private mutating func close(length: Int) {
            chunks.append(Chunk(offset: start, length: length, sha256: digest.finish()))
            start += Int64(length)
        }
    }
}
