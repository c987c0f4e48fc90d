import Glibc
import SinkiTestSupport
import Testing
@testable import SinkiSupport

/// The content-defined chunker against docs/chunking.md: its test vectors, cuts that do not depend on
/// how the bytes were fed, size bounds, short inputs, files, and how little an edit disturbs.
@Suite struct ChunkerTests {
    /// The spec's input: SplitMix64 outputs from `seed`, each as 8 bytes little-endian.
    static func pseudoRandom(count: Int, seed: UInt64) -> [UInt8] {
        var random = SeededRandom(seed: seed)
        var out = [UInt8]()
        out.reserveCapacity(count + 8)
        while out.count < count {
            let value = random.next()
            for byte in 0..<8 { out.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(byte)))) }
        }
        return Array(out.prefix(count))
    }

    static func ends(_ chunks: [Chunk]) -> [Int64] { chunks.map { $0.offset + Int64($0.length) } }

    /// Cut ends found by feeding `data` in pieces of the sizes `piece` draws.
    static func fedEnds(_ data: [UInt8], profile: ChunkProfile, piece: (inout SeededRandom) -> Int) -> [Int64] {
        var cutter = ChunkCutter(profile: profile)
        var random = SeededRandom(seed: 9)
        var cuts: [Int64] = []
        data.withUnsafeBytes { all in
            var start = 0
            while start < all.count {
                let end = min(all.count, start + piece(&random))
                var rest = UnsafeRawBufferPointer(rebasing: all[start..<end])
                while let length = cutter.cut(in: rest) {
                    cuts.append(cutter.offset)
                    rest = UnsafeRawBufferPointer(rebasing: rest[length...])
                }
                start = end
            }
        }
        if let last = cutter.finish() { cuts.append((cuts.last ?? 0) + Int64(last)) }
        return cuts
    }

    /// The spec's cut rule (docs/chunking.md) written out byte by byte, with no skipping or
    /// unrolling: the fast cutter must agree with it.
    static func referenceEnds(_ bytes: [UInt8], profile: ChunkProfile) -> [Int64] {
        let gear = GearTable.entries
        let smallMask = ~UInt64(0) << UInt64(64 - profile.smallMaskBits)
        let largeMask = ~UInt64(0) << UInt64(64 - profile.largeMaskBits)
        var start = 0
        var ends: [Int64] = []
        while start < bytes.count {
            let left = bytes.count - start
            var length = min(profile.maximum, left)
            if left <= profile.minimum {
                length = left
            } else {
                var hash: UInt64 = 0
                for index in profile.minimum..<min(profile.maximum, left) {
                    hash = (hash &<< 1) &+ gear[Int(bytes[start + index])]
                    if hash & (index < profile.normal ? smallMask : largeMask) == 0 {
                        length = index + 1
                        break
                    }
                }
            }
            start += length
            ends.append(Int64(start))
        }
        return ends
    }

    /// A tiny profile makes thousands of chunks, so cuts at every phase (just past the minimum, around
    /// the normal point, forced at the maximum) land at every position within the pieces fed.
    static let tiny = ChunkProfile(minimum: 64, normal: 700, maximum: 3000, smallMaskBits: 11, largeMaskBits: 8)

    @Test(arguments: [ChunkProfile.large, .small, tiny])
    func cutterFollowsTheSpecsRule(profile: ChunkProfile) {
        var random = SeededRandom(seed: 10)
        // Random bytes, then a stretch of a repeated pattern with nothing to cut on, then random again.
        var data = Self.pseudoRandom(count: 9 << 20, seed: 11)
        data.replaceSubrange((3 << 20)..<(7 << 20), with: (0..<(4 << 20)).map { UInt8(truncatingIfNeeded: $0 % 3) })
        let reference = Self.referenceEnds(data, profile: profile)
        #expect(Self.ends(Chunker.chunks(of: data, profile: profile)) == reference)
        #expect(Self.fedEnds(data, profile: profile) { _ in random.int(in: 1...5000) } == reference)
        if profile == Self.tiny { #expect(reference.count > 3000) }
    }

    // The numbers below are the spec's (docs/chunking.md, "Test vectors"); change both together.

    @Test func gearTableMatchesTheSpec() {
        let table = GearTable.entries
        #expect(table.count == 256)
        #expect(Array(table[0..<4]) == [GEAR0, GEAR1, GEAR2, GEAR3])
        #expect(table[255] == GEAR255)
        #expect(Set(table).count == 256)
        for index in 0..<256 { #expect(GearTable.pointer[index] == table[index]) }
    }

    @Test func inputGeneratorMatchesTheSpec() {
        #expect(Hex.encode(Self.pseudoRandom(count: 8, seed: 0)) == "afcd1d7b39a820e2")
    }

    @Test func largeProfileVectors() {
        let chunks = Chunker.chunks(of: Self.pseudoRandom(count: 16 << 20, seed: 0), profile: .large)
        #expect(Self.ends(chunks) == LARGE_ENDS)
        #expect(chunks.prefix(3).map { Hex.encode($0.sha256) } == LARGE_SHAS)
    }

    @Test func smallProfileVectors() {
        let chunks = Chunker.chunks(of: Self.pseudoRandom(count: 4 << 20, seed: 0), profile: .small)
        #expect(Self.ends(chunks) == SMALL_ENDS)
        #expect(chunks.prefix(3).map { Hex.encode($0.sha256) } == SMALL_SHAS)
    }

    @Test(arguments: [ChunkProfile.large, .small])
    func cutsDoNotDependOnPieceSizes(profile: ChunkProfile) {
        let data = Self.pseudoRandom(count: 12 << 20, seed: 3)
        let whole = Self.ends(Chunker.chunks(of: data, profile: profile))
        #expect(whole.count > 3)
        #expect(Self.fedEnds(data, profile: profile) { _ in data.count } == whole)
        #expect(Self.fedEnds(data, profile: profile) { _ in 1 } == whole)
        #expect(Self.fedEnds(data, profile: profile) { _ in 7 } == whole)
        #expect(Self.fedEnds(data, profile: profile) { _ in 64 << 10 } == whole)
        #expect(Self.fedEnds(data, profile: profile) { $0.int(in: 1...(3 << 20)) } == whole)
        // push gives the same ends, as stream offsets; the last chunk is only known at the end.
        var cutter = ChunkCutter(profile: profile)
        var pushed = data.withUnsafeBytes { cutter.push(UnsafeRawBufferPointer(rebasing: $0[0..<(5 << 20)])) }
        pushed += data.withUnsafeBytes { cutter.push(UnsafeRawBufferPointer(rebasing: $0[(5 << 20)...])) }
        #expect(pushed == Array(whole.dropLast()))
        #expect(cutter.finish() == Int(whole[whole.count - 1] - whole[whole.count - 2]))
    }

    @Test(arguments: [ChunkProfile.large, .small])
    func chunksStayWithinTheirBounds(profile: ChunkProfile) {
        let data = Self.pseudoRandom(count: 48 << 20, seed: 4)
        let chunks = Chunker.chunks(of: data, profile: profile)
        #expect(chunks.reduce(0) { $0 + $1.length } == data.count)
        var offset: Int64 = 0
        for (index, chunk) in chunks.enumerated() {
            #expect(chunk.offset == offset)
            offset += Int64(chunk.length)
            if index < chunks.count - 1 { #expect(chunk.length > profile.minimum && chunk.length <= profile.maximum) }
            #expect(chunk.sha256 == data.withUnsafeBytes { Digest.hash(UnsafeRawBufferPointer(rebasing: $0[Int(chunk.offset)..<Int(offset)])) })
        }
        // The mean lands near `normal`: between it and 1.5 times it on random data.
        let mean = data.count / chunks.count
        #expect(mean > profile.normal && mean < profile.normal * 3 / 2, "mean \(mean)")
    }

    @Test func inputWithoutCutsIsCutAtTheMaximum() {
        // Zeros drive the gear hash to the fixed point -gear[0], whose top bits are not clear: no cut.
        let chunks = Chunker.chunks(of: [UInt8](repeating: 0, count: 10 << 20), profile: .large)
        #expect(chunks.map(\.length) == [2 << 20, 2 << 20, 2 << 20, 2 << 20, 2 << 20])
        #expect(chunks[0].sha256 == chunks[1].sha256)
    }

    @Test func emptyAndShortInputs() {
        #expect(Chunker.chunks(of: [], profile: .large).isEmpty)
        var cutter = ChunkCutter(profile: .small)
        #expect(cutter.finish() == nil)
        for count in [1, 100, ChunkProfile.large.minimum, ChunkProfile.large.minimum + 1] {
            let data = Self.pseudoRandom(count: count, seed: 5)
            let chunks = Chunker.chunks(of: data, profile: .large)
            #expect(chunks == [Chunk(offset: 0, length: count, sha256: Digest.hash(data))])
        }
    }

    @Test func filesAreChunkedWithTheProfileForTheirSize() throws {
        let directory = TemporaryDirectory()
        for (size, profile) in [(0, ChunkProfile.small), (5 << 20, .small), (20 << 20, .large)] {
            let data = Self.pseudoRandom(count: size, seed: 6)
            let path = directory.child("file-\(size)")
            try FileDescriptor.open(path, flags: O_WRONLY | O_CREAT | O_TRUNC).write(data)
            #expect(ChunkProfile.forFileSize(Int64(size)) == profile)
            #expect(try Chunker.chunks(ofPath: path) == Chunker.chunks(of: data, profile: profile))
        }
        #expect(throws: SystemError.self) { try Chunker.chunks(ofPath: directory.child("missing")) }
    }

    /// 64 MiB, 1 MiB changed in the middle: what a sender would upload again. The goals of issue 14:
    /// at most 3 MiB after an overwrite, 4 MiB after an insert.
    @Test func editsStayLocal() {
        let size = 64 << 20
        let middle = size / 2 + 12345
        let data = Self.pseudoRandom(count: size, seed: 7)
        let patch = Self.pseudoRandom(count: 1 << 20, seed: 8)
        let original = Chunker.chunks(of: data, profile: .large)
        let known = Set(original.map(\.sha256))
        func fresh(_ chunks: [Chunk]) -> [Chunk] { chunks.filter { !known.contains($0.sha256) } }

        var overwritten = data
        overwritten.replaceSubrange(middle..<middle + patch.count, with: patch)
        let afterOverwrite = Chunker.chunks(of: overwritten, profile: .large)
        let resentOverwrite = fresh(afterOverwrite)
        // The chunks the patch touches, and perhaps one or two after if the cuts that ended them moved.
        #expect(resentOverwrite.reduce(0) { $0 + $1.length } <= 3 << 20, "\(resentOverwrite)")
        #expect(afterOverwrite.count - resentOverwrite.count >= original.count - 8)

        var inserted = data
        inserted.insert(contentsOf: patch, at: middle)
        let afterInsert = Chunker.chunks(of: inserted, profile: .large)
        // Every chunk ending before the insertion is kept in place.
        let before = original.filter { $0.offset + Int64($0.length) <= Int64(middle) }
        #expect(Array(afterInsert.prefix(before.count)) == before)
        // After it, all but the few chunks around it come back, shifted by 1 MiB.
        let kept = Set(afterInsert.map(\.sha256))
        let lost = original.filter { !kept.contains($0.sha256) }
        #expect(lost.count <= 4, "\(lost)")
        let resentInsert = fresh(afterInsert)
        #expect(resentInsert.reduce(0) { $0 + $1.length } <= 4 << 20, "\(resentInsert)")
    }
}

// The spec's vectors (docs/chunking.md, "Test vectors"), as printed by `bench/run chunker --vectors`.
let GEAR0: UInt64 = 0xa6c0_7ec1_3ab5_d314
let GEAR1: UInt64 = 0x2b75_566d_0412_fba2
let GEAR2: UInt64 = 0xd58c_7c88_e15b_9c17
let GEAR3: UInt64 = 0xf38e_e1c2_8210_8604
let GEAR255: UInt64 = 0x22da_6249_3294_4081
let LARGE_ENDS: [Int64] = [445853, 592482, 1030695, 1246684, 1694047, 1880124, 2023940, 2427842, 2965436, 3255145, 3751752,
                           4107498, 4390009, 4809269, 5208662, 5667266, 5993548, 6443178, 6856490, 7922120, 8208602, 8437354,
                           8781097, 9304774, 9894399, 10290553, 10694355, 10829417, 11332710, 11720804, 12137558, 12696786,
                           12843194, 13389636, 13772126, 14009730, 14485296, 14941810, 15824442, 16291760, 16424560, 16777216]
let LARGE_SHAS = ["9860a791160dacac18bd7e20ee3ecf41d0f56cd62684cb7a47f4b9eed01a8ece",
                  "eb4145883daff325ea8bb538137f5b1af851b32e2f500d2828360d9117a490fa",
                  "9492ee8f99aae9b781c3615ce9742ac87080ccd7e2d8b9a896266879ad2492bb"]
let SMALL_ENDS: [Int64] = [445853, 565686, 860050, 1030695, 1122304, 1246684, 1564481, 1880124, 2023940, 2427842, 2737517,
                           3014126, 3255145, 3617809, 3751752, 4107498, 4194304]
let SMALL_SHAS = ["9860a791160dacac18bd7e20ee3ecf41d0f56cd62684cb7a47f4b9eed01a8ece",
                  "5eb48707e2f78b013debd53fbc51d644143399e07bb5f3ae18dd72cbcc558d1b",
                  "60d1ed73539bf486ee3126b7e61d06f4f30679e1ad9d7f38787995e4e89c798a"]
