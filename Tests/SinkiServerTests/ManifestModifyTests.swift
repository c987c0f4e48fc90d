import Foundation
import SinkiRecord
@testable import SinkiServer
import SinkiSupport
import SinkiTestSupport
import Testing

/// `POST /v1/records/modify` with manifest assets: the rules of a manifest, and its chunks held at commit.
@Suite struct ManifestModifyTests {
    @Test func aManifestWhoseChunksAreHeldIsSavedAndComesBackWhole() throws {
        let fixture = try ServerFixture()
        let file = ChunkedFile.random([200_000, 150_000, 90_000])
        try fixture.uploadChunks(of: file)
        let results = try fixture.modify([file.record("G/big.bin")])
        #expect(results.map(\.status) == [.saved])
        let saved = try #require(results[0].record)
        #expect(saved.asset == file.asset && saved.sha256 == file.hash && saved.size == 440_000)
        #expect(try fixture.changes().records.first?.asset == file.asset)
        #expect(try fixture.request("GET", "/v1/records?path=G").page().records.first?.asset?.chunks == file.refs)
    }

    @Test func aManifestNamingChunksTheUserLacksIsRefusedUntilTheyCome() throws {
        let fixture = try ServerFixture()
        let file = ChunkedFile.random([100_000, 100_000, 100_000])
        #expect(try fixture.uploadChunk(file.chunks[1]).status == 201)
        let first = try fixture.modify([file.record("G/big.bin"), fileRecord("G/small", "fine")])
        #expect(first.map(\.status) == [.refused, .saved])
        let problem = try #require(first[0].problem)
        #expect(problem.status == 409 && problem.code == "chunks-missing")
        #expect(problem.detail.contains(file.names[0]) && problem.detail.contains(file.names[2]) && !problem.detail.contains(file.names[1]))
        #expect(!problem.requestId.isEmpty)
        // The agent asks which are missing, uploads them, and sends the record again.
        let missing = try MissingChunksResponse.parse(fixture.missing(file.names).body).missing
        #expect(missing == [file.names[0], file.names[2]])
        for name in missing { #expect(try fixture.uploadChunk(file.chunks[file.names.firstIndex(of: name)!]).status == 201) }
        #expect(try fixture.modify([file.record("G/big.bin")]).map(\.status) == [.saved])
    }

    @Test func aChunkHeldAtAnotherSizeThanTheManifestSaysCountsAsMissingAndItsUploadReplacesIt() throws {
        let fixture = try ServerFixture()
        let file = ChunkedFile.random([300_000])
        // A copy cut short on the server's disk.
        #expect(try fixture.uploadChunk(Array(file.chunks[0][..<1000]), name: file.names[0]).status == 201)
        let refused = try fixture.modify([file.record("G/big.bin")])
        #expect(refused.first?.problem?.code == "chunks-missing")
        try fixture.uploadChunks(of: file)
        #expect(fixture.heldChunk(file.names[0]) == file.chunks[0])
        #expect(try fixture.modify([file.record("G/big.bin")]).map(\.status) == [.saved])
    }

    struct Rule: CustomTestStringConvertible, Sendable {
        var name: String
        var change: @Sendable (inout Record) -> Void
        var status = 400
        var code = "bad-request"
        var says: String
        var field: String? = nil
        var testDescription: String { name }
    }

    static let file = ChunkedFile.random([200_000, 100_000, 50_000])
    static let rules: [Rule] = [
        Rule(name: "data beside the chunks", change: { $0.data = Deflate.compress([1, 2, 3]) }, says: "both data and an asset"),
        Rule(name: "no chunks", change: { $0.asset?.chunks = []; $0.asset?.id = Digest.sha256Hex([]) }, says: "names no chunk"),
        Rule(name: "a name in capitals", change: { $0.asset?.chunks?[1].sha256 = file.names[1].uppercased() }, says: "chunk 1 of"),
        Rule(name: "a name of 63 digits", change: { $0.asset?.chunks?[2].sha256.removeLast() }, says: "chunk 2 of"),
        Rule(name: "an empty chunk", change: { $0.asset?.chunks?[0].size = 0 }, says: "has 0 bytes"),
        Rule(name: "a chunk over the largest", change: { $0.asset?.chunks?[0].size = ContentID.maxChunkSize + 1 },
             says: "a chunk has 1 to \(ContentID.maxChunkSize)"),
        Rule(name: "sizes that do not add up", change: { $0.asset?.size += 1; $0.size += 1 }, says: "add up to 350000"),
        Rule(name: "a record size other than the asset's", change: { $0.size = 1 }, says: "the record 1"),
        Rule(name: "an id other than the manifest's hash", change: { $0.asset?.id = String(repeating: "0", count: 64) }, says: "hashes to \(file.hash)"),
        Rule(name: "a sha256 other than the manifest's hash", change: { $0.asset?.sha256 = String(repeating: "0", count: 64) }, says: "hashes to"),
        Rule(name: "a large file's record sha256 not the manifest's hash", change: { $0.sha256 = Digest.sha256Hex(file.bytes) },
             says: "its sha256 is its manifest's hash"),
        Rule(name: "more chunks than a manifest may name",
             change: { record in
                 let more = ChunkedFile(chunks: file.chunks + [[1], [2]])
                 record = more.record(record.path)
             }, says: "one names at most 4"),
        Rule(name: "over the server's largest upload",
             change: { record in
                 let big = ChunkedFile(chunks: [[UInt8]](repeating: [UInt8](repeating: 7, count: Int(ContentID.maxChunkSize)), count: 4))
                 record = big.record(record.path)
             }, status: 413, code: "too-large", says: "files of at most 8000000"),
    ]

    @Test(arguments: rules)
    func eachRuleOfAManifestIsChecked(_ rule: Rule) throws {
        let fixture = try ServerFixture {
            $0.limits.maxManifestChunks = 4
            $0.uploads.maxSize = 8_000_000
        }
        try fixture.uploadChunks(of: Self.file)
        var record = Self.file.record("G/rule.bin")
        #expect(try fixture.modify([record]).map(\.status) == [.saved])
        record.path = "G/broken.bin"
        rule.change(&record)
        let results = try fixture.modify([record])
        #expect(results.map(\.status) == [.refused])
        let problem = try #require(results.first?.problem)
        #expect(problem.status == rule.status && problem.code == rule.code)
        #expect(problem.detail.contains(rule.says), "\(problem.detail)")
        #expect(problem.field == rule.field)
    }

    @Test func aManifestOverTheTokensUploadSizeIsRefused() throws {
        let fixture = try ServerFixture.withAccounts()
        let limited = try fixture.issue(user: "alice", scope: TokenScope(maxUploadBytes: 300_000))
        let file = ChunkedFile.random([200_000, 200_000])
        try fixture.uploadChunks(of: file, token: limited.secret)
        let results = try fixture.modify([file.record("G/big.bin")], token: limited.secret)
        #expect(results.first?.problem?.status == 413 && results.first?.problem?.code == "too-large")
        #expect(results.first?.problem?.field == "maxUploadBytes")
    }

    @Test func aSmallFileMayTravelAsAManifestNamedByItsBytesHash() throws {
        let fixture = try ServerFixture()
        let file = ChunkedFile.random([100_000, 20_000])
        try fixture.uploadChunks(of: file)
        let record = file.record("G/small.bin")
        #expect(record.sha256 == Digest.sha256Hex(file.bytes))
        #expect(try fixture.modify([record]).map(\.status) == [.saved])
    }

    @Test func aMoveCopiesTheManifestAndAConflictCarriesIt() throws {
        let fixture = try ServerFixture()
        let file = ChunkedFile.random([300_000, 1000])
        try fixture.uploadChunks(of: file)
        let saved = try #require(try fixture.modify([file.record("G/old.bin")]).first?.record)
        var move = Record(path: "G/new.bin", type: "keep-both", size: file.size, sha256: file.hash, mode: 0o644, device: "laptop",
                          movedFrom: "G/old.bin")
        move.modifiedAt = 1
        let moved = try fixture.modify([move, tombstone("G/old.bin", baseTag: saved.changeTag)])
        #expect(moved.map(\.status) == [.saved, .saved])
        #expect(moved.first?.record?.asset == file.asset)
        let stale = try fixture.modify([fileRecord("G/new.bin", "an edit of nothing")])
        #expect(stale.first?.status == .conflict && stale.first?.record?.asset == file.asset)
    }

    @Test func aNarrowedTokenNamesOnlyChunksItUploadedItself() throws {
        let fixture = try ServerFixture.withAccounts()
        let full = try fixture.issue(user: "alice")
        let narrow = try fixture.issue(user: "alice", device: "phone", scope: TokenScope(prefix: "S/a"))
        let file = ChunkedFile.random([200_000, 100_000])
        try fixture.uploadChunks(of: file, token: full.secret)
        // Knowing the names is not enough: that would read content outside its prefix by hash.
        let borrowed = try fixture.modify([file.record("S/a/big.bin")], token: narrow.secret)
        #expect(borrowed.first?.problem?.code == "chunks-missing")
        // Other bytes under a held name are not proof of having it.
        let forged = try fixture.uploadChunk(Array("guess".utf8), name: file.names[0], token: narrow.secret)
        #expect(forged.status == 460)
        #expect(fixture.heldChunk(user: "alice", file.names[0]) == file.chunks[0])
        #expect(try fixture.modify([file.record("S/a/big.bin")], token: narrow.secret).first?.problem?.code == "chunks-missing")
        // The bytes themselves are: one copy is kept, and the record saved.
        try fixture.uploadChunks(of: file, token: narrow.secret)
        #expect(try fixture.modify([file.record("S/a/big.bin")], token: narrow.secret).map(\.status) == [.saved])
        #expect(fixture.heldChunkNames(user: "alice") == Set(file.names))
        let whole = try fixture.request("GET", Routes.assets + file.hash, token: narrow.secret)
        #expect(whole.status == 200 && whole.body == file.bytes)
    }

    /// Wrong bytes under a chunk's name answer alike whether the user holds that chunk or not: a
    /// narrowed token cannot tell which content the user has outside its prefix (issue 24 item 1).
    @Test func aNarrowedTokensForgedChunkAnswersAlikeHeldOrNot() throws {
        let fixture = try ServerFixture.withAccounts()
        let full = try fixture.issue(user: "alice")
        let narrow = try fixture.issue(user: "alice", device: "phone", scope: TokenScope(prefix: "S/a"))
        let held = ChunkedFile.random([150_000]), unheld = ChunkedFile.random([150_000])
        try fixture.uploadChunks(of: held, token: full.secret)
        let guess = Array(repeating: UInt8(7), count: 150_000)
        let answers = try [held, unheld].map { file in try fixture.uploadChunk(guess, name: file.names[0], token: narrow.secret) }
        #expect(answers.map(\.status) == [460, 460])
        #expect(try answers.map { try $0.problem().detail.replacingOccurrences(of: held.names[0], with: unheld.names[0]) }.allSatisfy {
            $0 == (try answers[1].problem().detail)
        })
        #expect(fixture.heldChunk(user: "alice", held.names[0]) == held.chunks[0])
        #expect(fixture.heldChunkNames(user: "alice") == Set(held.names))
    }

    /// A narrowed token cannot plant other bytes under the name of a chunk the owner will save, which
    /// the owner's devices would then skip sending and every receiver find damaged (issue 24 item 2):
    /// nothing is kept, the name stays missing for the owner, and the owner's save brings the real bytes.
    @Test func aNarrowedTokenCannotPlantBytesUnderAChunksName() throws {
        let fixture = try ServerFixture.withAccounts()
        let full = try fixture.issue(user: "alice")
        let narrow = try fixture.issue(user: "alice", device: "phone", scope: TokenScope(prefix: "S/a"))
        let file = ChunkedFile.random([200_000, 100_000])
        for (index, name) in file.names.enumerated() {
            let planted = try fixture.uploadChunk(index == 0 ? [0] : Array(repeating: 0, count: 100_000), name: name, token: narrow.secret)
            #expect(planted.status == 460)
        }
        #expect(fixture.heldChunkNames(user: "alice").isEmpty)
        #expect(try MissingChunksResponse.parse(fixture.missing(file.names, token: full.secret).body).missing == file.names)
        try fixture.uploadChunks(of: file, token: full.secret)
        #expect(try fixture.modify([file.record("S/b/big.bin")], token: full.secret).map(\.status) == [.saved])
        #expect(try fixture.request("GET", Routes.assets + file.hash, token: full.secret).body == file.bytes)
    }

    @Test func anotherUsersChunksAreMissingForThisOnesRecords() throws {
        let fixture = try ServerFixture.withAccounts()
        let alice = try fixture.issue(user: "alice"), bob = try fixture.issue(user: "bob")
        let file = ChunkedFile.random([300_000])
        try fixture.uploadChunks(of: file, token: alice.secret)
        #expect(try fixture.modify([file.record("S/big.bin")], token: bob.secret).first?.problem?.code == "chunks-missing")
        #expect(try fixture.modify([file.record("S/big.bin")], token: alice.secret).map(\.status) == [.saved])
    }
}
