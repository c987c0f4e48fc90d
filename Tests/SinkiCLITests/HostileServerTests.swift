import Foundation
import SinkiTestSupport
import Testing

/// A server that answers the change feed with paths that would land outside the root: the agent
/// refuses each with an error line naming it, applies the rest, and writes nothing outside.
@Suite struct HostileServerTests {
    @Test func hostilePathsAreRefusedAndTheRestIsApplied() async throws {
        let cluster = Cluster("sinki-hostile")
        let root = cluster.root("a")
        let outside = cluster.directory.child("outside")
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        // A symlinked directory inside the root that points outside it.
        try FileManager.default.createSymbolicLink(atPath: root + "/link", withDestinationPath: outside)
        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/hostile_server.py").path
        let server = try ChildProcess("/usr/bin/env", ["python3", fixture, "SaveGames", "SaveGames/link/x", "SaveGames/link/deeper/y"],
                                      logDirectory: cluster.directory.path, label: "hostile")
        defer { server.stop() }
        var port = 0
        try await waitUntil("the hostile server to listen", timeout: 10) {
            port = Int(server.output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
            return port > 0
        }
        let agent = try cluster.startAgent("a", server: "http://127.0.0.1:\(port)")
        try await waitUntil("the good record to be applied", timeout: 5) {
            readFile(root + "/good.txt") == "fine"
        }
        let paths = ["../x", "/etc/x", "SaveGames/a/../../x", "SaveGames/../x", "SaveGames/./x", "SaveGames\\\\..\\\\x",
                     "SaveGames/link/x", "SaveGames/link/deeper/y"]
        // Refusals are logged as the batch is planned and recorded, around the good file's write.
        try await waitUntil("an error line naming each refused path", timeout: 5) {
            let log = agent.errors
            return paths.allSatisfy { log.contains("ERROR") && log.contains("\"\($0)\"") }
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside).isEmpty)
        #expect(!FileManager.default.fileExists(atPath: cluster.directory.child("x")))
        #expect(!FileManager.default.fileExists(atPath: cluster.directory.child("a/x")))
        #expect(agent.isRunning)
    }
}
