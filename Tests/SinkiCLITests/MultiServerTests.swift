import Foundation
import SinkiRecord
import SinkiSupport
import SinkiTestSupport
import Testing

/// Two `sinkid serve` processes on one PostgreSQL database and one data folder (issue 13), an agent on
/// each, with tokens: what either agent writes reaches the other through the other server, and a
/// server killed with SIGKILL mid-way loses nothing it acknowledged.
@Suite(.serialized) struct MultiServerTests {
    /// A second server on the same database and data folder, on a port of its own.
    func startSecondServer(_ cluster: Cluster, database: String, extra: [String] = []) throws -> (ChildProcess, String) {
        let data = try #require(cluster.serverData)
        let process = try ChildProcess(sinkidExecutable(), ["serve", "--listen", "127.0.0.1:0", "--data", data, "--database", database,
                                                            "--log-level", "debug"] + extra, logDirectory: cluster.directory.path, label: "server-two")
        var port = 0
        try waitUntilSync("the second server to listen", timeout: 20) {
            if !process.isRunning { throw SecondServerFailed(log: process.errors) }
            guard let range = process.errors.range(of: "(port ") else { return false }
            port = Int(process.errors[range.upperBound...].prefix { $0.isNumber }) ?? 0
            return port > 0
        }
        return (process, "http://127.0.0.1:\(port)")
    }

    @Test func agentsOnTwoServersOfOneDatabaseConvergeAndAKilledServerLosesNothing() async throws {
        let database = try PostgresCluster.shared().createDatabase()
        let cluster = Cluster("sinki-two-servers")
        try cluster.startServer(extra: ["--database", database.url])
        let (second, secondURL) = try startSecondServer(cluster, database: database.url)
        defer { _ = second.stop() }
        try cluster.startAgent("a")
        try cluster.startAgent("b", server: secondURL)
        let a = cluster.root("a"), b = cluster.root("b")

        for index in 0..<20 { try writeFile(a + "/from-a/f\(index).txt", "a \(index)") }
        for index in 0..<20 { try writeFile(b + "/from-b/f\(index).txt", "b \(index)") }
        try writeFile(a + "/big.bin", Data(randomData(2 << 20)))
        try await cluster.waitForConvergence("a", "b", timeout: 60) { $0.entries.count == 43 }
        try writeFile(b + "/from-a/f0.txt", "edited on b")
        try FileManager.default.removeItem(atPath: a + "/from-b/f1.txt")
        try await cluster.waitForConvergence("a", "b", timeout: 30) { $0.entries["from-b/f1.txt"] == nil && $0.entries.count == 42 }
        #expect(readFile(a + "/from-a/f0.txt") == "edited on b")

        // The first server dies; what it acknowledged is in the database, and b's server goes on.
        cluster.killServer()
        try writeFile(b + "/while-one-is-down.txt", "through the second server")
        try await waitUntil("the second server to hold b's new file", timeout: 30) {
            try cluster.serverRecords(server: secondURL).contains { $0.path == "SaveGames/while-one-is-down.txt" }
        }
        try cluster.restartServer()
        try await cluster.waitForConvergence("a", "b", timeout: 60) { $0.entries["while-one-is-down.txt"] != nil }
        // Both servers serve the same records.
        let one = try cluster.serverRecords().filter { !$0.deleted }.map(\.path).sorted()
        let two = try cluster.serverRecords(server: secondURL).filter { !$0.deleted }.map(\.path).sorted()
        #expect(one == two && one.count == 43)
    }

    @Test func anUploadStartedThroughOneServerIsFinishedThroughTheOtherBehindALoadBalancer() async throws {
        let database = try PostgresCluster.shared().createDatabase()
        let cluster = Cluster("sinki-balanced-upload")
        try cluster.startServer(extra: ["--database", database.url, "--behind-proxy"])
        let firstPort = cluster.serverPort
        let (second, secondURL) = try startSecondServer(cluster, database: database.url, extra: ["--behind-proxy"])
        defer { _ = second.stop() }
        let secondPort = try #require(Int(secondURL.split(separator: ":").last!))
        // One public address; the second server takes over when the first stops answering. A chunk's
        // POST cut off mid-body is never sent again by nginx (its body is streamed): the agent sends it again.
        let port = freePort()
        let nginx = try Nginx.start(cluster.directory, port: port, http: """
            upstream sync {
                server 127.0.0.1:\(firstPort) max_fails=1 fail_timeout=60s;
                server 127.0.0.1:\(secondPort) backup;
            }
            server {
                listen 127.0.0.1:\(port);
                \(Nginx.passing(to: "sync", extra: "proxy_next_upstream error timeout;"))
            }
            """)
        defer { _ = nginx.stop() }
        let front = "http://127.0.0.1:\(port)"
        let config = cluster.directory.child("slow.conf")
        try writeFile(config, "[transfer]\nmax-rate = 1MiB\n")
        try cluster.startAgent("a", server: front, extra: ["--config", config])
        try cluster.startAgent("b", server: secondURL)

        let big = Data(randomData(5 << 20))
        try writeFile(cluster.root("a") + "/big.bin", big)
        // Once some of its chunks are in the shared data folder, the server taking them dies.
        let chunks = try #require(cluster.serverData) + "/chunks"
        /// Bytes of the chunks the servers hold (named in their indexes).
        func received() -> Int { Int(ServerChunks(chunks).chunks.values.reduce(0) { $0 + $1.size }) }
        try waitUntilSync("some chunks to arrive", timeout: 30) { received() >= 1 << 20 }
        cluster.killServer()
        try #require(received() < big.count, "the first server was to die before the upload's end")

        try await cluster.waitForConvergence("a", "b", timeout: 60) { $0.entries["big.bin"] != nil }
        #expect(FileManager.default.contents(atPath: cluster.root("b") + "/big.bin") == big)
        // Its chunks went through both servers, into one store, and what was sent again is at most the
        // chunks the dying server was taking.
        let posts = Nginx.accessLog(cluster.directory).split(separator: "\n").filter { $0.hasPrefix("POST /v1/chunks/batch") }
        #expect(posts.contains { $0.hasSuffix("upstream=127.0.0.1:\(firstPort)") }, "\(posts)")
        #expect(posts.contains { $0.hasSuffix("upstream=127.0.0.1:\(secondPort)") }, "\(posts)")
        let log = try #require(cluster.agent("a")?.errors)
        let line = try #require(log.split(separator: "\n").last { $0.contains("uploaded \"SaveGames/big.bin\"") }, "\(log.suffix(3000))")
        let sent = try #require(Int(line.components(separatedBy: "chunk(s), ").last?.prefix { $0.isNumber } ?? ""))
        #expect(sent <= big.count + 4 * Int(ContentID.maxChunkSize), "\(line)")
    }
}

struct SecondServerFailed: Error, CustomStringConvertible {
    var log: String
    var description: String { "the second server exited: \(log)" }
}
