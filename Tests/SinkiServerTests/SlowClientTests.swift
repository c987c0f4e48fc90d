import Foundation
import Glibc
import SinkiRecord
@testable import SinkiServer
import SinkiSupport
import SinkiTestSupport
import Synchronization
import Testing

/// Clients that hold many connections (issue 24 item 5), on raw sockets: one address holds at most its
/// connections; a request head must be in within the head deadline; the server's lines about them are
/// a few, not one each.
@Suite struct SlowClientTests {
    /// 40 connections fill their address's places and send a header line every half second, never
    /// finishing their heads: libmicrohttpd's idle timeout (120 s) never cuts them, the head deadline
    /// does, and a real request from the same address is served once it has.
    @Test func slowHeadsAreCutAtTheDeadlineAndCannotStarveARealRequest() throws {
        let log = try LogFile()
        let fixture = try ServerFixture.withAccounts(logger: log.logger) { configuration in
            configuration.limits.maxConnectionsPerAddress = 40
            configuration.limits.headDeadlineSeconds = 3
        }
        let token = try fixture.issue(user: "alice")
        let slow = try (0..<40).map { _ in try fixture.connect() }
        for connection in slow { try connection.write(Array("GET /v1/changes HTTP/1.1\r\nHost: localhost\r\n".utf8)) }
        let dribbler = Dribbler(sockets: slow.map(\.fd), line: Array("\(token.header.0): \(token.header.1)\r\n".utf8))
        // Stopped while the sockets are open, on every way out: it never writes to a reused descriptor.
        defer { withExtendedLifetime(slow) { dribbler.stop() } }
        try waitUntilSync("the server to hold the 40") { fixture.server.openConnections >= 40 }
        try waitUntilSync("a real request to be served beside them", timeout: 60, interval: 0.25) {
            let real = try fixture.connect()
            return (try? real.request("GET", Routes.changes, headers: [token.header], timeout: 5).status) == 200
        }
        // Every slow one is closed without an answer: its head never came in, so no token was read.
        for connection in slow {
            #expect(connection.isClosed(within: 30))
            #expect(connection.unread == 0)
        }
        #expect(fixture.server.lateHeadsCut >= 40)
        // A line a minute, not one per connection (libmicrohttpd's own lines are throttled the same way).
        let lines = try log.lines()
        #expect((1...2).contains(lines.filter { $0.contains("request head was not in within 3.00 s") }.count), "\(lines)")
        #expect(lines.count < 10, "\(lines)")
    }

    /// On a kept-alive connection the next head is due within the deadline of the previous request's
    /// end: one dribbled after a served request is cut, with a line; one idle that long is closed
    /// without a word, as servers close idle keep-alive connections.
    @Test func aKeptAliveConnectionsNextHeadHasItsDeadline() throws {
        let log = try LogFile()
        let fixture = try ServerFixture.withAccounts(logger: log.logger) { $0.limits.headDeadlineSeconds = 2 }
        let token = try fixture.issue(user: "alice")
        let idle = try fixture.connect()
        #expect(try idle.request("GET", Routes.changes, headers: [token.header]).status == 200)
        #expect(idle.isClosed(within: 30))
        #expect(fixture.server.lateHeadsCut == 1)
        #expect(try !log.lines().contains { $0.contains("request head") })

        let connection = try fixture.connect()
        #expect(try connection.request("GET", Routes.changes, headers: [token.header]).status == 200)
        try connection.write(Array("GET /v1/changes HTTP/1.1\r\n".utf8))
        let dribbler = Dribbler(sockets: [connection.fd], line: Array("X-Slow: a\r\n".utf8))
        defer { withExtendedLifetime(connection) { dribbler.stop() } }
        #expect(connection.isClosed(within: 30))
        #expect(connection.unread == 0)
        #expect(fixture.server.lateHeadsCut == 2)
        try waitUntilSync("the cut's line") { try log.lines().contains { $0.contains("request head was not in within 2.00 s") } }
        // A head sent whole on a fresh connection is served as ever.
        #expect(try fixture.request("GET", Routes.changes, token: token.secret).status == 200)
    }

    @Test func oneAddressHoldsAtMostItsConnections() throws {
        let fixture = try ServerFixture.withAccounts { $0.limits.maxConnectionsPerAddress = 3 }
        let token = try fixture.issue(user: "alice")
        var held = try (0..<3).map { _ in try fixture.connect() }
        for connection in held { #expect(try connection.request("GET", Routes.changes, headers: [token.header]).status == 200) }
        // The fourth is closed at once, before it can send anything that is read.
        let refused = try fixture.connect()
        #expect(refused.isClosed(within: 2))
        held.removeLast()
        try waitUntilSync("a place to be free again") {
            let again = try fixture.connect()
            return (try? again.request("GET", Routes.changes, headers: [token.header]).status) == 200
        }
    }

    @Test func libmicrohttpdsLinesAreOneAMinutePerKind() {
        let throttle = LogThrottle(intervalSeconds: 60)
        let minute: Int64 = 60_000_000_000
        #expect(throttle.line(for: "Connection from 10.0.0.1 refused", now: 0) == "Connection from 10.0.0.1 refused")
        for index in 2...40 { #expect(throttle.line(for: "Connection from 10.0.0.\(index) refused", now: minute / 2) == nil) }
        #expect(throttle.line(for: "Another kind", now: minute / 2) == "Another kind")
        #expect(throttle.line(for: "Connection from 10.0.0.9 refused", now: minute + 1)
            == "Connection from 10.0.0.9 refused (and 39 more like it since the last)")
    }
}

/// Writes `line` to each socket every half second, on a thread of its own, until stopped (write errors
/// on a socket the server closed are the point, and ignored). `stop` waits for the thread, so that no
/// write can reach a descriptor closed and reused after it.
private final class Dribbler: Sendable {
    private let stopping = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    private let stopped = Mutex(false)

    init(sockets: [Int32], line: [UInt8]) {
        DispatchQueue.global().async { [self] in
            while !stopping.load(ordering: .relaxed) {
                for socket in sockets { _ = line.withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } }
                usleep(500_000)
            }
            finished.signal()
        }
    }

    func stop() {
        guard stopped.withLock({ (done: inout Bool) -> Bool in defer { done = true }; return !done }) else { return }
        stopping.store(true, ordering: .relaxed)
        finished.wait()
    }
}
