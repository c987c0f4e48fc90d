import Foundation
import SinkiRecord
import SinkiTestSupport
import Testing
@testable import SinkiCLI

/// What `sinkid status` shows people (issue 25, item 8): one short line per problem, the same problem
/// once (with a count), no URL query strings, and in a terminal lines folded between words, never
/// past its width; the words name the cause and the setting that fixes it.
@Suite(.serialized) struct StatusDisplayTests {
    /// An agent whose server does not answer, seen in a real terminal 80 columns wide (tmux) and
    /// through a pipe: the outage is said once, with how many requests failed, and no line of the
    /// terminal reaches its last column (where a terminal folds mid-word on its own).
    @Test func anUnreachableServerIsOneShortProblemInATerminal() async throws {
        let cluster = Cluster("sinki-display", authenticated: false)
        let port = freePort()
        try cluster.startAgent("a", server: "http://127.0.0.1:\(port)")
        let state = cluster.directory.child("a") + "/state"
        try await waitUntil("a to fail a few requests", timeout: 30) {
            guard case let .string(reason)? = try statusJSON(cluster, "a")["agent"]?["reason"] else { return false }
            return reason.contains("failed requests")
        }
        let piped = try sinkid(["status", "--state", state], in: cluster.directory)
        let lines = piped.output.split(separator: "\n")
        #expect(lines.filter { $0.contains("unreachable:") }.count == 1, "the outage is said once:\n\(piped.output)")
        #expect(lines.contains { $0.contains("127.0.0.1:\(port) unreachable: connection refused; retrying (") && $0.contains("failed requests in") },
                "\(piped.output)")
        #expect(!piped.output.contains("?") && !piped.output.contains("omitDataFrom"), "no query strings:\n\(piped.output)")
        #expect(!piped.output.contains("last problem"), "the last problem is the outage, said already:\n\(piped.output)")
        let json = try sinkid(["status", "--json", "--state", state], in: cluster.directory).output
        #expect(!json.contains("?limit") && !json.contains("omitDataFrom"), "\(json)")

        let terminal = try Terminal(cluster.directory, columns: 80, rows: 40,
                                    command: "\(sinkidExecutable()) status --state \(state); sleep 600")
        defer { terminal.stop() }
        try await waitUntil("status to be drawn", timeout: 20) { try terminal.screen().contains { $0.hasPrefix("conflicts:") } }
        let screen = try terminal.screen()
        #expect(screen.allSatisfy { $0.count < 80 }, "a line reached the terminal's last column:\n\(screen.joined(separator: "\n"))")
        #expect(screen.filter { $0.contains("unreachable:") }.count == 1, "\(screen.joined(separator: "\n"))")
        #expect(screen.contains { $0.hasPrefix("      ") && !$0.trimmingCharacters(in: .whitespaces).isEmpty },
                "the long reason is folded under itself:\n\(screen.joined(separator: "\n"))")
    }

    /// Folding keeps every word whole: the words of the pieces, in order, are the line's; every
    /// piece leaves the terminal's last column empty; only a word longer than a line is cut.
    @Test(arguments: [30, 47, 80, 120])
    func foldingBreaksBetweenWords(_ width: Int) {
        let line = "  server http://127.0.0.1:7071 unreachable: connection refused; retrying (12 failed requests in 3m 5s)"
        let pieces = StatusRenderer.fold(line, width: width)
        #expect(pieces.allSatisfy { $0.count < width }, "\(pieces)")
        #expect(pieces.flatMap { $0.split(separator: " ") } == line.split(separator: " "), "\(pieces)")
        #expect(pieces.dropFirst().allSatisfy { $0.hasPrefix("      ") }, "continued under the line's start: \(pieces)")
        let long = "  a word far longer than any line: " + String(repeating: "x", count: 150)
        #expect(StatusRenderer.fold(long, width: width).allSatisfy { $0.count < width })
    }

    /// No token at all: the reason names the setting that gives one.
    @Test func noTokenNamesTokenFile() async throws {
        let cluster = Cluster("sinki-display-token")
        try cluster.startServer()
        let agent = try ChildProcess(sinkidExecutable(), ["--root", cluster.root("a"), "--server", cluster.serverURL,
                                                          "--state", cluster.directory.child("a") + "/state", "--device", "a"],
                                     logDirectory: cluster.directory.path, label: "agent-a")
        defer { _ = agent.stop() }
        try await waitUntil("a to be refused", timeout: 30) {
            guard case let .string(reason)? = try statusJSON(cluster, "a")["agent"]?["reason"] else { return false }
            return reason.contains("--token-file")
        }
        #expect(agent.errors.contains("this agent has none: give it one with --token-file FILE or [server] token-file"), "\(agent.errors)")
    }
}
