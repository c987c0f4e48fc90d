import Foundation
import Glibc
import SinkiRecord
import SinkiSupport
import SinkiTestSupport
import Testing
@testable import SinkiState

/// The agent's side of chunked files without a server: a large file is not read by the scan, its
/// one read cuts and names it, and a new version is built from chunks on disk plus chunks fetched,
/// each checked, resumable after a kill.
@Suite struct ChunkedContentTests {
    static func bytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var random = SeededRandom(seed: seed)
        return random.bytes(count)
    }

    static func writeFile(_ path: String, _ bytes: [UInt8]) throws {
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    static func held(_ path: String) throws -> HeldFile {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        defer { close(fd) }
        return try HeldFile(duplicating: fd)
    }

    @Test func theReaderCutsAndNamesAsTheChunkerDoesAndResumesAtAChunk() throws {
        let directory = TemporaryDirectory("sinki-chunk-reader")
        let content = Self.bytes(9 << 20, seed: 21)
        let path = directory.child("big.bin")
        try Self.writeFile(path, content)
        let expected = Chunker.chunks(of: content, profile: .forFileSize(Int64(content.count)))
        let reader = ChunkFileReader(file: try Self.held(path), size: Int64(content.count), from: 0)
        var read: [ChunkPayload] = []
        while true {
            let batch = try reader.next(maxBytes: 1 << 20)
            if batch.isEmpty { break }
            read += batch
        }
        #expect(read.map(\.ref.sha256) == expected.map { Hex.encode($0.sha256) })
        #expect(read.map(\.ref.size) == expected.map { Int64($0.length) })
        #expect(ChunkFileReader.withChecksums(read).allSatisfy { $0.crc32 == Digest.hash($0.bytes, .crc32) })
        #expect(Array(read.map(\.bytes).joined()) == content)
        // From the end of the fourth chunk: the same chunks after it.
        let start = expected[4].offset
        let resumed = ChunkFileReader(file: try Self.held(path), size: Int64(content.count), from: start)
        var rest: [ChunkPayload] = []
        while true {
            let batch = try resumed.next(maxBytes: 4 << 20)
            if batch.isEmpty { break }
            rest += batch
        }
        #expect(rest.map(\.ref.sha256) == Array(read.map(\.ref.sha256).dropFirst(4)))
    }

    @Test func aFileShorterThanItsSizeSaidIsAChangeNotAManifest() throws {
        let directory = TemporaryDirectory("sinki-chunk-reader")
        let path = directory.child("shrunk.bin")
        try Self.writeFile(path, Self.bytes(1 << 20, seed: 2))
        let reader = ChunkFileReader(file: try Self.held(path), size: 2 << 20, from: 0)
        #expect(throws: ChunkReadError.self) {
            while try !reader.next(maxBytes: 8 << 20).isEmpty {}
        }
    }

    @Test func aNewVersionIsBuiltFromLocalChunksAndFetchedOnesEachChecked() throws {
        let directory = TemporaryDirectory("sinki-assembler")
        let old = Self.bytes(6 << 20, seed: 31)
        var new = old
        // A 300 KiB edit in the middle.
        let edit = Self.bytes(300 << 10, seed: 32)
        new.replaceSubrange((3 << 20)..<((3 << 20) + edit.count), with: edit)
        let oldPath = directory.child("old.bin")
        try Self.writeFile(oldPath, old)
        let oldChunks = Chunker.chunks(of: old, profile: .small)
        let newChunks = Chunker.chunks(of: new, profile: .small)
        let refs = newChunks.map { ChunkRef(sha256: Hex.encode($0.sha256), size: Int64($0.length)) }
        let id = ContentID.manifestHash(newChunks)
        try FileManager.default.createDirectory(atPath: directory.child("downloads"), withIntermediateDirectories: true)
        let assembler = try ChunkAssembler(id: id, chunks: refs, directory: directory.child("downloads"))
        #expect(assembler.missing.count == refs.count)
        let oldFile = try Self.held(oldPath)
        var places: [String: (source: Int, offset: Int64)] = [:]
        for chunk in oldChunks { places[Hex.encode(chunk.sha256)] = (0, chunk.offset) }
        let copied = assembler.copyLocal(from: [ChunkSource(file: oldFile, expect: try oldFile.stat())], places: places)
        let lacking = assembler.missing
        #expect(copied > 0 && !lacking.isEmpty && lacking.count <= 4, "only the chunks the edit touched are left: \(lacking.count)")
        let fetched = lacking.reduce(Int64(0)) { $0 + refs[$1].size }
        #expect(copied + fetched == Int64(new.count))
        // A wrong chunk is refused; the right one placed.
        let first = lacking[0]
        #expect(try !assembler.place(Array(repeating: 7, count: Int(refs[first].size)), name: refs[first].sha256))
        for index in lacking {
            let chunk = newChunks[index]
            let bytes = Array(new[Int(chunk.offset)..<Int(chunk.offset) + chunk.length])
            #expect(try assembler.place(bytes, name: refs[index].sha256))
        }
        #expect(assembler.missing.isEmpty)
        try assembler.finish()
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory.child("downloads/" + id))) == Data(new))
        #expect(!FileManager.default.fileExists(atPath: directory.child("downloads/" + id + ".have")))
    }

    @Test func aRebuildCutOffGoesOnAndChecksWhatItHadAgain() throws {
        let directory = TemporaryDirectory("sinki-assembler")
        let content = Self.bytes(3 << 20, seed: 41)
        let chunks = Chunker.chunks(of: content, profile: .small)
        let refs = chunks.map { ChunkRef(sha256: Hex.encode($0.sha256), size: Int64($0.length)) }
        let id = ContentID.manifestHash(chunks)
        let downloads = directory.child("downloads")
        try FileManager.default.createDirectory(atPath: downloads, withIntermediateDirectories: true)
        do {
            let first = try ChunkAssembler(id: id, chunks: refs, directory: downloads)
            for index in 0..<3 {
                #expect(try first.place(Array(content[Int(chunks[index].offset)..<Int(chunks[index].offset) + chunks[index].length]), name: refs[index].sha256))
            }
        }
        // A kill lost the second chunk's bytes (the page cache did not reach the disk): zeros there.
        let part = open(downloads + "/" + id + ".part", O_WRONLY)
        let zeros = [UInt8](repeating: 0, count: chunks[1].length)
        _ = zeros.withUnsafeBytes { pwrite(part, $0.baseAddress, $0.count, off_t(chunks[1].offset)) }
        close(part)
        let again = try ChunkAssembler(id: id, chunks: refs, directory: downloads)
        #expect(again.missing.count == refs.count - 3, "the marks survive the kill")
        #expect(again.recheck() == 2)
        #expect(again.missing.first == 1, "the chunk whose bytes were lost is placed again")
    }

    /// What the agent's upload does, without the network: every chunk taken as sent.
    static func upload(_ replica: Replica, _ path: String) async throws -> (chunks: [ChunkRef], recordWaits: Bool)? {
        guard let source = try await replica.openForUpload(path) else { return nil }
        let reader = ChunkFileReader(file: source.file, size: source.size, from: 0)
        var chunks: [ChunkRef] = []
        var bytes: [UInt8] = []
        while true {
            let batch = try reader.next(maxBytes: 4 << 20)
            if batch.isEmpty { break }
            chunks += batch.map(\.ref)
            if !ContentID.isManifest(size: source.size) { for piece in batch { bytes += piece.bytes } }
        }
        let manifest = try #require(ContentID.manifestHash(hex: chunks.map { ($0.sha256, $0.size) }))
        let content = ContentID.isManifest(size: source.size) ? manifest : Digest.sha256Hex(bytes)
        return (chunks, try await replica.uploadFinished(source, chunks: chunks, manifest: manifest, content: content))
    }

    @Test func theScanDoesNotReadALargeFileItsUploadNamesItAndThePushCarriesTheManifest() async throws {
        let fixture = try Fixture()
        let content = Self.bytes(2 << 20, seed: 51)
        try Self.writeFile(fixture.root + "/disk.img", content)
        let checked = try await fixture.replica.check(root: 0, paths: ["disk.img"])
        #expect(checked.hashed == 0, "a file sent as chunks is read by its upload, not by the scan")
        let row = try #require(try await fixture.replica.knownFile("Saves/disk.img"))
        #expect(row.sha256.isEmpty && row.size == Int64(content.count))
        #expect(try await fixture.replica.uploadCandidates(limit: 10, excluding: []) == ["Saves/disk.img"])
        #expect(try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: []).isEmpty, "the record waits for its chunks")
        let sent = try #require(try await Self.upload(fixture.replica, "Saves/disk.img"))
        #expect(sent.recordWaits)
        #expect(try await fixture.replica.knownFile("Saves/disk.img")?.sha256 == ContentID.of(content))
        #expect(try await fixture.replica.uploadCandidates(limit: 10, excluding: []).isEmpty)
        let batch = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: [])
        let record = try #require(batch.first?.record)
        #expect(record.data == nil && record.sha256 == ContentID.of(content))
        #expect(record.asset == Asset(manifestHash: ContentID.of(content), chunks: sent.chunks))
        var tag: Int64 = 0
        _ = try await fixture.replica.acknowledge(batch, saveAll(batch, from: &tag))
        #expect(await fixture.replica.pendingCount == 0)
    }

    /// Below 256 KiB a file is named by the SHA-256 of its bytes even when an agent's inline limit is
    /// lower and it travels as chunks: the record names that, its asset the manifest.
    @Test func aSmallFileSentAsChunksKeepsItsNameAndCarriesItsManifest() async throws {
        let fixture = try Fixture()
        await fixture.replica.setInlineLimit(64 << 10)
        let content = Self.bytes(100 << 10, seed: 54)
        try Self.writeFile(fixture.root + "/small.bin", content)
        _ = try await fixture.replica.check(root: 0, paths: ["small.bin"])
        let sent = try #require(try await Self.upload(fixture.replica, "Saves/small.bin"))
        #expect(try await fixture.replica.knownFile("Saves/small.bin")?.sha256 == Digest.sha256Hex(content))
        #expect(try await fixture.replica.uploadCandidates(limit: 10, excluding: []).isEmpty, "uploaded once, not again and again")
        let batch = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: [])
        let record = try #require(batch.first?.record)
        #expect(record.sha256 == Digest.sha256Hex(content) && record.sha256 == ContentID.of(content))
        let asset = try #require(record.asset)
        #expect(asset.isManifest && asset.chunks == sent.chunks && asset.sha256 == ContentID.manifestHash(hex: sent.chunks.map { ($0.sha256, $0.size) }))
    }

    @Test func aLargeFileTouchedButNotChangedSendsNoRecord() async throws {
        let fixture = try Fixture()
        let content = Self.bytes(1 << 20, seed: 52)
        try Self.writeFile(fixture.root + "/same.bin", content)
        _ = try await fixture.replica.check(root: 0, paths: ["same.bin"])
        _ = try await Self.upload(fixture.replica, "Saves/same.bin")
        var batch = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: [])
        var tag: Int64 = 0
        _ = try await fixture.replica.acknowledge(batch, saveAll(batch, from: &tag))
        // Written again with the same bytes: a new stat, the same content.
        try Self.writeFile(fixture.root + "/same.bin", content)
        _ = try await fixture.replica.check(root: 0, paths: ["same.bin"])
        #expect(await fixture.replica.pendingCount == 1)
        let sent = try #require(try await Self.upload(fixture.replica, "Saves/same.bin"))
        #expect(!sent.recordWaits)
        #expect(await fixture.replica.pendingCount == 0)
        batch = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: [])
        #expect(batch.isEmpty)
    }

    @Test func aLargeFileRenamedWithoutItsCookieIsAMoveNotANewUpload() async throws {
        let fixture = try Fixture()
        try fixture.write("keeper.txt", "keeps the root from looking emptied")
        let content = Self.bytes(1 << 20, seed: 53)
        try Self.writeFile(fixture.root + "/a.bin", content)
        _ = try await fixture.replica.check(root: 0, paths: ["a.bin", "keeper.txt"])
        _ = try await Self.upload(fixture.replica, "Saves/a.bin")
        let batch = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: [])
        var tag: Int64 = 0
        _ = try await fixture.replica.acknowledge(batch, saveAll(batch, from: &tag))
        try FileManager.default.moveItem(atPath: fixture.root + "/a.bin", toPath: fixture.root + "/b.bin")
        // Seen as two unrelated events: the old path gone, then a new file.
        _ = try await fixture.replica.check(root: 0, paths: ["a.bin"])
        _ = try await fixture.replica.check(root: 0, paths: ["b.bin"])
        let moved = try #require(try await fixture.replica.knownFile("Saves/b.bin"))
        #expect(moved.sha256 == ContentID.of(content) && moved.movedFrom == "Saves/a.bin")
        #expect(try await fixture.replica.uploadCandidates(limit: 10, excluding: []).isEmpty, "the server copies the manifest; nothing is uploaded")
        let next = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: [])
        #expect(next.first { $0.record.path == "Saves/b.bin" }?.record.movedFrom == "Saves/a.bin")
    }

    /// The fault suite's seed 3: a folder renamed away while a walk that saw it was still recording
    /// its chunks (the watcher's rename, handled in between, found no row to move). What is recorded
    /// without being read is looked at once more: gone now, it is not recorded as present.
    @Test func whatAWalkSawThatIsGoneWhenItIsRecordedIsNotRecordedAsPresent() async throws {
        let fixture = try Fixture()
        try FileManager.default.createDirectory(atPath: fixture.root + "/seen", withIntermediateDirectories: true)
        try Self.writeFile(fixture.root + "/seen.bin", Self.bytes(1 << 20, seed: 55))
        let safeRoot = try SafeRoot(path: fixture.root)
        let folder = try #require(try safeRoot.stat("seen"))
        let large = try #require(try safeRoot.stat("seen.bin"))
        try FileManager.default.moveItem(atPath: fixture.root + "/seen", toPath: fixture.root + "/elsewhere")
        try FileManager.default.removeItem(atPath: fixture.root + "/seen.bin")
        _ = try await fixture.replica.absorb([Observation(root: 0, relative: "seen", path: "Saves/seen", stat: folder, known: nil),
                                              Observation(root: 0, relative: "seen.bin", path: "Saves/seen.bin", stat: large, known: nil)])
        #expect(try await fixture.replica.knownFile("Saves/seen") == nil)
        #expect(try await fixture.replica.knownFile("Saves/seen.bin") == nil)
        #expect(await fixture.replica.pendingCount == 0)
    }
}
