import Foundation
import Glibc
import SinkiTestSupport
import Testing

/// Signals at the edges of an agent's life: one sent before its loop watches it waits instead of
/// killing the process, and what the agent starts gets none of its own masking.
@Suite(.serialized) struct SignalTests {
    /// SIGTERM's bit in a `/proc/PID/status` mask (signal 15: bit 14).
    static let termBit: UInt64 = 1 << 14

    /// The signal mask of `pid`'s main thread, nil once it is gone.
    static func blockedSignals(_ pid: Int32) -> UInt64? { ChildProcess.signalSet("SigBlk", of: pid) }

    @Test func aSIGTERMBeforeTheLoopWatchesItStopsTheAgentCleanly() async throws {
        let cluster = Cluster("sinki-early-term")
        try cluster.startServer()
        for round in 1...5 {
            // Its config file is a FIFO: the agent opens it after blocking SIGTERM and before its loop
            // runs, and waits there, inside the window, until the test writes it. (Polling for the
            // window instead missed it on a loaded machine; it passed only while the test runner's
            // spawns handed children a mask with SIGTERM already blocked.)
            let config = try FIFO(cluster.directory.child("early-\(round).conf"))
            let agent = try cluster.startAgent("a", extra: ["--config", config.path], waitForScan: false)
            try await waitUntil("agent round \(round) to block SIGTERM", timeout: 10) {
                (Self.blockedSignals(agent.pid) ?? 0) & Self.termBit != 0 || !agent.isRunning
            }
            agent.signal(SIGTERM)
            try await config.write("# read while SIGTERM waits\n", to: agent, "agent round \(round)")
            let status = agent.waitForExit(timeout: 20)
            #expect(agent.termination == .exit(0), "round \(round): \(String(describing: agent.termination))\n\(agent.errors)")
            #expect(status == 0, "round \(round)\n\(agent.errors)")
        }
        // Once it runs, the loop thread takes SIGTERM again: a plain stop is a clean one too.
        let agent = try cluster.startAgent("a")
        #expect((Self.blockedSignals(agent.pid) ?? Self.termBit) & Self.termBit == 0)
        #expect(agent.stop() == 0)
    }

    @Test func observersStartWithNoSignalBlockedOrIgnored() async throws {
        let cluster = Cluster("sinki-observer-signals")
        let log = cluster.directory.child("signals.log")
        let config = cluster.directory.child("b.conf")
        try writeFile(config, """
            [observe SaveGames/]
            exec = sh -c 'grep -E "^Sig(Blk|Ign):" /proc/self/status >> "$0"' \(log)
            """)
        try cluster.startServer()
        try cluster.startAgent("a")
        try cluster.startAgent("b", extra: ["--config", config])
        try writeFile(cluster.root("a") + "/one.txt", "one")
        try await waitUntil("the observer's lines", timeout: 15) { (readFile(log) ?? "").split(separator: "\n").count >= 2 }
        var masks: [String: UInt64] = [:]
        for line in (readFile(log) ?? "").split(separator: "\n") {
            let parts = line.split(separator: ":")
            if parts.count == 2 { masks[String(parts[0])] = UInt64(parts[1].trimmingCharacters(in: .whitespaces), radix: 16) }
        }
        #expect(masks["SigBlk"] == 0, "\(masks)")
        // Signals 32 and 33 are glibc's own (thread cancellation, set*id): no program may use them, and
        // posix_spawn leaves them as the test runner that started the agent has them.
        let glibcInternal: UInt64 = 1 << 31 | 1 << 32
        #expect(masks["SigIgn"].map { $0 & ~glibcInternal } == 0, "\(masks)")
    }
}
