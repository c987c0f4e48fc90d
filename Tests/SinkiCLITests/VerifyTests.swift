import Foundation
import SinkiRecord
import SinkiTestSupport
import Testing

/// The full comparison with the server (issue 11): what neither the feed nor a scan can find, a
/// comparison of every record finds and repairs, through the merge rules, losing nothing.
@Suite(.serialized) struct VerifyTests {
    func verify(_ cluster: Cluster, _ agent: String) throws -> SinkidRun {
        try sinkid(["sync", "--verify", "--state", cluster.directory.child(agent) + "/state"], in: cluster.directory, timeout: 60)
    }

    @Test func aFileTheDatabaseAndTheDiskBothLostIsBroughtBack() async throws {
        let cluster = Cluster("sinki-verify-lost")
        try cluster.startServer()
        try cluster.startAgent("a")
        try cluster.startAgent("b")
        try writeFile(cluster.root("a") + "/kept.save", "everywhere")
        try writeFile(cluster.root("a") + "/lost.save", "lost on b")
        try await cluster.waitForConvergence("a", "b", timeout: 10) { $0.entries.count == 2 }
        // b loses the file and what its Local and Synced trees knew of it together (an apply whose outcome
        // went wrong, a restored backup of b's disk): no scan and no feed page can tell. b's Remote tree
        // still holds the version it read, which differs from what Synced now says: b writes it again.
        cluster.stopAgent("b")
        try FileManager.default.removeItem(atPath: cluster.root("b") + "/lost.save")
        try cluster.stateSQL("b", """
            UPDATE tree SET l_kind = NULL, l_hash = '', l_size = 0, s_tag = 0, s_kind = NULL, s_hash = '' WHERE path = 'SaveGames/lost.save'
            """)
        try cluster.startAgent("b")
        try await waitUntil("b to bring the file back", timeout: 10) { readFile(cluster.root("b") + "/lost.save") == "lost on b" }
        try await waitUntil("b to call itself up to date", timeout: 10) {
            try statusJSON(cluster, "b")["agent"]?["state"] == .string("up-to-date")
        }
        let status = try statusJSON(cluster, "b")
        #expect(status["digest"]?["matched"] == .bool(true))

        // A full comparison finds nothing left to repair.
        let run = try verify(cluster, "b")
        #expect(run.code == 0)
        #expect(run.output.contains("the same"), "\(run.output)")
        try await cluster.waitForConvergence("a", "b", timeout: 5)
    }

    @Test func aServerThatLostEverythingGetsEverythingBackAndNothingIsDuplicated() async throws {
        let cluster = Cluster("sinki-verify-server-lost")
        try cluster.startServer()
        let port = cluster.serverPort
        try cluster.startAgent("a")
        try cluster.startAgent("b")
        for index in 0..<20 { try writeFile(cluster.root("a") + "/f\(index).txt", "file \(index)") }
        try writeFile(cluster.root("b") + "/from b.txt", "b's")
        try await cluster.waitForConvergence("a", "b", timeout: 10) { $0.entries.count == 21 }
        cluster.stopAgent("a")
        cluster.stopAgent("b")
        cluster.stopServer()
        // A new, empty server in place of the old one (its store has another id).
        try FileManager.default.removeItem(atPath: cluster.directory.child("server-data"))
        try cluster.startServer(port: port)
        cluster.forgetTokens() // the new server knows none of the old ones
        try cluster.startAgent("a")
        try cluster.startAgent("b")
        try await waitUntil("the server to hold everything again", timeout: 20) {
            try cluster.serverRecords().filter { !$0.deleted }.count == 21
        }
        try await cluster.waitForConvergence("a", "b", timeout: 10) { $0.entries.count == 21 }
        #expect(!TreeSnapshot(cluster.root("a")).entries.keys.contains { $0.contains(".sync-conflict-") })
        #expect(cluster.agent("a")?.errors.contains("comparing everything with it instead") == true)
    }

    @Test func anUncleanStopIsFollowedByAComparisonAndThePeriodicOneRuns() async throws {
        let cluster = Cluster("sinki-verify-unclean")
        try cluster.startServer()
        try cluster.startAgent("a")
        try writeFile(cluster.root("a") + "/x.save", "x")
        try await waitUntil("x on the server", timeout: 10) { try cluster.serverRecords().contains { $0.path == "SaveGames/x.save" } }
        cluster.killAgent("a")
        let config = cluster.directory.child("a.conf")
        try writeFile(config, "[agent]\nverify-interval = 2s\n")
        try cluster.startAgent("a", extra: ["--config", config])
        try await waitUntil("a comparison after the unclean stop", timeout: 10) {
            cluster.agent("a")?.errors.contains("comparing every record with the server (the last run did not stop cleanly)") ?? false
        }
        try await waitUntil("a periodic comparison", timeout: 10) {
            cluster.agent("a")?.errors.contains("comparing every record with the server (every 2 s)") ?? false
        }
        let status = try statusJSON(cluster, "a")
        #expect(status["verify"]?["result"] == .string("same"))
        #expect(status["verify"]?["nextRun"] != .null)
        // A clean stop is not followed by one.
        cluster.stopAgent("a")
        try cluster.startAgent("a")
        try await waitUntil("a to catch up", timeout: 10) { cluster.agent("a")?.errors.contains("up to date with") ?? false }
        #expect(cluster.agent("a")?.errors.contains("did not stop cleanly") == false)
    }
}
