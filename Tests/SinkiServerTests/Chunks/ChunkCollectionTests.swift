import Dispatch
import Foundation
import SinkiRecord
@testable import SinkiServer
import SinkiSupport
import SinkiTestSupport
import Synchronization
import Testing

/// Garbage collection of chunks (docs/server.md, "Chunks"): chunks no live record names go once their
/// grace has passed; nothing a record names, or that was uploaded or found present within the grace,
/// ever does, even while uploads and modifies run at the same moment.
@Suite struct ChunkCollectionTests {
    static let twoDays = 2 * 86_400

    @Test(arguments: StoreKind.all)
    func removesOldChunksNoLiveRecordNamesAndKeepsTheRest(kind: StoreKind) throws {
        let made = try kind.make()
        defer { withExtendedLifetime(made.keepAlive) {} }
        // History off: what replaced and deleted versions named goes with them (HistoryTests keeps it).
        let fixture = try ServerFixture(tokens: [:], store: made.store) { $0.retention.historyDays = 0 }
        try fixture.settleRetention()
        let alice = try fixture.issue(user: "alice")
        let narrow = try fixture.issue(user: "alice", device: "phone", scope: TokenScope(prefix: "S/a"))
        let named = ChunkedFile.random([300_000, 1000])
        let replaced = ChunkedFile.random([300_000, 2000])
        let deleted = ChunkedFile.random([300_000, 3000])
        let never = ChunkedFile.random([4000, 5000])
        let fresh = ChunkedFile.random([6000])
        for file in [named, replaced, deleted, never, fresh] { try fixture.uploadChunks(of: file, token: alice.secret) }
        try fixture.uploadChunks(of: never, token: narrow.secret)
        let first = try fixture.modify([named.record("S/named"), replaced.record("S/replaced"), deleted.record("S/deleted")], token: alice.secret)
        let tags = first.compactMap { $0.record?.changeTag }
        // A new version of S/replaced shares its first chunk; S/deleted goes.
        let version2 = ChunkedFile(chunks: [replaced.chunks[0], randomBytes(7000)])
        try fixture.uploadChunks(of: version2, token: alice.secret)
        let second = try fixture.modify([version2.record("S/replaced", baseTag: tags[1]), tombstone("S/deleted", baseTag: tags[2])],
                                        token: alice.secret)
        #expect(second.map(\.status) == [.saved, .saved])
        for file in [named, replaced, deleted, never, version2] {
            for name in file.names { fixture.age(user: "alice", name, seconds: Self.twoDays) }
        }
        // Another user's chunks are theirs to keep.
        let bob = try fixture.issue(user: "bob")
        let bobs = ChunkedFile.random([8000])
        try fixture.uploadChunks(of: bobs, token: bob.secret)
        #expect(try fixture.modify([bobs.record("S/bobs")], token: bob.secret).map(\.status) == [.saved])
        fixture.age(user: "bob", bobs.names[0], seconds: Self.twoDays)

        let pass = try #require(fixture.server.purgeNow())
        let gone = Set(replaced.names.dropFirst() + deleted.names + never.names)
        #expect(pass.chunks == gone.count)
        let kept = Set(named.names + version2.names + fresh.names)
        #expect(fixture.heldChunkNames(user: "alice") == kept)
        #expect(fixture.heldChunkNames(user: "bob") == Set(bobs.names))
        #expect(try fixture.request("GET", Routes.assets + version2.hash, token: alice.secret).body == version2.bytes)
        // Only chunks go: the records, and what they name, are whole.
        #expect(try fixture.request("GET", Routes.assets + named.hash, token: alice.secret).body == named.bytes)
        // The narrowed token's markers went with their grace: it uploads again before it names them.
        #expect(fixture.heldChunks(user: "alice").markers == 0, "markers left")
        // A second pass finds nothing more.
        #expect(fixture.server.purgeNow()?.chunks == 0)
    }

    @Test func aChunkFoundPresentWithinTheGraceIsKept() throws {
        let fixture = try ServerFixture()
        try fixture.settleRetention()
        let file = ChunkedFile.random([1000, 2000])
        try fixture.uploadChunks(of: file)
        for name in file.names { fixture.age(name, seconds: Self.twoDays) }
        // An agent about to send a record asks; what is present is touched and so kept.
        #expect(try MissingChunksResponse.parse(fixture.missing([file.names[0]]).body).missing.isEmpty)
        #expect(fixture.server.purgeNow()?.chunks == 1)
        #expect(fixture.heldChunkNames() == [file.names[0]])
        // An hour short of the grace: kept too.
        fixture.age(file.names[0], seconds: 23 * 3600)
        #expect(fixture.server.purgeNow()?.chunks == 0)
        // A shorter grace (--chunk-grace) takes it.
        let short = try ServerFixture { $0.retention.chunkGraceSeconds = 3600 }
        try short.settleRetention()
        try short.uploadChunks(of: file)
        short.age(file.names[0], seconds: 3700)
        #expect(short.server.purgeNow()?.chunks == 1)
    }

    /// A server holding one chunk no record names, two days old, its retention pass at start done.
    static func oneOldChunk() throws -> (ServerFixture, ChunkStore, ChunkedFile) {
        let fixture = try ServerFixture()
        try fixture.settleRetention()
        let chunks = try #require(fixture.server.chunkStore)
        let file = ChunkedFile.random([300_000])
        try fixture.uploadChunks(of: file)
        fixture.age(file.names[0], seconds: twoDays)
        return (fixture, chunks, file)
    }

    /// The collection lists its candidates against the records, then a modify commits a record naming
    /// one of them before the collection takes its lock: it must look again and keep the chunk.
    @Test func aRecordCommittedAfterTheCollectionLookedKeepsItsChunks() throws {
        let (fixture, chunks, file) = try Self.oneOldChunk()
        let saved = Mutex<[ModifyResult.Status]>([])
        let port = fixture.port
        chunks.collectionHook.withLock { hook in
            hook = { point, _ in
                guard point == .beforeLocking else { return }
                saved.withLock { $0 = (try? modify(port: port, [file.record("G/big.bin")]).map(\.status)) ?? [] }
            }
        }
        #expect(fixture.server.purgeNow()?.chunks == 0)
        #expect(saved.withLock { $0 } == [.saved])
        #expect(fixture.heldChunk(file.names[0]).map(Digest.sha256Hex) == file.names[0])
        #expect(try Digest.sha256Hex(fixture.request("GET", Routes.assets + file.hash).body) == Digest.sha256Hex(file.bytes))
    }

    /// A modify that arrives while the collection deletes waits for it, and then finds the chunk gone:
    /// refused (`chunks-missing`), never saved naming a chunk that is not there.
    @Test func aModifyDuringTheDeletesFindsTheChunkGoneAndIsRefused() throws {
        let (fixture, chunks, file) = try Self.oneOldChunk()
        let outcome = Mutex<ModifyResult?>(nil)
        let finished = DispatchGroup()
        let port = fixture.port, server = fixture.server
        chunks.collectionHook.withLock { hook in
            hook = { point, _ in
                guard point == .locked else { return }
                finished.enter()
                DispatchQueue.global().async {
                    defer { finished.leave() }
                    outcome.withLock { $0 = try? modify(port: port, [file.record("G/big.bin")]).first }
                }
                // The modify is in the server (waiting for the lock, or about to take it) before the deletes.
                try? waitUntilSync("the modify to reach the server") { server.liveRequests >= 1 }
            }
        }
        #expect(fixture.server.purgeNow()?.chunks == 1)
        finished.wait()
        let result = try #require(outcome.withLock { $0 })
        #expect(result.status == .refused && result.problem?.code == "chunks-missing")
        #expect(fixture.heldChunk(file.names[0]) == nil)
    }

    /// Collections and modifies raced many times: every saved record's chunks are there afterwards.
    @Test func racedCollectionsNeverLeaveARecordNamingAMissingChunk() throws {
        let fixture = try ServerFixture()
        try fixture.settleRetention()
        var saved: [ChunkedFile] = []
        var refused = 0
        // What one modify and one collection take here: each side is held back by a random part of it,
        // so that the two meet at every point of each other (before, during and after the collection's
        // look and its deletes), whatever the machine's speed.
        let started = Clock.monotonic()
        _ = try modify(port: fixture.port, [fileRecord("G/warm-up", "x")])
        _ = fixture.server.purgeNow()
        let span = UInt32(max(1_000, (Clock.monotonic() - started) / 1_000))
        for round in 0..<30 {
            let file = ChunkedFile.random([1000 + round, 2000])
            try fixture.uploadChunks(of: file)
            for name in file.names { fixture.age(name, seconds: Self.twoDays) }
            let status = Mutex<ModifyResult.Status?>(nil)
            let server = fixture.server, port = fixture.port, record = file.record("G/\(round).bin")
            let heldBack = (side: Int.random(in: 0...1), micros: UInt32.random(in: 0...span))
            DispatchQueue.concurrentPerform(iterations: 2) { side in
                if side == heldBack.side { usleep(heldBack.micros) }
                if side == 0 {
                    _ = server.purgeNow()
                } else {
                    status.withLock { $0 = try? modify(port: port, [record]).first?.status }
                }
            }
            switch status.withLock({ $0 }) {
            case .saved?: saved.append(file)
            case .refused?: refused += 1
            default: Issue.record("round \(round): no answer")
            }
        }
        _ = fixture.server.purgeNow()
        for file in saved {
            // Compared by hash: a failure then reads as a name, not a megabyte of numbers.
            for name in file.names { #expect(fixture.heldChunk(name).map(Digest.sha256Hex) == name, "a saved record lost chunk \(name)") }
            #expect(try Digest.sha256Hex(fixture.request("GET", Routes.assets + file.hash).body) == Digest.sha256Hex(file.bytes))
        }
        print("raced collections: \(saved.count) records saved, \(refused) refused for chunks the collection took first")
    }

    /// Two servers on one PostgreSQL database and one data folder: each collects, neither removes what
    /// a record saved through the other names.
    @Test func serversSharingTheFolderAndTheDatabaseKeepWhatEitherSaved() throws {
        let database = try PostgresCluster.shared().createDatabase()
        let shared = TemporaryDirectory("sinki-shared-collection")
        func server() throws -> ServerFixture {
            try ServerFixture(tokens: [:], store: try PostgresStore(url: database.url, connections: 2)) {
                $0.uploadsDirectory = shared.child("uploads")
                $0.chunksDirectory = shared.child("chunks")
            }
        }
        let one = try server(), two = try server()
        try one.settleRetention()
        try two.settleRetention()
        let alice = try one.issue(user: "alice")
        let named = ChunkedFile.random([300_000]), unnamed = ChunkedFile.random([5000])
        try one.uploadChunks(of: named, token: alice.secret)
        try one.uploadChunks(of: unnamed, token: alice.secret)
        #expect(try two.modify([named.record("S/big")], token: alice.secret).map(\.status) == [.saved])
        let held = ServerChunks(shared.child("chunks"), user: "alice")
        for name in named.names + unnamed.names { try held.age(name, seconds: Self.twoDays) }
        #expect(one.server.purgeNow()?.chunks == 1)
        #expect(two.server.purgeNow()?.chunks == 0)
        #expect(try one.request("GET", Routes.assets + named.hash, token: alice.secret).body == named.bytes)
        #expect(try two.request("GET", Routes.chunks + unnamed.names[0], token: alice.secret).status == 404)
    }
}

/// A modify on a fresh connection to the server on `port`, for threads that cannot hold the fixture.
private func modify(port: Int, _ records: [Record]) throws -> [ModifyResult] {
    try TestConnection(port: port).request("POST", Routes.modify, headers: [("Content-Type", "application/json")],
                                           body: ModifyRequest(records: records).jsonBytes).modifyResults()
}
