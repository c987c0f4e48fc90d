import Foundation
import SinkiRecord
import SinkiTestSupport
import Testing

/// The agent's answer to a refused token (issue 12): stop sending, keep the outbox, say "token
/// refused" in status and once in the log, and go on as soon as the token file holds a new token.
@Suite(.serialized) struct TokenRefusalTests {
    /// The id part of `sinki_ID_SECRET`.
    func tokenID(_ token: String) -> String {
        String(token.split(separator: "_")[1])
    }

    @Test func aRevokedTokenStopsSendingKeepsTheChangesAndANewTokenFileGoesOn() async throws {
        let cluster = Cluster("sinki-token-refused")
        try cluster.startServer()
        try cluster.startAgent("a")
        try cluster.startAgent("b")
        let a = cluster.root("a"), b = cluster.root("b")
        try writeFile(a + "/before.txt", "sent with the first token")
        try await cluster.waitForConvergence("a", "b", timeout: 10) { $0.entries.count == 1 }

        // Revoked by a separate command beside the running server.
        let tokenPath = try #require(try cluster.tokenFile(for: "a"))
        let first = try #require(readFile(tokenPath)).trimmingCharacters(in: .whitespacesAndNewlines)
        let revoke = try sinkid(["serve", "token", "revoke", tokenID(first), "--data", try #require(cluster.serverData)], in: cluster.directory)
        #expect(revoke.code == 0, "\(revoke.output)")
        try writeFile(a + "/during.txt", "written while the token is refused")

        try await waitUntil("a to say its token is refused", timeout: 20) {
            let status = try statusJSON(cluster, "a")
            return status["server"]?["tokenRefused"] != .null && status["server"]?["tokenRefused"] != nil
        }
        let status = try statusJSON(cluster, "a")
        #expect(status["agent"]?["state"] == .string("error"))
        if case let .string(reason)? = status["agent"]?["reason"] { #expect(reason.contains("token refused")) } else { Issue.record("no reason") }
        // Kept, not sent: the change waits in the outbox.
        try await waitUntil("the change to be queued", timeout: 10) {
            if case let .int(count)? = try statusJSON(cluster, "a")["pending"]?["count"] { return count >= 1 }
            return false
        }
        #expect(try cluster.serverRecords().contains { $0.path == "SaveGames/during.txt" } == false)
        let text = try sinkid(["status", "--state", cluster.directory.child("a") + "/state"], in: cluster.directory)
        #expect(text.output.contains("token refused"))
        // Said once in the log, not once per retry.
        let log = try #require(cluster.agent("a")?.errors)
        #expect(log.components(separatedBy: "token refused by the server").count - 1 == 1, "\(log.suffix(3000))")

        // A new token in the same file: taken without a restart, and the kept change goes.
        let second = try cluster.makeToken(user: Cluster.user, device: "a-again")
        try Data((second + "\n").utf8).write(to: URL(fileURLWithPath: tokenPath + ".new"))
        #expect(rename(tokenPath + ".new", tokenPath) == 0)
        try await cluster.waitForConvergence("a", "b", timeout: 20) { $0.entries.count == 2 }
        #expect(readFile(b + "/during.txt") == "written while the token is refused")
        try await waitUntil("a's status to clear", timeout: 10) {
            try statusJSON(cluster, "a")["server"]?["tokenRefused"] == .null
        }
        #expect(cluster.agent("a")?.errors.contains("the token file changed: trying the new token") == true)
    }
}

/// A server that asks an agent to slow down (429 with `Retry-After`) is waited on, not hammered, and
/// everything still arrives.
@Suite(.serialized) struct RateLimitTests {
    @Test func anAgentWaitsOutA429AndStillConverges() async throws {
        let cluster = Cluster("sinki-rate-limit")
        // One request a second per token: an agent's catch-up page and its first long-poll already exceed it.
        try cluster.startServer(extra: ["--rate-limit", "1"])
        try cluster.startAgent("a")
        try cluster.startAgent("b")
        let started = Date()
        for index in 0..<5 {
            try writeFile(cluster.root("a") + "/f\(index).txt", "file \(index)")
            try await waitUntil("f\(index) to reach b", timeout: 60) { readFile(cluster.root("b") + "/f\(index).txt") == "file \(index)" }
        }
        try await cluster.waitForConvergence("a", "b", timeout: 30) { $0.entries.count == 5 }
        let logs = [try #require(cluster.agent("a")?.errors), try #require(cluster.agent("b")?.errors)]
        #expect(logs.contains { $0.contains("the server asks to slow down: waiting") }, "no agent was ever limited: the test proves nothing")
        // Waited out, not retried at once: a retry at once meets hundreds a second. Each agent waits out a
        // 429's second, then its feed and its pushes (and now and then a digest check) go at once, and
        // one of them meets the next second's limit: about one 429 an agent a second (36 in 19 s here,
        // 31 in 13 s on a loaded machine, where twice the seconds was the bound and failed by one).
        let limited = logs.map { $0.components(separatedBy: ": 429,").count - 1 }.reduce(0, +)
        let seconds = Int(Date().timeIntervalSince(started).rounded(.up))
        #expect(limited <= 3 * seconds + 4, "\(limited) answers of 429 in \(seconds) s")
    }
}
