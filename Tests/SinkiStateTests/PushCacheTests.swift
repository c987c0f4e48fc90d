import SinkiSupport
import Testing
@testable import SinkiState

/// The push cache: content the walk read and compressed, kept for the push, within its budget; and the
/// walk compressing only what the cache can keep (the rest the push reads and compresses itself).
@Suite struct PushCacheTests {
    static func content(_ size: Int, inode: UInt64 = 1) -> CachedContent {
        let stat = FileStat(kind: .file, size: Int64(size), mtime: 1, ctime: 1, inode: inode, device: 1, mode: 0o644)
        return CachedContent(stat: stat, sha256: "h\(inode)", data: [UInt8](repeating: 7, count: size))
    }

    @Test func anEmptyCacheAdmitsFilesInOrderUpToItsLimit() {
        let cache = PushCache()
        let size = 4096
        let fitting = PushCache.limit / (size + CachedContent.overhead)
        let admitted = cache.admits(Array(repeating: Int64(size), count: fitting + 10))
        #expect(admitted.prefix(fitting).allSatisfy { $0 })
        #expect(admitted.dropFirst(fitting).allSatisfy { !$0 })
    }

    @Test func aSmallerFileAfterOneThatDidNotFitIsStillAdmitted() {
        let cache = PushCache()
        let admitted = cache.admits([Int64(PushCache.limit), 10])
        #expect(admitted == [false, true])
    }

    @Test func whatTheCacheHoldsLeavesLessRoom() {
        var cache = PushCache()
        let big = PushCache.limit / 2
        let kept = Self.content(big)
        cache.remember("a", kept)
        #expect(cache.admits([Int64(big)]) == [false])
        #expect(cache.admits([Int64(big / 2)]) == [true])
        // Taken by the push, its room is free again.
        var facts = LocalFacts(kept.stat, type: "")
        facts.hash = kept.sha256
        #expect(cache.take("a", matching: facts)?.data == kept.data)
        #expect(cache.admits([Int64(big)]) == [true])
    }
}
