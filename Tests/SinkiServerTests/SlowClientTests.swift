import Foundation
import Glibc
import SinkiRecord
@testable import SinkiServer
import SinkiSupport
import SinkiTestSupport
import Testing

/// Clients that hold many connections (issue 24 item 5), on raw sockets: one address holds at most its
/// connections; libmicrohttpd's lines about them are a few, not one each.
@Suite struct SlowClientTests {
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
