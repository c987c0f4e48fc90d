import Glibc
import SinkiTestSupport
import Testing
@testable import SinkiSupport

/// The hasher that follows a file as it is written: small reports add up, and a mark lets the bytes
/// after it be taken back.
@Suite struct TrailingDigestTests {
    static func bytes(_ count: Int, seed: UInt8) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31) ^ seed } }

    /// Appends `bytes` to the open file `fd` in pieces of `piece`, reporting each to `digest`.
    static func write(_ bytes: [UInt8], to fd: Int32, at start: Int, piece: Int, reporting digest: TrailingDigest) {
        var offset = 0
        while offset < bytes.count {
            let count = min(piece, bytes.count - offset)
            let written = bytes[offset..<offset + count].withUnsafeBytes { pwrite(fd, $0.baseAddress, count, off_t(start + offset)) }
            #expect(written == count)
            offset += count
            digest.advance(to: Int64(start + offset))
        }
    }

    @Test func smallReportsAddUpToTheFilesDigest() throws {
        let directory = TemporaryDirectory("sinki-trailing")
        let path = directory.child("growing.bin")
        let fd = open(path, O_WRONLY | O_CREAT, 0o600)
        defer { close(fd) }
        let content = Self.bytes(5 << 20 + 12_345, seed: 1)
        let digest = TrailingDigest(path: path, from: 0, algorithm: .sha256, startsWriteback: true)
        Self.write(content, to: fd, at: 0, piece: 16_384, reporting: digest)
        try digest.wait(upTo: 1 << 20)
        #expect(try digest.finish(at: Int64(content.count)) == Digest.hash(content))
    }

    @Test func bytesAfterAMarkCanBeTakenBack() throws {
        let directory = TemporaryDirectory("sinki-trailing")
        let path = directory.child("chunks.bin")
        let fd = open(path, O_WRONLY | O_CREAT, 0o600)
        defer { close(fd) }
        let first = Self.bytes(3 << 20, seed: 2), refused = Self.bytes(2 << 20, seed: 3), second = Self.bytes(1 << 20 + 7, seed: 4)
        let digest = TrailingDigest(path: path, from: 0, algorithm: .sha256)
        Self.write(first, to: fd, at: 0, piece: 100_000, reporting: digest)
        digest.mark(at: Int64(first.count))
        Self.write(refused, to: fd, at: first.count, piece: 100_000, reporting: digest)
        try digest.wait(upTo: Int64(first.count + refused.count))
        #expect(digest.rollBack(to: Int64(first.count)))
        #expect(ftruncate(fd, off_t(first.count)) == 0)
        Self.write(second, to: fd, at: first.count, piece: 100_000, reporting: digest)
        #expect(try digest.finish(at: Int64(first.count + second.count)) == Digest.hash(first + second))
    }

    @Test func withoutAMarkThereIsNoGoingBack() throws {
        let directory = TemporaryDirectory("sinki-trailing")
        let path = directory.child("unmarked.bin")
        let fd = open(path, O_WRONLY | O_CREAT, 0o600)
        defer { close(fd) }
        let digest = TrailingDigest(path: path, from: 0, algorithm: .crc32)
        Self.write(Self.bytes(2 << 20, seed: 5), to: fd, at: 0, piece: 65_536, reporting: digest)
        try digest.wait(upTo: 2 << 20)
        #expect(!digest.rollBack(to: 1 << 20))
        // Not yet past the offset: nothing to forget.
        #expect(digest.rollBack(to: 3 << 20))
    }
}
