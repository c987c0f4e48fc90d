import Foundation
import Testing
@testable import SinkiMerge
import SinkiSupport
import SinkiTestSupport

/// The content-addressed cache of last shared versions, on real files.
struct BaseCacheTests {
    let directory = TemporaryDirectory("sinki-bases")
    let log = LogCapture()
    var folder: String { directory.child("bases") }

    func open(limit: Int64) throws -> BaseCache { try BaseCache(directory: folder, limit: limit, logger: log.logger) }

    func blob(_ tag: Character, _ size: Int) -> [UInt8] { Array(repeating: UInt8(tag.asciiValue!), count: size) }

    @Test func putThenGet() throws {
        let cache = try open(limit: 1 << 20)
        let content = bytes("the base version\n")
        let hash = try #require(try cache.put(content))
        #expect(hash == ContentID.of(content), "named like any content: by its manifest above 256 KiB")
        #expect(cache.get(hash) == content)
        #expect(cache.count == 1 && cache.totalBytes == Int64(content.count))
        #expect(FileManager.default.fileExists(atPath: "\(folder)/\(hash.prefix(2))/\(hash)"))
        // The same content again is one entry.
        #expect(try cache.put(content, sha256: hash) == hash)
        #expect(cache.count == 1)
        #expect(cache.get(String(repeating: "0", count: 64)) == nil)
        #expect(cache.get("../../etc/passwd") == nil)
    }

    @Test func aWrongHashIsRefused() throws {
        let cache = try open(limit: 1 << 20)
        #expect(throws: BaseCacheError.self) { try cache.put(bytes("x"), sha256: String(repeating: "a", count: 64)) }
        #expect(cache.count == 0)
    }

    @Test func theLeastRecentlyUsedGoesFirst() throws {
        let cache = try open(limit: 300)
        let a = try #require(try cache.put(blob("a", 100)))
        let b = try #require(try cache.put(blob("b", 100)))
        let c = try #require(try cache.put(blob("c", 100)))
        #expect(cache.totalBytes == 300)
        // a is used, so b is now the oldest.
        #expect(cache.get(a) != nil)
        let d = try #require(try cache.put(blob("d", 100)))
        #expect(!cache.contains(b))
        #expect(cache.hashesOldestFirst == [c, a, d])
        #expect(!FileManager.default.fileExists(atPath: "\(folder)/\(b.prefix(2))/\(b)"))
        // touch counts as a use too.
        #expect(cache.touch(c))
        try cache.put(blob("e", 150))
        #expect(cache.hashesOldestFirst.count == 2)
        #expect(cache.contains(c) && !cache.contains(a) && !cache.contains(d))
        #expect(cache.totalBytes <= 300)
    }

    @Test func aVersionLargerThanTheBudgetIsNotKept() throws {
        let cache = try open(limit: 50)
        try cache.put(blob("s", 10))
        #expect(try cache.put(blob("x", 51)) == nil)
        #expect(cache.count == 1)
        let zero = try BaseCache(directory: directory.child("none"), limit: 0, logger: log.logger)
        #expect(try zero.put(bytes("a")) == nil)
        #expect(zero.count == 0)
    }

    @Test func putFromAFile() throws {
        let cache = try open(limit: 10 << 20)
        let source = directory.child("source.db")
        let content = (0..<3_000_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        try writeFile(source, Data(content))
        let hash = try #require(try cache.put(file: source))
        #expect(hash == ContentID.of(content), "named like any content: by its manifest above 256 KiB")
        #expect(cache.get(hash) == content)
        #expect(try cache.put(file: source) == hash)
        #expect(cache.count == 1)
        #expect(throws: BaseCacheError.self) { try cache.put(file: directory.child("missing")) }
    }

    @Test func reopeningKeepsEntriesAndTheirOrder() throws {
        var hashes: [String] = []
        do {
            let cache = try open(limit: 1000)
            for tag in ["a", "b", "c"] as [Character] { hashes.append(try #require(try cache.put(blob(tag, 100)))) }
            _ = cache.get(hashes[0])
        }
        let again = try open(limit: 1000)
        #expect(again.count == 3 && again.totalBytes == 300)
        #expect(again.hashesOldestFirst == [hashes[1], hashes[2], hashes[0]])
        // A smaller budget at open drops the oldest.
        let smaller = try open(limit: 200)
        #expect(smaller.hashesOldestFirst == [hashes[2], hashes[0]])
    }

    @Test func whatACrashLeavesIsCleanedUpOrRefused() throws {
        let good = blob("g", 64), damaged = blob("d", 64)
        var goodHash = "", damagedHash = ""
        do {
            let cache = try open(limit: 1 << 20)
            goodHash = try #require(try cache.put(good))
            damagedHash = try #require(try cache.put(damaged))
        }
        // A write cut short (its temporary file), and an entry whose bytes the kernel lost.
        try writeFile(folder + "/.tmp-deadbeef", "half a vers")
        let entry = "\(folder)/\(damagedHash.prefix(2))/\(damagedHash)"
        let handle = try #require(FileHandle(forWritingAtPath: entry))
        try handle.truncate(atOffset: 10)
        try handle.close()
        // Something that is not an entry is left alone.
        try writeFile(folder + "/README", "not mine")

        let cache = try open(limit: 1 << 20)
        #expect(!FileManager.default.fileExists(atPath: folder + "/.tmp-deadbeef"))
        #expect(FileManager.default.fileExists(atPath: folder + "/README"))
        #expect(cache.get(goodHash) == good)
        #expect(cache.get(damagedHash) == nil)
        #expect(!cache.contains(damagedHash))
        #expect(!FileManager.default.fileExists(atPath: entry))
        #expect(cache.totalBytes == 64)
        #expect(log.text.contains("does not match its hash"))
    }

    @Test func anEntryRemovedBehindItsBackIsAMiss() throws {
        let cache = try open(limit: 1 << 20)
        let hash = try #require(try cache.put(bytes("x")))
        try FileManager.default.removeItem(atPath: "\(folder)/\(hash.prefix(2))/\(hash)")
        #expect(cache.get(hash) == nil)
        #expect(cache.count == 0 && cache.totalBytes == 0)
    }

    @Test func aSmallerLimitEvictsAtOnce() throws {
        let cache = try open(limit: 1000)
        for tag in ["a", "b", "c", "d"] as [Character] { try cache.put(blob(tag, 100)) }
        cache.setLimit(150)
        #expect(cache.count == 1 && cache.totalBytes == 100)
        cache.remove(cache.hashesOldestFirst[0])
        #expect(cache.count == 0 && cache.totalBytes == 0)
    }
}
