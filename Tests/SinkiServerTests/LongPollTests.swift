import Foundation
import SinkiRecord
@testable import SinkiServer
import SinkiSupport
import SinkiTestSupport
import Testing

/// Long-polls against a real server. Serialized: they measure how soon answers come.
@Suite(.serialized) struct LongPollTests {
    @Test func aWaitingPollAnswersWithin50msOfASaveOnAnotherConnection() throws {
        let fixture = try ServerFixture()
        var token = try fixture.changes().token
        for round in 0..<3 {
            let waiter = try fixture.connect()
            try waiter.send("GET", changesTarget(since: token, wait: 30))
            try waitUntilSync("the long-poll to park") { fixture.server.waitingLongPolls == 1 }
            #expect(!waiter.isReadable(within: 0.05), "a poll with nothing new must wait")

            let saver = try fixture.connect()
            let sent = Date()
            let results = try saver.request("POST", "/v1/records/modify", headers: [("Content-Type", "application/json")],
                                            body: ModifyRequest(records: [fileRecord("L/\(round)", "new")]).jsonBytes).modifyResults()
            let saved = Date()
            #expect(results.map(\.status) == [.saved])
            #expect(waiter.isReadable(within: 0.05), "no answer within 50 ms of the save")
            let answered = Date()
            let page = try waiter.receive().page()
            #expect(page.records.map(\.path) == ["L/\(round)"])
            token = page.token
            print("long-poll answered \(Int(answered.timeIntervalSince(saved) * 1000)) ms after the save's answer, "
                  + "\(Int(answered.timeIntervalSince(sent) * 1000)) ms after it was sent")
        }
        #expect(fixture.server.waitingLongPolls == 0)
    }

    @Test func aPollWhoseTimeIsUpAnswersAnEmptyPageWithTheSameToken() throws {
        let fixture = try ServerFixture()
        _ = try fixture.modify([fileRecord("L/x", "x")])
        let start = try fixture.changes()
        let connection = try fixture.connect()
        let sent = Date()
        try connection.send("GET", changesTarget(since: start.token, wait: 1))
        let response = try connection.receive(timeout: 5)
        let elapsed = Date().timeIntervalSince(sent)
        let page = try response.page()
        #expect(page.records.isEmpty && !page.more)
        #expect(page.token == start.token)
        #expect(elapsed >= 0.95 && elapsed < 2, "answered after \(elapsed) s")
        // The connection stays usable.
        #expect(try connection.request("GET", changesTarget(since: start.token)).status == 200)
    }

    @Test func aPollWithSomethingNewAnswersAtOnce() throws {
        let fixture = try ServerFixture()
        _ = try fixture.modify([fileRecord("L/x", "x")])
        let sent = Date()
        let page = try fixture.changes(wait: 30)
        #expect(page.records.count == 1)
        #expect(Date().timeIntervalSince(sent) < 1)
    }

    @Test func fiftyWaitingPollsHoldNoThreads() throws {
        let fixture = try ServerFixture(threads: 4)
        let start = try fixture.changes()
        let waiters = try (0..<50).map { _ in
            let waiter = try fixture.connect()
            try waiter.send("GET", changesTarget(since: start.token, wait: 60))
            return waiter
        }
        try waitUntilSync("50 long-polls to park") { fixture.server.waitingLongPolls == 50 }

        // With 4 threads, had each waiter held one, nothing else would be answered now.
        let other = try fixture.connect()
        let began = Date()
        for index in 0..<20 {
            let response = try other.request("GET", "/v1/records?path=L", timeout: 2)
            #expect(response.status == 200, "request \(index)")
        }
        let elapsed = Date().timeIntervalSince(began)
        #expect(elapsed < 2, "20 requests took \(elapsed) s beside 50 waiting polls")
        _ = try fixture.connect().request("GET", "/v1/changes", timeout: 2)

        // One save wakes them all.
        _ = try fixture.modify([fileRecord("L/wake", "up")])
        for waiter in waiters {
            let page = try waiter.receive(timeout: 5).page()
            #expect(page.records.map(\.path) == ["L/wake"])
        }
        #expect(fixture.server.waitingLongPolls == 0)
    }

    @Test func aClientHangingUpWhileWaitingIsReleased() throws {
        let fixture = try ServerFixture()
        var waiter: TestConnection? = try fixture.connect()
        try waiter!.send("GET", changesTarget(wait: 60))
        try waitUntilSync("the long-poll to park") { fixture.server.waitingLongPolls == 1 }
        #expect(fixture.server.liveRequests == 1)
        waiter = nil
        // Released long before its 60 s are up: the hub sees the hang-up, libmicrohttpd completes it.
        try waitUntilSync("the hung-up poll to be released", timeout: 3) {
            fixture.server.waitingLongPolls == 0 && fixture.server.liveRequests == 0
        }
        // And a save afterwards has nothing stale to resume.
        #expect(try fixture.modify([fileRecord("L/after", "x")]).map(\.status) == [.saved])
    }

    @Test func stopAnswersEveryWaitingPoll() throws {
        let fixture = try ServerFixture()
        let start = try fixture.changes()
        let waiters = try (0..<5).map { _ in
            let waiter = try fixture.connect()
            try waiter.send("GET", changesTarget(since: start.token, wait: 60))
            return waiter
        }
        try waitUntilSync("5 long-polls to park") { fixture.server.waitingLongPolls == 5 }
        let began = Date()
        fixture.server.stop()
        let elapsed = Date().timeIntervalSince(began)
        #expect(elapsed < 3, "stop took \(elapsed) s")
        for waiter in waiters {
            let page = try waiter.receive(timeout: 2).page()
            #expect(page.records.isEmpty && page.token == start.token)
        }
        #expect(throws: (any Error).self) { try fixture.connect() }
    }

    @Test func aPollStartedWhileTheServerStopsAnswersAtOnce() throws {
        // Stopping refuses new parking; the hub unit tests cover the race, this the whole path.
        let fixture = try ServerFixture()
        let keepAlive = try fixture.connect()
        #expect(try keepAlive.request("GET", "/v1/changes").status == 200)
        let server = fixture.server
        let stopper = Thread { server.stop() }
        stopper.start()
        // On an open keep-alive connection, a poll either answers at once or the connection closes.
        do {
            try keepAlive.send("GET", changesTarget(wait: 60))
            let response = try keepAlive.receive(timeout: 5)
            #expect(response.status == 200)
        } catch {
            // The daemon had already closed the connection: also fine.
        }
        try waitUntilSync("the server to stop") { fixture.server.boundPort == 0 }
    }
}
