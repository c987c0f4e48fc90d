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
        try await waitUntil("a to scan", timeout: 30) { agent.errors.contains("scanned ") }
        try await waitUntil("a to be refused", timeout: 30) {
            guard case let .string(reason)? = try statusJSON(cluster, "a")["agent"]?["reason"] else { return false }
            return reason.contains("--token-file")
        }
        #expect(agent.errors.contains("this agent has none: give it one with --token-file FILE or [server] token-file"), "\(agent.errors)")
    }

    /// Issue 25, item 7: a first download shows totals for the whole of it, as the upload side does
    /// ("N of M applied (X of Y), rate, time left"), in JSON and in a real terminal's `status --watch`;
    /// and no report says "up to date" while files are still coming (each report is read before the
    /// folder is: files only come, so a folder short of them after an "up to date" is a lie).
    @Test func aFirstDownloadShowsItsTotalsAndIsNeverUpToDateWhileFilesCome() async throws {
        let cluster = Cluster("sinki-first-download")
        try cluster.startServer()
        var generator = SeededRandom(seed: 257)
        var files: [String: Data] = [:]
        // Small files that come inline with the feed's first page, and large ones that take the rest of the time.
        for index in 0..<40 { files[String(format: "saves/slot-%03d.save", index)] = Data(generator.bytes(8 << 10)) }
        for index in 0..<3 { files["videos/intro-\(index).mkv"] = Data(generator.bytes(2 << 20)) }
        let total = files.values.reduce(0) { $0 + $1.count }
        for (name, data) in files { try writeFile(cluster.root("a") + "/" + name, data) }
        let sender = try cluster.startAgent("a")
        try await waitUntil("a to send everything", timeout: 120) { sender.errors.contains("up to date with") }
        _ = cluster.stopAgent("a")

        // b comes new, slowed to 1 MiB/s so that the download lasts a few seconds.
        let config = cluster.directory.child("slow.conf")
        try writeFile(config, "[transfer]\nmax-rate = 1MiB/s\n")
        let state = cluster.directory.child("b") + "/state"
        try cluster.startAgent("b", extra: ["--config", config])
        let terminal = try Terminal(cluster.directory, columns: 160, rows: 60, command: "\(sinkidExecutable()) status --watch --state \(state)")
        defer { terminal.stop() }
        func present() -> Int {
            let found = FileManager.default.enumerator(atPath: cluster.root("b"))?.allObjects.compactMap { $0 as? String } ?? []
            return found.filter { files[$0] != nil }.count
        }
        var totals: [JSONValue] = []
        var drawn = false
        try await waitUntil("b to bring every file", timeout: 120, interval: 0.1) {
            let json = try statusJSON(cluster, "b")
            let here = present()
            if here < files.count {
                #expect(json["agent"]?["state"] != .string("up-to-date"), "up to date with \(here) of \(files.count) files here: \(json)")
                #expect(json["remote"]?["upToDate"] != .bool(true), "remote changes all applied with \(here) of \(files.count) files here")
            }
            if case .object? = json["progress"]?["download"] { totals.append(json["progress"]!["download"]!) }
            let screen = try terminal.screen().joined(separator: "\n")
            if screen.contains("remote change(s) to apply;") && screen.contains(" applied (") && screen.contains(" left") { drawn = true }
            return here == files.count
        }
        #expect(drawn, "status --watch never drew the download's totals")
        // Some report had the whole of it: part applied, the bytes of all, a pace and the time left.
        let whole = totals.first { item in
            guard case let .int(applied)? = item["applied"], case let .int(count)? = item["total"], case let .int(bytes)? = item["totalBytes"] else { return false }
            return applied > 0 && applied < count && bytes >= Int64(total) && item["rate"] != .null && item["eta"] != .null
        }
        #expect(whole != nil, "no report gave the download's totals: \(totals.suffix(3))")
        try await waitUntil("b to say up to date", timeout: 60) {
            try statusJSON(cluster, "b")["agent"]?["state"] == .string("up-to-date")
                && (try terminal.screen().contains { $0.hasPrefix("agent: up to date") })
        }
        #expect(try statusJSON(cluster, "b")["progress"]?["download"] == .null, "the run ends once nothing waits")
    }

    /// A state database of schema 11 upgrades in place: the bytes its Remote tree still has to bring
    /// are counted once (`root_totals.remote_bytes`), and what comes afterwards keeps the count.
    @Test func aStateOfSchemaElevenCountsWhatItHasToBring() async throws {
        let cluster = Cluster("sinki-schema-twelve")
        try cluster.startServer()
        try cluster.startAgent("a")
        try cluster.startAgent("b")
        let state = cluster.directory.child("b") + "/state"
        // b reads the feed but writes nothing of SaveGames while it is paused.
        #expect(try sinkid(["pause", "SaveGames", "--state", state], in: cluster.directory).code == 0)
        let sizes = [3000, 5000, 300_000]
        for (index, size) in sizes.enumerated() { try writeFile(cluster.root("a") + "/file-\(index).bin", Data(randomData(size))) }
        try await waitUntil("b to read the three files", timeout: 30) {
            try statusJSON(cluster, "b")["progress"]?["download"]?["total"] == .int(3)
        }
        #expect(cluster.stopAgent("b") == 0)
        try cluster.stateScript("b", OldStateSchemas.thirteen + """
            DROP TRIGGER IF EXISTS tree_counted_in; DROP TRIGGER IF EXISTS tree_counted_out; DROP TRIGGER IF EXISTS tree_counted_again;
            ALTER TABLE root_totals DROP COLUMN remote_bytes; DROP TABLE shared_conflicts; ALTER TABLE tree DROP COLUMN r_incomplete;
            PRAGMA user_version = 11;
            """)
        let b = try cluster.startAgent("b")
        try await waitUntil("b to count the bytes it has to bring", timeout: 30) {
            try statusJSON(cluster, "b")["progress"]?["download"]?["totalBytes"] == .int(Int64(sizes.reduce(0, +)))
        }
        #expect(try sinkid(["resume", "SaveGames", "--state", state], in: cluster.directory).code == 0)
        try await cluster.waitForConvergence("a", "b", timeout: 30) { $0.entries.count == 3 }
        try await waitUntil("b up to date", timeout: 30) { try statusJSON(cluster, "b")["agent"]?["state"] == .string("up-to-date") }
        #expect(!b.errors.contains("ERROR"), "\(b.errors.suffix(2000))")
    }
}
