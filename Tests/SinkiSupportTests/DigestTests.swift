import Testing
@testable import SinkiSupport

/// Digests against their published check values, fed whole and in pieces, and copied mid-stream.
@Suite struct DigestTests {
    static let check = Array("123456789".utf8)

    @Test(arguments: [
        (Digest.Algorithm.crc32, "cbf43926"),
        (.sha1, "f7c3bc1d808e04732adf679965ccc34ca7ae3441"),
        (.sha256, "15e2b0d3c33891ebb0f1ef609ec419420c20e320ce94c65fbc8c3312448eb225"),
    ])
    func checkValues(algorithm: Digest.Algorithm, hex: String) {
        #expect(Hex.encode(Digest.hash(Self.check, algorithm)) == hex)
        let digest = Digest(algorithm)
        digest.update(Array(Self.check[0..<4]))
        let copy = digest.copy()
        digest.update(Array(Self.check[4...]))
        #expect(digest.finishHex() == hex)
        copy.update(Array(Self.check[4...]))
        #expect(copy.finishHex() == hex)
        #expect(copy.finish().count == algorithm.byteCount)
        // After finishing, a digest starts over.
        digest.update(Self.check)
        #expect(digest.finishHex() == hex)
    }
}
