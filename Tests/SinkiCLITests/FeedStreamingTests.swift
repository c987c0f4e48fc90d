import Foundation
import SinkiTestSupport
import Testing

/// The agent reads the change feed as streamed answers once it is caught up (docs/protocol.md, "A feed
/// that streams"): changes saved one after another on another device reach it on one open answer, a
/// page each, without a request of its own between them.
@Suite struct FeedStreamingTests {
    @Test func changesOneAfterAnotherArriveOnOneOpenAnswer() async throws {
        let cluster = Cluster("sinki-feed-stream")
        try cluster.startServer()
        try cluster.startAgent("a")
        try cluster.startAgent("b")
        let a = cluster.root("a"), b = cluster.root("b")
        try await waitUntil("both agents up to date", timeout: 15) {
            try ["a", "b"].allSatisfy { try statusJSON(cluster, $0)["agent"]?["state"] == .string("up-to-date") }
        }
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
}
