import Glibc
import SinkiTestSupport
import Testing
@testable import SinkiSupport

/// Content identity and manifests against docs/chunking.md: the manifest hash vectors (computed by an
/// independent implementation of the spec), the 256 KiB limit, streaming and whole inputs alike, and
/// the checks a manifest must pass.
@Suite struct ContentIDTests {
    @Test func manifestHashesMatchTheSpecVectors() {
        let small = ChunkerTests.pseudoRandom(count: 4 << 20, seed: 0)
        #expect(ContentID.of(small) == "e812bdf4da48e16bc5ff00c675fdcb115facbffb1a84d335986d34b0d3b27c45")
        let large = ChunkerTests.pseudoRandom(count: 16 << 20, seed: 0)
        #expect(ContentID.of(large) == "af5be042bd033ee40474e24597cc157657033cda3862818dcfeff73d17a57780")
        // Just over the limit: one chunk (no cut before the end), still named by its manifest.
        let prefix = Array(small.prefix(300_000))
        #expect(ContentID.of(prefix) == "3d18ec02142bc774c5934ca96ed18d03eaac833c5943f7bfd978c80bd619e350")
    }

    @Test func upToTheLimitAFileIsNamedByTheSHA256OfItsBytes() {
        let bytes = ChunkerTests.pseudoRandom(count: Int(ContentID.wholeFileLimit), seed: 3)
        #expect(ContentID.of(bytes) == Digest.sha256Hex(bytes))
        let over = ChunkerTests.pseudoRandom(count: Int(ContentID.wholeFileLimit) + 1, seed: 3)
        #expect(ContentID.of(over) != Digest.sha256Hex(over))
        #expect(ContentID.of([]) == Digest.sha256Hex([]))
    }

    @Test(arguments: [0, 1000, 262_144, 262_145, 3 << 20, 17 << 20])
    func streamingGivesTheSameNameAsWhole(size: Int) {
        let bytes = ChunkerTests.pseudoRandom(count: size, seed: UInt64(size) + 11)
        var hasher = ContentHasher(expectedSize: Int64(size))
        var random = SeededRandom(seed: 5)
        bytes.withUnsafeBytes { all in
            var start = 0
            while start < all.count {
                let end = min(all.count, start + random.int(in: 1...700_000))
                hasher.feed(UnsafeRawBufferPointer(rebasing: all[start..<end]))
                start = end
            }
        }
        let named = hasher.finish()
        #expect(named.complete)
        #expect(named.id == ContentID.of(bytes))
        #expect((named.chunks != nil) == ContentID.isManifest(size: Int64(size)))
    }

    @Test func aHasherFedFewerBytesThanExpectedSaysSo() {
        var hasher = ContentHasher(expectedSize: 10)
        [UInt8](repeating: 1, count: 9).withUnsafeBytes { hasher.feed($0) }
        #expect(!hasher.finish().complete)
    }

    @Test func manifestsRoundTripTheirBinaryForm() throws {
        let chunks = Chunker.chunks(of: ChunkerTests.pseudoRandom(count: 3 << 20, seed: 4), profile: .small)
        let named = chunks.map { (sha256: Hex.encode($0.sha256), size: Int64($0.length)) }
        let encoded = ManifestCoding.encode(named)
        #expect(encoded.count == chunks.count * ManifestCoding.entryBytes)
        let decoded = try #require(ManifestCoding.decode(encoded))
        #expect(decoded.map(\.sha256) == named.map(\.sha256) && decoded.map(\.size) == named.map(\.size))
        #expect(ManifestCoding.decode(Array(encoded.dropLast())) == nil)
        #expect(ContentID.manifestHash(hex: named) == ContentID.manifestHash(chunks))
    }

    @Test func aManifestMustHashToItsNameAndAddUp() {
        let chunks = Chunker.chunks(of: ChunkerTests.pseudoRandom(count: 2 << 20, seed: 6), profile: .small)
        let named = chunks.map { (sha256: Hex.encode($0.sha256), size: Int64($0.length)) }
        let hash = ContentID.manifestHash(chunks)
        #expect(ContentID.manifestProblem(named, size: 2 << 20, hash: hash) == nil)
        #expect(ContentID.manifestProblem(named, size: (2 << 20) + 1, hash: hash)?.contains("add up") == true)
        #expect(ContentID.manifestProblem(named, size: 2 << 20, hash: String(repeating: "0", count: 64))?.contains("hash to") == true)
        var upper = named
        upper[0].sha256 = upper[0].sha256.uppercased()
        #expect(ContentID.manifestProblem(upper, size: 2 << 20, hash: hash)?.contains("hex") == true)
        var huge = named
        huge[0].size = ContentID.maxChunkSize + 1
        #expect(ContentID.manifestProblem(huge, size: 2 << 20, hash: hash)?.contains("bytes (1 to") == true)
        #expect(ContentID.manifestProblem([], size: 0, hash: Digest.sha256Hex([])) == nil)
    }
}
