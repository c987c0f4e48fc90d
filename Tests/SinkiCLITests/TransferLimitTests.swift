import Foundation
import SinkiRecord
import SinkiTestSupport
import Testing

/// `[transfer] max-rate` and `parallel` as docs/configuration.md says (issue 25, item 3): the rate
/// holds for everything an agent sends and everything it receives together (inline content in
/// records and feed pages, chunks, several files at once), and no more than `parallel` large files
/// come down at once. Only lower bounds on time are asserted: a loaded machine can make a transfer
/// slower, never faster, so a transfer quicker than its bytes allow at the rate is the limit failing.
@Suite(.serialized) struct TransferLimitTests {
    static let mebibyte = 1 << 20
    /// Bytes a second, each way.
    static let rate = 2 * mebibyte

    /// When the first line of `log` holding `marker` was written (the agent's own clock).
    func loggedAt(_ log: String, _ marker: String) -> Date? {
        guard let line = log.split(separator: "\n").first(where: { $0.contains(marker) }),
              let stamp = line.split(separator: " ").first else { return nil }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: String(stamp))
    }

    @Test func maxRateHoldsForTheWholeAgentBothWaysAndParallelForDownloads() async throws {
        let cluster = Cluster("sinki-rate")
        try cluster.startServer()
        let config = cluster.directory.child("limited.conf")
        try writeFile(config, "[transfer]\nmax-rate = \(Self.rate / Self.mebibyte)MiB/s\nparallel = 2\n")
        // Incompressible content: eight files that travel inline (in the records and the feed's
        // pages) and three that travel as chunks, 6.1 MiB in all.
        var generator = SeededRandom(seed: 253)
        var files: [String: Data] = [:]
        for index in 0..<8 { files["small-\(index).bin"] = Data(generator.bytes(200 << 10)) }
        for index in 0..<3 { files["large-\(index).bin"] = Data(generator.bytes(3 * Self.mebibyte / 2)) }
        let total = files.values.reduce(0) { $0 + $1.count }
        let atTheRate = Double(total) / Double(Self.rate)
        let a = cluster.root("a")
        for (name, data) in files { try writeFile(a + "/" + name, data) }

        // Up: agent a sends all of it; from its scan to "up to date" takes at least the bytes' time
        // at the rate (a fifth off for the burst and the clock's grain).
        let sender = try cluster.startAgent("a", extra: ["--config", config])
        try await waitUntil("a to send everything", timeout: 120) { sender.errors.contains("up to date with") }
        let up = try #require(loggedAt(sender.errors, "up to date with")).timeIntervalSince(try #require(loggedAt(sender.errors, "scanned ")))
        #expect(up >= 0.8 * atTheRate, "a sent \(total) bytes in \(up) s: faster than \(Self.rate) bytes a second")
        _ = cluster.stopAgent("a")

        // Down: agent b, new, brings it all; meanwhile its status never shows more than two large
        // files moving, and its log (a line as each download begins and ends) shows two at once.
        let receiver = try cluster.startAgent("b", extra: ["--config", config])
        try await waitUntil("b to bring everything", timeout: 120, interval: 0.05) {
            if case let .array(moving)? = try statusJSON(cluster, "b")["transfers"] {
                let downloads = moving.filter { $0["direction"] == .string("download") && $0["failed"] == .null }.count
                #expect(downloads <= 2, "\(downloads) large files came down at once with parallel = 2")
            }
            return receiver.errors.contains("up to date with")
        }
        var running = 0, most = 0
        for line in receiver.errors.split(separator: "\n") {
            if line.contains("DEBUG sinkid: downloading \"") { running += 1 }
            if line.contains("DEBUG sinkid: downloaded \"") || line.contains("ERROR sinkid: download of") { running -= 1 }
            most = max(most, running)
        }
        for (name, data) in files { #expect(FileManager.default.contents(atPath: cluster.root("b") + "/" + name) == data, "\(name)") }
        let down = try #require(loggedAt(receiver.errors, "up to date with")).timeIntervalSince(try #require(loggedAt(receiver.errors, "scanned ")))
        #expect(down >= 0.8 * atTheRate, "b received \(total) bytes in \(down) s: faster than \(Self.rate) bytes a second")
        #expect(most == 2, "two large files never came down at once (parallel = 2)")
    }

    /// Over a slow link (here the rate limit) a burst of small files goes in batches bounded by the
    /// pace, each planned from where the last one ended and no longer than a batch takes: once every
    /// batch planned a page of 1,000 paths to send some 60 of them, and the rest waited for the next
    /// pass (issue 22: the sender's CPU at 50 ms / 20 Mbit/s, 4.2 s for 5,000 files, 2.0 s after).
    @Test func aBurstOverASlowLinkIsPlannedABatchAtATime() async throws {
        let cluster = Cluster("sinki-slow-burst")
        try cluster.startServer()
        let config = cluster.directory.child("slow.conf")
        try writeFile(config, "[transfer]\nmax-rate = 1MiB/s\n")
        let a = cluster.root("a")
        var generator = SeededRandom(seed: 22)
        var files: [String: Data] = [:]
        for folder in 0..<6 {
            for index in 0..<100 { files["d\(folder)/f\(index).bin"] = Data(generator.bytes(4_096)) }
        }
        let sender = try cluster.startAgent("a", extra: ["--config", config])
        let receiver = try cluster.startAgent("b")
        try await waitUntil("both agents up to date", timeout: 60) {
            sender.errors.contains("up to date with") && receiver.errors.contains("up to date with")
        }
        // Written into a folder moved in at once, as a burst (its walk finds them all together).
        let staging = cluster.directory.child("staging")
        for (name, data) in files { try writeFile(staging + "/" + name, data) }
        #expect(rename(staging, a + "/burst") == 0)
        try await waitUntil("b to hold all \(files.count) files", timeout: 120) {
            files.allSatisfy { FileManager.default.contents(atPath: cluster.root("b") + "/burst/" + $0.key) == $0.value }
        }
        // "batch TAKEN of PLANNED planned": the debug line of each batch built.
        let batches = sender.errors.split(separator: "\n").compactMap { line -> (taken: Int, planned: Int)? in
            guard let range = line.range(of: "replica: batch ") else { return nil }
            let words = line[range.upperBound...].split(separator: " ")
            guard words.count > 2, let taken = Int(words[0]), let planned = Int(words[2]) else { return nil }
            return (taken, planned)
        }
        let sent = batches.reduce(0) { $0 + $1.taken }
        let planned = batches.reduce(0) { $0 + $1.planned }
        #expect(sent >= files.count)
        // Cut by the pace: 2.4 MiB at 1 MiB/s is many batches, not one of 600 files.
        #expect(batches.count >= 6, "\(batches)")
        // Each file planned about twice (the first page sees them all), not once for every batch
        // before it went: some 1,400 paths here, 3,200 when each page ran to the end of the work.
        #expect(planned <= 3 * files.count, "\(planned) paths planned for \(sent) sent: \(batches)")
    }
}
