import Foundation
import Glibc
import SinkiTestSupport
import Testing

/// A peer's delete of a file a program here holds open to write: the file stays (what the program
/// writes would go into a file with no name), status says the delete is not applied yet, and once
/// the program is done the delete settles, either way, with nothing left pending.
@Suite(.serialized) struct HeldDeleteTests {
    /// Agents a and b with `game.save` on both, and a writer on b's copy.
    func setUp() async throws -> (Cluster, writer: Int32) {
        let cluster = Cluster("sinki-held-delete")
        try cluster.startServer()
        try cluster.startAgent("a")
        try cluster.startAgent("b")
        try writeFile(cluster.root("a") + "/game.save", "level 1")
        try await cluster.waitForConvergence("a", "b", timeout: 20) { $0.entries["game.save"] != nil }
        let writer = open(cluster.root("b") + "/game.save", O_WRONLY | O_APPEND | O_CLOEXEC)
        #expect(writer >= 0)
        try FileManager.default.removeItem(atPath: cluster.root("a") + "/game.save")
        try await waitUntil("b to hold the delete back", timeout: 20) {
            guard case let .array(changes)? = try statusJSON(cluster, "b")["notApplied"]?["changes"] else { return false }
            return changes.contains { $0["path"] == .string("SaveGames/game.save") && $0["cause"] == .string("changed-here") }
        }
        #expect(FileManager.default.fileExists(atPath: cluster.root("b") + "/game.save"))
        return (cluster, writer)
    }

    func waitUpToDate(_ cluster: Cluster, _ agent: String) async throws {
        try await waitUntil("\(agent) to say it is up to date", timeout: 20) {
            let status = try statusJSON(cluster, agent)
            return status["agent"]?["state"] == .string("up-to-date") && status["notApplied"]?["count"] == .int(0)
        }
    }

    @Test func theDeleteIsAppliedOnceTheWriterCloses() async throws {
        let (cluster, writer) = try await setUp()
        close(writer)
        try await cluster.waitForConvergence("a", "b", timeout: 20) { $0.entries["game.save"] == nil }
        try await waitUpToDate(cluster, "b")
    }

    @Test func aDeleteHeldBackAndThenMadeHereLeavesNothingPending() async throws {
        let (cluster, writer) = try await setUp()
        // The program removes the file itself: both sides now agree it is gone, and the delete that
        // failed has nothing left to do (it used to stay listed as not applied for ever).
        try FileManager.default.removeItem(atPath: cluster.root("b") + "/game.save")
        close(writer)
        try await cluster.waitForConvergence("a", "b", timeout: 20) { $0.entries["game.save"] == nil }
        try await waitUpToDate(cluster, "b")
        try await waitUpToDate(cluster, "a")
    }
}
