import SinkiRecord
@testable import SinkiServer
import SinkiTestSupport
import Testing

/// The feed a writer reads passes over the saves it made under its origin (`Sinki-Origin`,
/// `omitOrigin`): docs/protocol.md, "The change feed".
@Suite struct OriginTests {
    static let mine = "0123456789abcdef0123456789abcdef"
    static let other = "fedcba9876543210fedcba9876543210"

    private func save(_ fixture: ServerFixture, _ records: [Record], origin: String?) throws -> [ModifyResult] {
        var headers = [("Content-Type", "application/json")]
        if let origin { headers.append((SaveOrigin.header, origin)) }
        return try fixture.request("POST", Routes.modify, headers: headers, body: ModifyRequest(records: records).jsonBytes).modifyResults()
    }

    private func changes(_ fixture: ServerFixture, since: String? = nil, omitting origin: String?, wait: Int? = nil) throws -> RecordPage {
        var target = changesTarget(since: since, wait: wait)
        if let origin { target += (target.contains("?") ? "&" : "?") + "\(SaveOrigin.query)=\(origin)" }
        return try fixture.request("GET", target).page()
    }

    @Test func aWritersOwnSavesArePassedOverAndItsPositionMovesPastThem() throws {
        let fixture = try ServerFixture()
        _ = try save(fixture, [fileRecord("F/mine", "m1"), fileRecord("F/mine2", "m2")], origin: Self.mine)
        _ = try save(fixture, [fileRecord("F/theirs", "t1")], origin: Self.other)
        _ = try save(fixture, [fileRecord("F/nobody", "n1")], origin: nil)
        let page = try changes(fixture, omitting: Self.mine)
        #expect(page.records.map(\.path) == ["F/theirs", "F/nobody"])
        #expect(page.omitted == 2)
        // The same position as a reader that is sent everything.
        let all = try changes(fixture, omitting: nil)
        #expect(all.records.map(\.path) == ["F/mine", "F/mine2", "F/theirs", "F/nobody"])
        #expect(all.omitted == 0)
        #expect(page.token == all.token)
        // Another origin reads the first writer's saves.
        #expect(try changes(fixture, omitting: Self.other).records.map(\.path) == ["F/mine", "F/mine2", "F/nobody"])
    }

    @Test func aLongPollAnswersWhenOnlyItsOwnSaveCommitted() throws {
        let fixture = try ServerFixture()
        let start = try changes(fixture, omitting: Self.mine)
        let waiting = try fixture.connect()
        try waiting.send("GET", changesTarget(since: start.token, wait: 30) + "&\(SaveOrigin.query)=\(Self.mine)")
        let saved = try save(fixture, [fileRecord("L/mine", "x")], origin: Self.mine)
        let woken = try waiting.receive().page()
        #expect(woken.records.isEmpty)
        #expect(woken.omitted == 1)
        #expect(woken.token == "\(fixture.server.store.storeID).\(saved[0].record!.changeTag)")
    }

    @Test func conflictRecordsComeBackToTheirWriter() throws {
        let fixture = try ServerFixture()
        let path = SharedConflict.recordPath(for: "C/a.txt")
        _ = try save(fixture, [fileRecord(path, "theirs"), fileRecord("C/a.txt", "mine")], origin: Self.mine)
        let page = try changes(fixture, omitting: Self.mine)
        #expect(page.records.map(\.path) == [path])
        #expect(page.omitted == 1)
    }

    @Test func theOldestOriginsAreLetGoAndTheirRecordsAreSent() {
        let book = OriginBook(capacity: 2)
        let origin = SaveOrigin(validating: Self.mine)!
        book.note(user: "u", tags: [1, 2, 3], origin: origin)
        let records = [1, 2, 3].map { tag -> Record in
            var record = fileRecord("B/\(tag)", "x")
            record.changeTag = Int64(tag)
            return record
        }
        let (rest, omitted) = book.leavingOut(records, user: "u", origin: origin)
        #expect(rest.map(\.changeTag) == [1])
        #expect(omitted == 2)
        // Another user's tags are not this one's.
        #expect(book.leavingOut(records, user: "v", origin: origin).omitted == 0)
    }

    @Test(arguments: ["short", "UPPERCASE0123456789", "has space 0123456789", String(repeating: "a", count: 65)])
    func aMalformedOriginIsRefusedNamingIt(origin: String) throws {
        let fixture = try ServerFixture()
        let saved = try fixture.request("POST", Routes.modify, headers: [("Content-Type", "application/json"), (SaveOrigin.header, origin)],
                                        body: ModifyRequest(records: [fileRecord("X/a", "a")]).jsonBytes)
        #expect(saved.status == 400)
        #expect(try saved.problem().detail.contains(SaveOrigin.header))
        let read = try fixture.request("GET", "/v1/changes?\(SaveOrigin.query)=\(encoded(origin))")
        #expect(read.status == 400)
        #expect(try read.problem().detail.contains(SaveOrigin.query))
        // Nothing was saved.
        #expect(try fixture.changes().records.isEmpty)
    }
}
