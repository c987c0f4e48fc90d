import Foundation
import SinkiTestSupport
import Testing

/// Two real agents on two folders named SaveGames, through one real `sinkid serve` (issue 2).
@Suite(.serialized) struct ConvergenceTests {
    @Test func createsModificationsAndDeletesConverge() async throws {
        let cluster = Cluster()
        try cluster.startServer()
        try cluster.startAgent("a")
        try cluster.startAgent("b")
        let a = cluster.root("a"), b = cluster.root("b")

        try writeFile(a + "/player1.save", "level 1")
        try writeFile(a + "/slot 1/nested/deep/état ünïcode.save", "résumé ✓")
        try writeFile(a + "/empty.txt", "")
        try FileManager.default.createDirectory(atPath: a + "/empty dir/inner", withIntermediateDirectories: true)
        try await cluster.waitForConvergence("a", "b") { $0.entries.count == 8 }
        #expect(readFile(b + "/slot 1/nested/deep/état ünïcode.save") == "résumé ✓")

        try writeFile(b + "/player1.save", "level 2, edited on b")
        try await cluster.waitForConvergence("a", "b") { $0.entries["player1.save"]?.hasPrefix("file:20:") == true }
        #expect(readFile(a + "/player1.save") == "level 2, edited on b")

        try FileManager.default.removeItem(atPath: a + "/slot 1")
        try FileManager.default.removeItem(atPath: a + "/empty.txt")
        try await cluster.waitForConvergence("a", "b") { $0.entries["slot 1"] == nil && $0.entries["empty.txt"] == nil }
        #expect(!FileManager.default.fileExists(atPath: b + "/slot 1"))

        try FileManager.default.removeItem(atPath: b + "/empty dir/inner")
        try await cluster.waitForConvergence("a", "b") { $0.entries["empty dir/inner"] == nil && $0.entries["empty dir"] == "dir" }
    }

    @Test func upToDateIsSaidOnlyOnceEverythingIsSent() async throws {
        let cluster = Cluster("sinki-honest-up-to-date")
        try cluster.startServer()
        // A first sync with thousands of changes: the feed is read to its end at once, the sending takes longer.
        for index in 0..<3000 { try writeFile(cluster.root("a") + "/d\(index % 30)/f\(index).txt", "file \(index)") }
        try cluster.startAgent("a")
        try await waitUntil("a to say it is up to date", timeout: 60) { cluster.agent("a")?.errors.contains("up to date with") ?? false }
        // When it says so, the server has everything: 3,000 files and their 30 folders.
        let live = try cluster.serverRecords().filter { !$0.deleted }.count
        #expect(live == 3030, "said up to date with \(live) of 3030 records on the server")
        let log = try #require(cluster.agent("a")?.errors)
        #expect(log.contains("changes to the end; 3030 local change(s) to send"))
    }

    @Test func aFiveMebibyteFileArrivesWhole() async throws {
        let cluster = Cluster()
        try cluster.startServer()
        try cluster.startAgent("a")
        try cluster.startAgent("b")
        let bytes = try #require(FileHandle(forReadingAtPath: "/dev/urandom")?.readData(ofLength: 5 << 20))
        try writeFile(cluster.root("a") + "/big.bin", bytes)
        try await cluster.waitForConvergence("a", "b") { $0.entries["big.bin"] != nil }
        #expect(FileManager.default.contents(atPath: cluster.root("b") + "/big.bin") == bytes)
    }

    @Test func anEditOnBothSidesWhileOneAgentIsStoppedKeepsBothVersions() async throws {
        let cluster = Cluster()
        try cluster.startServer()
        try cluster.startAgent("a")
        try cluster.startAgent("b")
        let a = cluster.root("a"), b = cluster.root("b")
        try writeFile(a + "/shared.save", "original")
        try await cluster.waitForConvergence("a", "b") { $0.entries["shared.save"] != nil }

        cluster.stopAgent("b")
        try writeFile(a + "/shared.save", "edited on a")
        try writeFile(b + "/shared.save", "edited on b while offline")
        // a's edit reaches the server before b is back.
        try await waitUntil("a's edit on the server", timeout: 2) {
            cluster.agent("a")?.errors.contains("pushed 1 change(s)") ?? false
        }
        try cluster.startAgent("b")
        try await cluster.waitForConvergence("a", "b", timeout: 4) { snapshot in
            snapshot.entries.keys.contains { $0.contains(".sync-conflict-") }
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: a).sorted()
        let copy = try #require(names.first { $0.contains(".sync-conflict-") })
        #expect(copy.hasSuffix("-b.save"))
        #expect(readFile(a + "/shared.save") == "edited on a")
        #expect(readFile(a + "/" + copy) == "edited on b while offline")
    }

    @Test func anAgentKilledAndRestartedConvergesAndResendsNothing() async throws {
        let cluster = Cluster()
        try cluster.startServer()
        try cluster.startAgent("a")
        try cluster.startAgent("b")
        let a = cluster.root("a")
        for index in 0..<300 { try writeFile(a + "/many/f\(index).txt", "file \(index)") }
        // Kill a while it is still working through them.
        try await waitUntil("a to start pushing", timeout: 5) { cluster.agent("a")?.errors.contains("pushed ") ?? false }
        cluster.killAgent("a")
        try cluster.startAgent("a")
        try await cluster.waitForConvergence("a", "b", timeout: 5) { $0.entries.count == 301 }
        // Once converged, another restart finds nothing to send and the server sees no conflict.
        cluster.stopAgent("a")
        let before = cluster.server?.errors ?? ""
        try cluster.startAgent("a")
        try await waitUntil("a to catch up", timeout: 5) { cluster.agent("a")?.errors.contains("up to date with") ?? false }
        #expect(cluster.agent("a")?.errors.contains("0 local change(s) to send") == true)
        let after = String((cluster.server?.errors ?? "").dropFirst(before.count))
        #expect(!after.contains("POST /v1/records/modify"))
    }

    @Test func aServerThatIsDownAtStartIsCaughtUpWithLater() async throws {
        let cluster = Cluster()
        // Reserve a port, then leave it closed until the server starts on it.
        try cluster.startServer()
        let port = cluster.serverPort
        cluster.stopServer()
        try cluster.startAgent("a", server: "http://127.0.0.1:\(port)")
        try await waitUntil("a to report the server down", timeout: 5) {
            cluster.agent("a")?.errors.contains("unreachable") ?? false
        }
        try writeFile(cluster.root("a") + "/made while offline.save", "kept in the outbox")
        let unreachableLines = cluster.agent("a")?.errors.components(separatedBy: "unreachable").count ?? 0
        try cluster.startServer(port: port)
        try cluster.startAgent("b", server: "http://127.0.0.1:\(port)")
        try await cluster.waitForConvergence("a", "b", timeout: 40) { $0.entries["made while offline.save"] != nil }
        // One clear line, not one per retry.
        #expect(unreachableLines == 2)
        #expect(cluster.agent("a")?.errors.contains("reachable again") == true)
    }

    @Test func signalsEndTheAgentCleanly() async throws {
        let cluster = Cluster()
        try cluster.startServer()
        let agent = try cluster.startAgent("a")
        agent.signal(SIGINT)
        #expect(agent.waitForExit(timeout: 10) == 0)
        let again = try cluster.startAgent("a")
        #expect(again.stop(timeout: 10) == 0)
    }

    @Test func theEmbeddedServerServesASecondAgent() async throws {
        let cluster = Cluster()
        let first = try ChildProcess(sinkidExecutable(), ["--root", cluster.root("a"), "--state", cluster.directory.child("a/state"),
                                                          "--listen", "127.0.0.1:0", "--device", "a"],
                                     logDirectory: cluster.directory.path, label: "embedded")
        var port = 0
        try await waitUntil("the embedded server to listen", timeout: 15) {
            guard let range = first.errors.range(of: "embedded server listening on 127.0.0.1:") else { return false }
            port = Int(first.errors[range.upperBound...].prefix { $0.isNumber }) ?? 0
            return port > 0
        }
        try writeFile(cluster.root("a") + "/from-a.save", "hello")
        // The embedded server checks tokens too: a's own is in its state folder, for agents of the machine.
        let token = cluster.directory.child("a/state/token")
        let mode = try FileManager.default.attributesOfItem(atPath: token)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        try cluster.startAgent("b", server: "http://127.0.0.1:\(port)", extra: ["--token-file", token])
        try await cluster.waitForConvergence("a", "b", timeout: 3) { $0.entries["from-a.save"] != nil }
        #expect(first.stop() == 0)
    }
}

/// SIGKILL at unplanned instants while a burst is syncing (issue 2, crash safety).
@Suite struct CrashTests {
    @Test func killedAtRandomInstantsItStillConvergesWithoutConflicts() async throws {
        let cluster = Cluster("sinki-crash")
        try cluster.startServer()
        try cluster.startAgent("a")
        try cluster.startAgent("b")
        let a = cluster.root("a")
        var generator = SystemRandomNumberGenerator()
        for round in 0..<6 {
            for index in 0..<150 { try writeFile(a + "/r\(round)/f\(index).txt", "round \(round) file \(index)") }
            for index in stride(from: 0, to: 150, by: 7) { try FileManager.default.removeItem(atPath: a + "/r\(round)/f\(index).txt") }
            // Not a wait for a condition: a random instant to kill at.
            try await Task.sleep(nanoseconds: UInt64.random(in: 0...80_000_000, using: &generator))
            cluster.killAgent(UInt64.random(in: 0...1, using: &generator) == 0 ? "a" : "b")
            if cluster.agent("a") == nil { try cluster.startAgent("a") }
            if cluster.agent("b") == nil { try cluster.startAgent("b") }
        }
        try await cluster.waitForConvergence("a", "b", timeout: 10) { snapshot in
            snapshot.entries.count == 6 * (150 - 22) + 6
        }
        let names = TreeSnapshot(cluster.root("b")).entries.keys
        #expect(!names.contains { $0.contains(".sync-conflict-") })
    }
}
