import Foundation
import SinkiRecord
@testable import SinkiServer
import SinkiSupport
import SinkiTestSupport
import Testing

/// Per-token request rate and long-poll count, and the size limits on what a request may carry.
@Suite struct LimitTests {
    @Test func aTokenOverItsRateIsAnswered429WithRetryAfter() throws {
        let fixture = try ServerFixture.withAccounts { configuration in
            configuration.limits.requestsPerSecond = 0.5
            configuration.limits.requestBurst = 3
        }
        let busy = try fixture.issue(user: "alice")
        let calm = try fixture.issue(user: "alice", device: "other")
        for _ in 0..<3 { #expect(try fixture.request("GET", Routes.changes, token: busy.secret).status == 200) }
        let refused = try fixture.request("GET", Routes.changes, token: busy.secret)
        #expect(refused.status == 429)
        #expect(try refused.problem().code == "rate-limited")
        let wait = try #require(refused.header("Retry-After").flatMap(Int.init))
        #expect((1...2).contains(wait))
        // Bodies are refused at once too, and the limit is the token's alone.
        let modify = try fixture.request("POST", Routes.modify, token: busy.secret, headers: [("Content-Type", "application/json")],
                                         body: ModifyRequest(records: [fileRecord("S/x", "x")]).jsonBytes)
        #expect(modify.status == 429)
        #expect(try fixture.request("GET", Routes.records, token: calm.secret).page().records.isEmpty)
        try waitUntilSync("the bucket to refill", timeout: Double(wait) + 3, interval: 0.25) {
            try fixture.request("GET", Routes.changes, token: busy.secret).status == 200
        }
    }

    /// A large file moves as thousands of chunk requests: each takes a sixteenth of the bucket, so a
    /// burst of them goes through where as many record requests are refused.
    @Test func chunkRequestsTakeASixteenthOfTheRate() throws {
        let fixture = try ServerFixture.withAccounts { configuration in
            configuration.limits.requestsPerSecond = 0.5
            configuration.limits.requestBurst = 3
        }
        let token = try fixture.issue(user: "alice")
        let absent = String(repeating: "ab", count: 32)
        for _ in 0..<40 { #expect(try fixture.request("GET", Routes.chunks + absent, token: token.secret).status == 404) }
        // 40 sixteenths: 2.5 of the 3 in the bucket are gone; a whole request is refused now.
        #expect(try fixture.request("GET", Routes.changes, token: token.secret).status == 429)
    }

    /// Bytes count as well as requests (issue 24 item 4): each MiB a request carries in or out costs as
    /// much as a request, taken as it moves, so two requests carrying 6 MiB each empty a bucket of 4
    /// that two bare requests would not; the body in progress is never cut, the token's next request
    /// waits, and another token's bucket is its own.
    @Test func bytesInAndOutCountAgainstTheTokensRate() throws {
        let fixture = try ServerFixture.withAccounts { configuration in
            configuration.limits.requestsPerSecond = 0.5
            configuration.limits.requestBurst = 4
        }
        let uploader = try fixture.issue(user: "alice")
        let reader = try fixture.issue(user: "alice", device: "reader")
        let bytes = randomBytes(6 << 20)
        // In: one upload of 6 MiB, taken whole, leaves the bucket 2 below empty.
        let id = try fixture.upload(bytes, token: uploader)
        let refused = try fixture.request("GET", Routes.changes, token: uploader.secret)
        #expect(refused.status == 429)
        #expect(try refused.problem().detail.contains("each MiB sent or received counts as one"))
        #expect(try #require(refused.header("Retry-After").flatMap(Int.init)) >= 1)
        // Out: another token's download of it is answered whole, then that token waits too.
        let download = try fixture.request("GET", Routes.assets + id, token: reader.secret)
        #expect(download.status == 200 && download.body == bytes)
        #expect(try fixture.request("GET", Routes.changes, token: reader.secret).status == 429)
        // A token that moved no bytes has its bucket: two bare requests and more go through.
        let calm = try fixture.issue(user: "alice", device: "calm")
        for _ in 0..<3 { #expect(try fixture.request("GET", Routes.changes, token: calm.secret).status == 200) }
    }

    @Test func aTokenHoldsAtMostItsLongPolls() throws {
        let fixture = try ServerFixture.withAccounts { $0.limits.maxLongPollsPerToken = 2 }
        let alice = try fixture.issue(user: "alice")
        let other = try fixture.issue(user: "alice", device: "other")
        let start = try fixture.changes(token: alice.secret)
        let polls = try (0..<2).map { _ -> TestConnection in
            let poll = try fixture.connect()
            try poll.send("GET", changesTarget(since: start.token, wait: 30), headers: [alice.header])
            return poll
        }
        try waitUntilSync("two polls to park") { fixture.server.waitingLongPolls == 2 }
        let third = try fixture.request("GET", changesTarget(since: start.token, wait: 30), token: alice.secret)
        #expect(third.status == 429 && third.header("Retry-After") == "1")
        #expect(try third.problem().code == "rate-limited")
        // A poll without wait is no long-poll, and another token has its own count.
        #expect(try fixture.request("GET", changesTarget(since: start.token), token: alice.secret).status == 200)
        let otherPoll = try fixture.connect()
        try otherPoll.send("GET", changesTarget(since: start.token, wait: 30), headers: [other.header])
        try waitUntilSync("the other token's poll to park") { fixture.server.waitingLongPolls == 3 }
        // Once one answers, its place is free again.
        _ = try fixture.modify([fileRecord("S/x", "x")], token: alice.secret)
        for poll in polls { #expect(try poll.receive(timeout: 5).status == 200) }
        #expect(try otherPoll.receive(timeout: 5).status == 200)
        try waitUntilSync("the polls to complete") { fixture.server.liveRequests == 0 }
        let again = try fixture.connect()
        try again.send("GET", changesTarget(since: start.token, wait: 30), headers: [alice.header])
        #expect(try again.receive(timeout: 5).page().records.map(\.path) == ["S/x"])
    }

    /// Tokens of one user share the user's cap (issue 24 item 6: minted children held 15 times one
    /// token's long-polls); another user's count is their own.
    @Test func aUsersTokensTogetherHoldAtMostTheUsersLongPolls() throws {
        let fixture = try ServerFixture.withAccounts { $0.limits.maxLongPollsPerToken = 2; $0.limits.maxLongPollsPerUser = 3 }
        let tokens = try (0..<4).map { try fixture.issue(user: "alice", device: "d\($0)") }
        let bob = try fixture.issue(user: "bob")
        let start = try fixture.changes(token: tokens[0].secret)
        let polls = try tokens.prefix(3).map { token -> TestConnection in
            let poll = try fixture.connect()
            try poll.send("GET", changesTarget(since: start.token, wait: 30), headers: [token.header])
            return poll
        }
        try waitUntilSync("three polls to park") { fixture.server.waitingLongPolls == 3 }
        let fourth = try fixture.request("GET", changesTarget(since: start.token, wait: 30), token: tokens[3].secret)
        #expect(fourth.status == 429 && fourth.header("Retry-After") == "1")
        #expect(try fourth.problem().detail.contains("this user's tokens have 3 long-polls open already"))
        let bobStart = try fixture.changes(token: bob.secret)
        let bobPoll = try fixture.connect()
        try bobPoll.send("GET", changesTarget(since: bobStart.token, wait: 30), headers: [bob.header])
        try waitUntilSync("bob's poll to park") { fixture.server.waitingLongPolls == 4 }
        // Answered, the places are free again.
        _ = try fixture.modify([fileRecord("S/x", "x")], token: tokens[0].secret)
        for poll in polls { #expect(try poll.receive(timeout: 5).status == 200) }
        try waitUntilSync("alice's polls to complete") { fixture.server.liveRequests == 1 }
        let again = try fixture.connect()
        try again.send("GET", changesTarget(since: start.token, wait: 30), headers: [tokens[3].header])
        #expect(try again.receive(timeout: 5).page().records.map(\.path) == ["S/x"])
    }

    /// Buffered bodies held at once are bounded for the whole server (issue 24 item 4): a body that
    /// does not fit beside those being received answers `503` with `Retry-After` before it is read,
    /// declared or chunked; one alone always fits; what a finished request held is free again.
    @Test func bodiesHeldAtOnceStayWithinTheServersBudget() throws {
        let fixture = try ServerFixture.withAccounts { $0.limits.maxBufferedBodyBytes = 3 << 20 }
        let alice = try fixture.issue(user: "alice")
        /// A modify batch of one record, padded with spaces to 2 MiB.
        func padded(_ path: String) -> [UInt8] {
            let batch = ModifyRequest(records: [fileRecord(path, path)]).jsonBytes
            return batch + [UInt8](repeating: 0x20, count: (2 << 20) - batch.count)
        }
        let json = [alice.header, ("Content-Type", "application/json")]
        // A first body of 2 MiB, its headers in and half of it sent: held.
        let first = padded("S/a")
        let slow = try fixture.connect()
        var head = "POST /v1/records/modify HTTP/1.1\r\nHost: localhost\r\n"
        for (name, value) in json { head += "\(name): \(value)\r\n" }
        head += "Content-Length: \(first.count)\r\n\r\n"
        try slow.write(Array(head.utf8) + first[..<(1 << 20)])
        try waitUntilSync("the first body to hold its share") { fixture.server.bufferedBodyBytes == first.count }
        for chunked in [false, true] {
            let second = try fixture.connect()
            if chunked {
                try second.send("POST", "/v1/records/modify", headers: json, body: padded("S/b"), chunked: true)
            } else {
                // Declared: answered from the headers alone, before any of the body is read.
                try second.write(Array(head.utf8))
            }
            let answer = try second.receive(timeout: 10)
            #expect(answer.status == 503 && answer.header("Retry-After") == "1", "chunked \(chunked): \(answer.status)")
            #expect(try answer.problem().code == "unavailable")
        }
        // What the refused ones took is given back; a small body still fits beside the first.
        try waitUntilSync("the refused bodies' shares given back") { fixture.server.bufferedBodyBytes == first.count }
        #expect(try fixture.modify([fileRecord("S/small", "s")], token: alice.secret).map(\.status) == [.saved])
        try slow.write(Array(first[(1 << 20)...]))
        #expect(try slow.receive(timeout: 10).modifyResults().map(\.status) == [.saved])
        try waitUntilSync("the first body's share given back") { fixture.server.bufferedBodyBytes == 0 }
        #expect(try fixture.request("POST", "/v1/records/modify", token: alice.secret, headers: [("Content-Type", "application/json")],
                                    body: padded("S/b")).modifyResults().map(\.status) == [.saved])
    }

    @Test func oversizedAndMalformedBodiesAreRefused() throws {
        let fixture = try ServerFixture.withAccounts { configuration in
            configuration.limits.maxBodyBytes = 4096
            configuration.limits.maxBatchRecords = 2
        }
        let alice = try fixture.issue(user: "alice")
        let json = [("Content-Type", "application/json")]
        let big = try fixture.request("POST", Routes.modify, token: alice.secret, headers: json,
                                      body: ModifyRequest(records: [fileRecord("S/x", randomBytes(8000))]).jsonBytes)
        #expect(try big.status == 413 && big.problem().code == "too-large")
        let batch = try fixture.request("POST", Routes.modify, token: alice.secret, headers: json,
                                        body: ModifyRequest(records: (0..<3).map { fileRecord("S/\($0)", "x") }).jsonBytes)
        #expect(batch.status == 413)
        for bad in ["{", "[]", #"{"records": 5}"#, "\u{0}", String(repeating: "[", count: 3000)] {
            let response = try fixture.request("POST", Routes.modify, token: alice.secret, headers: json, body: Array(bad.utf8))
            #expect(try response.status == 400 && response.problem().code == "bad-json", "\(bad.prefix(10))")
        }
        let untyped = try fixture.request("POST", Routes.modify, token: alice.secret, body: Array("{}".utf8))
        #expect(untyped.status == 415)
        #expect(try fixture.request("GET", "/v1/changes?limit=0", token: alice.secret).problem().code == "bad-request")
        #expect(try fixture.request("GET", "/v1/records?path=../x", token: alice.secret).problem().code == "bad-path")
        // Nothing of it was saved.
        #expect(try fixture.changes(token: alice.secret).records.isEmpty)
    }

    @Test func headersOverTheConnectionsMemoryAreRefused() throws {
        let fixture = try ServerFixture.withAccounts()
        let alice = try fixture.issue(user: "alice")
        let response = try fixture.request("GET", Routes.changes, token: alice.secret,
                                           headers: [("X-Padding", String(repeating: "p", count: 600 * 1024))])
        #expect([413, 431].contains(response.status), "\(response.status) \(response.text.prefix(200))")
        #expect(try fixture.request("GET", Routes.changes, token: alice.secret).status == 200)
    }
}
