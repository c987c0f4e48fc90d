import SinkiRecord
@testable import SinkiServer
import SinkiSupport
import SinkiTestSupport
import Testing

private let unlimited = PageLimit(records: 10_000, dataBytes: 1 << 30)

/// A record's extended attributes (issue 25, item 2) are stored as given by both stores: the feed, a
/// look-up, a conflict's answer and a kept version bring them back; a tombstone has none; a restore
/// brings the version's back, and a change of them alone is a version of its own.
@Suite struct XattrStoreTests {
    static let tagged = ExtendedAttributes([.init(name: "user.test", value: Array("1".utf8)),
                                            .init(name: "user.blob", value: (0..<1000).map { UInt8($0 % 251) })])

    func record(_ path: String, _ text: String, xattrs: ExtendedAttributes, baseTag: Int64 = 0) -> Record {
        var record = fileRecord(path, text, baseTag: baseTag)
        record.xattrs = xattrs
        return record
    }

    @Test(arguments: StoreKind.all)
    func attributesAreStoredAsGivenWithEveryVersion(kind: StoreKind) throws {
        try withStore(kind) { store in
            guard case let .saved(v1) = try store.modify(user: "u", items: checked([record("A/f", "one", xattrs: Self.tagged)]))[0] else {
                Issue.record("not saved")
                return
            }
            #expect(v1.xattrs == Self.tagged)
            #expect(try store.changes(user: "u", after: 0, limit: unlimited).records.map(\.xattrs) == [Self.tagged])
            #expect(try store.records(user: "u", prefix: "A", after: nil, limit: unlimited, includeData: false).records.map(\.xattrs) == [Self.tagged])
            // A stale save is answered with the current record, attributes included.
            guard case let .conflict(current) = try store.modify(user: "u", items: checked([record("A/f", "two", xattrs: .none)]))[0] else {
                Issue.record("no conflict")
                return
            }
            #expect(current.xattrs == Self.tagged)
            // The same bytes with one attribute changed: a version of its own; the first is kept with its set.
            let changed = ExtendedAttributes([.init(name: "user.test", value: Array("2".utf8))])
            guard case let .saved(v2) = try store.modify(user: "u", items: checked([record("A/f", "one", xattrs: changed, baseTag: v1.changeTag)]))[0]
            else {
                Issue.record("not saved")
                return
            }
            #expect(try store.changes(user: "u", after: v1.changeTag, limit: unlimited).records.map(\.xattrs) == [changed])
            #expect(try store.version(user: "u", path: "A/f", version: v1.changeTag)?.record.xattrs == Self.tagged)
            // Restoring the first version brings its attributes back.
            let restored = try store.restore(user: "u", RestoreRequest(.version(path: "A/f", version: v1.changeTag, to: nil)), device: "desk")
            #expect(restored.map(\.action) == [.restore] && restored[0].record.xattrs == Self.tagged)
            #expect(try store.changes(user: "u", after: v2.changeTag, limit: unlimited).records.map(\.xattrs) == [Self.tagged])
            // A delete keeps none.
            let head = try store.headTag(user: "u")
            guard case let .saved(gone) = try store.modify(user: "u", items: checked([{
                var delete = tombstone("A/f", baseTag: head)
                delete.xattrs = Self.tagged
                return delete
            }()]))[0] else {
                Issue.record("not deleted")
                return
            }
            #expect(gone.xattrs.isEmpty)
            #expect(try store.changes(user: "u", after: head, limit: unlimited).records.map(\.xattrs) == [.none])
        }
    }
}

/// Over HTTP: a batch with a record whose attributes break a bound or name another namespace is refused
/// whole, the field named, and nothing is saved; one within them comes back on the feed as given.
@Suite struct XattrRouteTests {
    @Test(arguments: [
        (#"{"user.ok":"AA==","trusted.x":"AA=="}"#, "not in the user. namespace"),
        (#"{"security.selinux":"AA=="}"#, "not in the user. namespace"),
        (#"{"user.big":"\#(String(repeating: "A", count: 87_384))"}"#, "more than 65536 bytes"),
    ])
    func aRecordPastTheBoundsIsRefusedNamingTheField(xattrs: String, why: String) throws {
        let fixture = try ServerFixture()
        let body = #"{"records": [{"path": "G/ok", "type": "keep-both", "size": 0, "sha256": "", "xattrs": \#(xattrs)}]}"#
        let response = try fixture.request("POST", "/v1/records/modify", headers: [("Content-Type", "application/json")], body: Array(body.utf8))
        #expect(response.status == 400)
        let problem = try response.problem()
        #expect(problem.code == "bad-json" && problem.detail.contains("xattrs") && problem.detail.contains(why), "\(problem.detail)")
        #expect(try fixture.changes().records.isEmpty)
    }

    @Test func attributesWithinTheBoundsComeBackOnTheFeedAsGiven() throws {
        let fixture = try ServerFixture()
        var record = fileRecord("G/tagged", "tagged")
        record.xattrs = XattrStoreTests.tagged
        #expect(try fixture.modify([record]).count == 1)
        #expect(try fixture.changes().records.map(\.xattrs) == [XattrStoreTests.tagged])
    }
}
