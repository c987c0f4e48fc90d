import Foundation
import Glibc
import SinkiRecord
@testable import SinkiServer
import SinkiSupport
import SinkiTestSupport
import Testing

/// Chunks live in packs of several MiB, not a file each (issue 22 item 3; docs/server.md, "Chunks"):
/// a user's index says where each one is; garbage collection removes what no record names and repacks
/// what that leaves; a folder of the layout before packs is read where it is and moved into packs.
@Suite struct PackTests {
    /// Past the chunk grace and the time a pack is left to settle.
    static let later = Clock.now() + 2 * 86_400 * 1_000_000_000

    @Test func manyChunksLiveInAFewPacks() throws {
        let fixture = try ServerFixture()
        let file = ChunkedFile.random(Array(repeating: 300_000, count: 40))
        let batch = try fixture.request("POST", Routes.chunkBatch, headers: [("Content-Type", ChunkFrames.mediaType)],
                                        body: ChunkFrames.encode(zip(file.names, file.chunks).map { ($0, $1) }))
        #expect(batch.status == 200, "\(batch.text)")
        let held = fixture.heldChunks()
        // 12 MB in packs of 8 MiB: two files, not forty.
        #expect(held.names == Set(file.names))
        #expect(held.chunks.values.allSatisfy(\.packed) && held.chunkFiles == 0)
        #expect(held.packFiles == 2, "\(held.packFiles) packs")
        for (name, bytes) in zip(file.names, file.chunks) { #expect(held.bytes(name) == bytes) }
        #expect(try fixture.request("GET", Routes.chunks + file.names[17]).body == file.chunks[17])
        let fetched = try fixture.request("POST", Routes.fetchChunks, headers: [("Content-Type", "application/json")],
                                          body: ChunkNamesRequest(chunks: [file.names[39], file.names[0]]).jsonBytes)
        let answer = ChunkFrames.header(name: file.names[39], length: 300_000) + file.chunks[39]
            + ChunkFrames.header(name: file.names[0], length: 300_000) + file.chunks[0]
        #expect(fetched.status == 200 && fetched.body == answer)
        #expect(try fixture.modify([file.record("P/big.bin")]).map(\.status) == [.saved])
        #expect(try fixture.request("GET", Routes.assets + file.hash).body == file.bytes)
    }

    /// Dead chunks go from the index at once; their bytes go when collection copies the live ones of a
    /// pack left mostly dead into a new pack and removes the old one. A pack still being written is
    /// left alone until it is done with.
    @Test func collectionRepacksWhatItLeavesMostlyDead() throws {
        let fixture = try ServerFixture { $0.retention.historyDays = 0 }
        try fixture.settleRetention()
        let chunks = try #require(fixture.server.chunkStore)
        let dead = ChunkedFile.random(Array(repeating: 300_000, count: 30))
        let live = ChunkedFile.random([200_000, 100_000])
        try fixture.uploadChunks(of: dead)
        try fixture.uploadChunks(of: live)
        #expect(try fixture.modify([live.record("P/live.bin")]).map(\.status) == [.saved])
        let before = fixture.heldChunks()
        #expect(before.packFiles == 2)
        let oldPlace = try #require(before.chunks[live.names[0]])

        // The second pack is the one being written: its dead chunks leave the index, its bytes stay.
        let first = try #require(fixture.server.purgeNow(at: Self.later))
        #expect(first.chunks == 30)
        let between = fixture.heldChunks()
        #expect(between.names == Set(live.names))
        #expect(between.packFiles == 1, "the full pack, all dead, is removed; the one being written stays")

        // Done with, it is repacked: the live chunks move into a new pack, the old one goes.
        chunks.sealCurrentPacks()
        #expect(fixture.server.purgeNow(at: Self.later)?.chunks == 0)
        let after = fixture.heldChunks()
        #expect(after.names == Set(live.names) && after.packFiles == 1)
        let newPlace = try #require(after.chunks[live.names[0]])
        #expect(newPlace.path != oldPlace.path)
        #expect(!FileManager.default.fileExists(atPath: oldPlace.path))
        for (name, bytes) in zip(live.names, live.chunks) { #expect(after.bytes(name) == bytes) }
        #expect(try fixture.request("GET", Routes.assets + live.hash).body == live.bytes)
        // A reader that looked the chunk up before it moved finds it where it went.
        let stale = ChunkIndex.Entry(pack: URL(fileURLWithPath: oldPlace.path).lastPathComponent, offset: oldPlace.offset,
                                     size: oldPlace.size, stored: 0, touched: 0)
        let reopened = try #require(try chunks.open(user: "default", chunk: live.names[0], entry: stale))
        #expect(reopened.entry.offset == newPlace.offset && reopened.file.path == newPlace.path)
        // Nothing more to do: a pack of live chunks stays as it is.
        #expect(fixture.server.purgeNow(at: Self.later)?.chunks == 0)
        #expect(fixture.heldChunks().chunks[live.names[0]] == newPlace)
    }

    /// A data folder from before packs (a file per chunk): imported into the index and moved into a
    /// pack by the collection at start, nothing lost.
    @Test func aFolderOfTheLayoutBeforePacksIsReadThenRepacked() throws {
        let file = ChunkedFile.random([300_000, 200_000, 1000])
        let orphan = randomBytes(5000)
        let fixture = try ServerFixture { configuration in
            let folder = configuration.dataDirectory + "/chunks/" + Digest.sha256Hex(Array("default".utf8))
            try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            _ = FileManager.default.createFile(atPath: folder + "/user", contents: Data("default".utf8))
            _ = FileManager.default.createFile(atPath: folder + "/lock", contents: Data())
            for (name, bytes) in zip(file.names + [Digest.sha256Hex(orphan)], file.chunks + [orphan]) {
                try? FileManager.default.createDirectory(atPath: folder + "/" + name.prefix(2), withIntermediateDirectories: true)
                _ = FileManager.default.createFile(atPath: folder + "/" + name.prefix(2) + "/" + name, contents: Data(bytes))
            }
        }
        try fixture.settleRetention()
        // The pass at start imported the folder into the index and moved its chunks into a pack.
        let imported = fixture.heldChunks()
        #expect(imported.names == Set(file.names + [Digest.sha256Hex(orphan)]))
        #expect(imported.chunks.values.allSatisfy(\.packed) && imported.chunkFiles == 0 && imported.packFiles == 1)
        for (name, bytes) in zip(file.names, file.chunks) { #expect(imported.bytes(name) == bytes) }
        #expect(try fixture.request("GET", Routes.chunks + file.names[1]).body == file.chunks[1])
        #expect(try MissingChunksResponse.parse(fixture.missing(file.names).body).missing.isEmpty)
        #expect(try fixture.modify([file.record("P/old.bin")]).map(\.status) == [.saved])

        let pass = try #require(fixture.server.purgeNow(at: Self.later))
        #expect(pass.chunks == 1, "the chunk no record names goes")
        #expect(fixture.heldChunks().names == Set(file.names))
        #expect(try fixture.request("GET", Routes.assets + file.hash).body == file.bytes)
    }
}
