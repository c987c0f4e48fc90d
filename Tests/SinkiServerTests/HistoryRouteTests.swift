import Foundation
import SinkiRecord
@testable import SinkiServer
import SinkiSupport
import SinkiTestSupport
import Testing

/// The history routes over HTTP (docs/protocol.md, "History"): token scopes on every one of them, the
/// window, quotas answered `507`, and expiry that frees what only old versions held.
@Suite struct HistoryRouteTests {
    static let json = [("Content-Type", "application/json")]

    func history(_ fixture: ServerFixture, _ path: String, token: IssuedToken, before: Int64? = nil) throws -> TestResponse {
        try fixture.request("GET", Routes.history + "?path=" + path + (before.map { "&before=\($0)" } ?? ""), token: token.secret)
    }

    func version(_ fixture: ServerFixture, _ path: String, _ version: Int64, token: IssuedToken) throws -> TestResponse {
        try fixture.request("GET", Routes.historyVersion + "?path=\(path)&version=\(version)", token: token.secret)
    }

    func folder(_ fixture: ServerFixture, _ path: String, at: Int64, token: IssuedToken) throws -> TestResponse {
        try fixture.request("GET", Routes.historyFolder + "?path=\(path)&at=\(at)", token: token.secret)
    }

    func restore(_ fixture: ServerFixture, _ request: RestoreRequest, token: IssuedToken) throws -> TestResponse {
        try fixture.request("POST", Routes.restore, token: token.secret, headers: Self.json, body: request.jsonBytes)
    }

    @Test func aNarrowedTokenSeesOnlyItsPrefixsHistoryAndAReadOnlyOneMayNotRestore() throws {
        let fixture = try ServerFixture.withAccounts()
        let full = try fixture.issue(user: "alice")
        let narrow = try fixture.issue(user: "alice", device: "phone", scope: TokenScope(prefix: "S/a"))
        let reader = try fixture.issue(user: "alice", device: "tablet", scope: TokenScope(readOnly: true))
        let first = try fixture.modify([fileRecord("S/a/in", "in 1"), fileRecord("S/b/out", "out 1")], token: full.secret)
        let moment = Clock.now()
        try waitUntilSync("the clock to pass the moment") { Clock.now() > moment }
        let tags = first.compactMap { $0.record?.changeTag }
        _ = try fixture.modify([fileRecord("S/a/in", "in 2", baseTag: tags[0]), fileRecord("S/b/out", "out 2", baseTag: tags[1])], token: full.secret)
        let head = try fixture.changes(token: full.secret).token

        // The full token sees both paths' histories; the narrowed one only its prefix's.
        #expect(try VersionPage.parse(history(fixture, "S/b/out", token: full).body).versions.count == 2)
        #expect(try VersionPage.parse(history(fixture, "S/a/in", token: narrow).body).versions.count == 2)
        let outside = try history(fixture, "S/b/out", token: narrow)
        #expect(try outside.status == 200 && VersionPage.parse(outside.body).versions.isEmpty, "answered as a path that never held a record")
        #expect(try version(fixture, "S/a/in", tags[0], token: narrow).status == 200)
        #expect(try version(fixture, "S/b/out", tags[1], token: narrow).status == 404)
        let entry = try VersionEntry.parse(version(fixture, "S/b/out", tags[1], token: full).body)
        #expect(try content(of: entry.record) == Array("out 1".utf8))
        // A folder at a moment: narrowed to the prefix, like a look-up.
        #expect(try VersionPage.parse(folder(fixture, "S", at: moment, token: narrow).body).versions.map(\.record.path) == ["S/a/in"])
        #expect(try VersionPage.parse(folder(fixture, "S/b", at: moment, token: narrow).body).versions.isEmpty)
        #expect(try VersionPage.parse(folder(fixture, "S", at: moment, token: full).body).versions.map(\.record.path) == ["S/a/in", "S/b/out"])
        // Restores: within the prefix only, never by a read-only token (dry runs included).
        let beyond = try restore(fixture, RestoreRequest(.version(path: "S/b/out", version: tags[1], to: nil)), token: narrow)
        #expect(try beyond.status == 403 && beyond.problem().code == "beyond-scope")
        let elsewhere = try restore(fixture, RestoreRequest(.version(path: "S/a/in", version: tags[0], to: "S/b/copy")), token: narrow)
        #expect(try elsewhere.status == 403 && elsewhere.problem().field == "to")
        let wider = try restore(fixture, RestoreRequest(.folder("S", at: moment)), token: narrow)
        #expect(try wider.status == 403 && wider.problem().code == "beyond-scope")
        for request in [RestoreRequest(.version(path: "S/a/in", version: tags[0], to: nil)), RestoreRequest(.folder("S", at: moment), dryRun: true)] {
            let refused = try restore(fixture, request, token: reader)
            #expect(try refused.status == 403 && refused.problem().code == "read-only-token")
        }
        // The reader lists and fetches.
        #expect(try VersionPage.parse(history(fixture, "S/a/in", token: reader).body).versions.count == 2)
        #expect(try version(fixture, "S/a/in", tags[0], token: reader).status == 200)
        #expect(try VersionPage.parse(folder(fixture, "S", at: moment, token: reader).body).versions.count == 2)
        // Nothing was restored by the refusals; the narrowed token's own restore goes, as a change in its feed.
        #expect(try fixture.changes(token: full.secret).token == head)
        let done = try restore(fixture, RestoreRequest(.folder("S/a", at: moment)), token: narrow)
        #expect(done.status == 200)
        let changes = try RestoreResponse.parse(done.body).changes
        #expect(changes.map(\.path) == ["S/a/in"] && changes[0].record.device == "phone")
        let feed = try fixture.changes(token: narrow.secret).records
        #expect(try feed.map(\.path) == ["S/a/in"] && content(of: feed[0]) == Array("in 1".utf8))
    }

    @Test func badRequestsAndMomentsBeforeTheWindowAreRefusedWithTheirReasons() throws {
        let fixture = try ServerFixture.withAccounts { $0.retention.historyDays = 1 }
        let full = try fixture.issue(user: "alice")
        let saved = try fixture.modify([fileRecord("S/f", "one")], token: full.secret)
        let tag = try #require(saved.first?.record?.changeTag)
        let old = Clock.now() - 2 * 86_400_000_000_000
        let gone = try folder(fixture, "S", at: old, token: full)
        #expect(try gone.status == 410 && gone.problem().code == "history-gone")
        let restoreGone = try restore(fixture, RestoreRequest(.folder("S", at: old)), token: full)
        #expect(restoreGone.status == 410)
        #expect(try version(fixture, "S/f", tag + 1000, token: full).status == 404)
        let unknown = try restore(fixture, RestoreRequest(.version(path: "S/f", version: tag + 1000, to: nil)), token: full)
        #expect(unknown.status == 404)
        #expect(try history(fixture, "../x", token: full).status == 400)
        #expect(try fixture.request("GET", Routes.history, token: full.secret).status == 400)
        let badJSON = try fixture.request("POST", Routes.restore, token: full.secret, headers: Self.json, body: Array(#"{"path":"S/f"}"#.utf8))
        #expect(try badJSON.status == 400 && badJSON.problem().code == "bad-json")
        let deleted = try fixture.modify([tombstone("S/f", baseTag: tag)], token: full.secret)
        let deleteTag = try #require(deleted.first?.record?.changeTag)
        let copyOfDelete = try restore(fixture, RestoreRequest(.version(path: "S/f", version: deleteTag, to: "S/g")), token: full)
        #expect(try copyOfDelete.status == 409 && copyOfDelete.problem().code == "deleted-version")
    }

    @Test func aSavePastTheQuotaIsAnswered507WithTheFigures() throws {
        let fixture = try ServerFixture.withAccounts()
        let full = try fixture.issue(user: "alice")
        #expect(try fixture.modify([fileRecord("S/one", randomBytes(2000))], token: full.secret).map(\.status) == [.saved])
        let used = try fixture.server.store.usage(user: "alice").usedBytes
        try fixture.server.store.setQuota(user: "alice", bytes: used + 1000)
        let refused = try fixture.request("POST", Routes.modify, token: full.secret, headers: Self.json,
                                          body: ModifyRequest(records: [fileRecord("S/two", randomBytes(2000))]).jsonBytes)
        #expect(refused.status == 507)
        let problem = try refused.problem()
        #expect(problem.code == "storage-full" && problem.detail.contains("server storage full"))
        #expect(problem.storage?.liveBytes == used && problem.storage?.historyBytes == 0 && problem.storage?.quotaBytes == used + 1000)
        #expect((problem.storage?.neededBytes ?? 0) > 1000)
        #expect(try fixture.request("GET", "/v1/records?path=S/two", token: full.secret).page().records.isEmpty)
    }

    @Test(arguments: StoreKind.all)
    func versionsPastTheWindowExpireAndTheChunksOnlyTheyNamedAreFreedLiveDataUntouched(kind: StoreKind) throws {
        let made = try kind.make()
        defer { withExtendedLifetime(made.keepAlive) {} }
        let fixture = try ServerFixture(tokens: [:], store: made.store) { $0.retention.historyDays = 1 }
        try fixture.settleRetention()
        let alice = try fixture.issue(user: "alice")
        let old = ChunkedFile.random([300_000, 1000])
        let new = ChunkedFile(chunks: [old.chunks[0], randomBytes(2000)])
        try fixture.uploadChunks(of: old, token: alice.secret)
        let first = try fixture.modify([old.record("S/big"), fileRecord("S/small", "one")], token: alice.secret)
        let tags = first.compactMap { $0.record?.changeTag }
        try fixture.uploadChunks(of: new, token: alice.secret)
        #expect(try fixture.modify([new.record("S/big", baseTag: tags[0]), fileRecord("S/small", "two", baseTag: tags[1])],
                                   token: alice.secret).map(\.status) == [.saved, .saved])
        for name in Set(old.names + new.names) { fixture.age(user: "alice", name, seconds: ChunkCollectionTests.twoDays) }

        // Within the window: every chunk stays, and the old version is served whole.
        let kept = try #require(fixture.server.purgeNow())
        #expect(kept.versions == 0 && kept.chunks == 0)
        #expect(try fixture.request("GET", Routes.assets + old.hash, token: alice.secret).body == old.bytes)
        #expect(try fixture.server.store.usage(user: "alice").historyBytes > 0)

        // Past it: the two old versions go, and the chunk only the old one named.
        let later = Clock.now() + 2 * 86_400_000_000_000
        let pass = try #require(fixture.server.purgeNow(at: later))
        #expect(pass.versions == 2 && pass.chunks == 1)
        #expect(fixture.heldChunkNames(user: "alice") == Set(new.names))
        #expect(try fixture.request("GET", Routes.assets + old.hash, token: alice.secret).status == 404)
        #expect(try fixture.request("GET", Routes.assets + new.hash, token: alice.secret).body == new.bytes)
        #expect(try VersionPage.parse(history(fixture, "S/big", token: alice).body).versions.count == 1)
        let live = try fixture.request("GET", "/v1/records?path=S&data=1", token: alice.secret).page().records
        #expect(try live.map(\.path) == ["S/big", "S/small"] && content(of: live[1]) == Array("two".utf8))
        #expect(try fixture.server.store.usage(user: "alice").historyBytes == 0)
    }
}
