import Foundation
import SinkiTestSupport
import Testing

/// The agent reads the change feed as streamed answers once it is caught up (docs/protocol.md, "A feed
/// that streams"): changes saved one after another on another device reach it on one open answer, a
/// page each, without a request of its own between them.
@Suite struct FeedStreamingTests {
    /// A server and agents a and b, both up to date.
    static func twoAgentsUpToDate(_ cluster: Cluster) async throws {
        try cluster.startServer()
        try cluster.startAgent("a")
        try cluster.startAgent("b")
        try await waitUntil("both agents up to date", timeout: 15) {
            try ["a", "b"].allSatisfy { try statusJSON(cluster, $0)["agent"]?["state"] == .string("up-to-date") }
        }
    }

    @Test func changesOneAfterAnotherArriveOnOneOpenAnswer() async throws {
        let cluster = Cluster("sinki-feed-stream")
        try await Self.twoAgentsUpToDate(cluster)
        let a = cluster.root("a"), b = cluster.root("b")
        let asksBefore = try #require(cluster.agent("b")?.errors).components(separatedBy: "/v1/changes?").count
        for index in 1...5 {
            try writeFile(a + "/save\(index).txt", "save \(index)")
            try await waitUntil("save\(index).txt on b", timeout: 15) { FileManager.default.fileExists(atPath: b + "/save\(index).txt") }
        }
        let log = try #require(cluster.agent("b")?.errors)
        // Each change a page on the answer b holds open; no answer ended and none was asked for since
        // (an answer's line is logged when it ends).
        #expect(log.components(separatedBy: "on the open answer").count - 1 >= 5, "\(log.suffix(3000))")
        #expect(log.components(separatedBy: "/v1/changes?").count == asksBefore, "\(log.suffix(3000))")
    }

    /// A writer's feed passes over its own saves (issue 22, item 4): it learnt each from the save's
    /// answer. Its pages say how many it passed over, carry none of its records, and its copy of the
    /// server's records still matches the server's digests, with nothing repaired.
    @Test func aWriterDoesNotReadItsOwnSavesBack() async throws {
        let cluster = Cluster("sinki-feed-own")
        try await Self.twoAgentsUpToDate(cluster)
        let a = cluster.root("a"), b = cluster.root("b")
        for index in 1...20 {
            try writeFile(a + "/own\(index).txt", "save \(index)")
            try await waitUntil("own\(index).txt on b", timeout: 15) { FileManager.default.fileExists(atPath: b + "/own\(index).txt") }
        }
        try await waitUntil("a up to date with its digests matched", timeout: 15) {
            let status = try statusJSON(cluster, "a")
            return status["agent"]?["state"] == .string("up-to-date") && status["digest"]?["matched"] == .bool(true)
        }
        #expect(try statusJSON(cluster, "a")["digest"]?["repaired"] == .int(0))
        let pages = try #require(cluster.agent("a")?.errors).components(separatedBy: "\n").filter { $0.contains("feed: a page of") }
        #expect(pages.contains { $0.contains("own saves passed over") }, "\(pages)")
        // b writes nothing: a page with a record would be one of a's own, read back.
        #expect(pages.allSatisfy { $0.contains("a page of 0 record(s)") }, "\(pages)")
        // b, another device, reads every one of them.
        #expect(try #require(cluster.agent("b")?.errors).contains("own saves passed over") == false)
    }

    /// The sender's own streamed feed stays open through a burst it sends: its pull loop, waiting for its
    /// own rounds, takes the pages late, but they arrive, and the feed is not taken for dead and read
    /// again (it was, 1.5 s into a burst of 10,000 files, and every page came twice).
    @Test func aSenderKeepsItsStreamedFeedThroughABurst() async throws {
        let cluster = Cluster("sinki-feed-burst")
        try await Self.twoAgentsUpToDate(cluster)
        let asksBefore = try #require(cluster.agent("a")?.errors).components(separatedBy: "/v1/changes?").count
        let burst = cluster.directory.child("burst")
        for folder in 0..<100 {
            try FileManager.default.createDirectory(atPath: burst + "/d\(folder)", withIntermediateDirectories: true)
            for index in 0..<100 { try writeFile(burst + "/d\(folder)/f\(index).txt", "file \(folder).\(index)") }
        }
        // Into the root in one rename: the whole burst at once.
        try FileManager.default.moveItem(atPath: burst, toPath: cluster.root("a") + "/burst")
        try await cluster.waitForConvergence("a", "b", timeout: 120) { $0.entries.count == 10_101 }
        let log = try #require(cluster.agent("a")?.errors)
        let givenUp = log.components(separatedBy: "\n").filter { $0.contains("is given up") }
        #expect(givenUp.isEmpty, "\(givenUp)")
        let asks = log.components(separatedBy: "/v1/changes?").count
        #expect(asks == asksBefore, "a asked for its feed again during the burst")
    }
}
