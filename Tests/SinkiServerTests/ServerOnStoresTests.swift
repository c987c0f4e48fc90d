import Foundation
import SinkiRecord
@testable import SinkiServer
import SinkiSupport
import SinkiTestSupport
import Testing

/// The whole server over HTTP on each store implementation: saves, the feed, a long-poll woken by a
/// save, a conflict, and device tokens checked against the store's accounts.
@Suite struct ServerOnStoresTests {
    @Test(arguments: StoreKind.all)
    func modifyChangesAndALongPollThroughHTTP(kind: StoreKind) throws {
        let made = try kind.make()
        defer { withExtendedLifetime(made.keepAlive) {} }
        let fixture = try ServerFixture(tokens: [:], store: made.store)
        let token = try fixture.issue(user: "alice")
        let start = try fixture.changes(token: token.secret)
        #expect(start.records.isEmpty)

        let saved = try fixture.modify([fileRecord("P/a", "one"), fileRecord("P/b", "two")], token: token.secret)
        #expect(saved.map(\.status) == [.saved, .saved])
        let page = try fixture.changes(since: start.token, token: token.secret)
        #expect(page.records.map(\.path) == ["P/a", "P/b"])
        #expect(try page.records.map { try content(of: $0) } == [Array("one".utf8), Array("two".utf8)])

        // A long-poll parks, and a save on another connection wakes it with just that save.
        let waiter = try fixture.connect()
        try waiter.send("GET", changesTarget(since: page.token, wait: 30), headers: [token.header])
        try waitUntilSync("the long-poll to park") { fixture.server.waitingLongPolls == 1 }
        let edit = try fixture.modify([fileRecord("P/a", "three", baseTag: page.records[0].changeTag)], token: token.secret)
        #expect(edit.map(\.status) == [.saved])
        let woken = try waiter.receive(timeout: 10).page()
        #expect(woken.records.map(\.path) == ["P/a"])
        #expect(try content(of: woken.records[0]) == Array("three".utf8))

        // A stale edit conflicts with the current record.
        let stale = try fixture.modify([fileRecord("P/a", "four", baseTag: page.records[0].changeTag)], token: token.secret)
        #expect(stale.map(\.status) == [.conflict])

        // Another user's token sees none of it; a request without a token is refused.
        let bob = try fixture.issue(user: "bob")
        #expect(try fixture.changes(token: bob.secret).records.isEmpty)
        #expect(try fixture.request("GET", changesTarget()).status == 401)
    }

    @Test(arguments: StoreKind.all)
    func aRevocationThroughAnotherHandleCutsAParkedPoll(kind: StoreKind) throws {
        let made = try kind.make()
        defer { withExtendedLifetime(made.keepAlive) {} }
        let fixture = try ServerFixture(tokens: [:], store: made.store)
        let doomed = try fixture.issue(user: "alice")
        let start = try fixture.changes(token: doomed.secret)
        let poll = try fixture.connect()
        try poll.send("GET", changesTarget(since: start.token, wait: 300), headers: [doomed.header])
        try waitUntilSync("the poll to park") { fixture.server.waitingLongPolls == 1 }
        // A second handle on the same database, as `sinkid serve token revoke` opens.
        let other = try made.reopen()
        defer { other.close() }
        #expect(try other.revoke(id: doomed.id, at: Clock.now()) == [doomed.id])
        #expect(try poll.receive(timeout: 5).status == 401)
    }
}
