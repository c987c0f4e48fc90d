import Foundation
import SinkiTestSupport
import Testing

/// Why a started `sinkid serve` is no use to the test.
private struct ServeFailed: Error, CustomStringConvertible {
    var description: String
}

/// `sinkid serve --database`: the built binary on the tests' PostgreSQL, with its accounts made by
/// `serve token add --database` beside it and a request through HTTP.
@Suite struct ServeOnPostgresTests {
    @Test func serveAndItsTokenCommandsUseTheDatabase() throws {
        let directory = TemporaryDirectory("sinki-serve-pg")
        let database = try PostgresCluster.shared().createDatabase()
        let data = directory.child("data")
        let added = try sinkid(["serve", "token", "add", "alice", "--device", "laptop", "--data", data, "--database", database.url], in: directory)
        #expect(added.code == 0, "\(added.errors)")
        let token = try #require(added.output.split(separator: "\n").last.map(String.init))

        let port = freePort()
        let server = try ChildProcess(sinkidExecutable(), ["serve", "--listen", "127.0.0.1:\(port)", "--data", data, "--database", database.url],
                                      logDirectory: directory.path, label: "serve")
        defer { server.stop() }
        try waitUntilSync("the server to say it listens", timeout: 20) {
            guard server.isRunning else { throw ServeFailed(description: "sinkid serve exited: \(server.errors)") }
            return server.errors.contains("listening on")
        }
        #expect(server.errors.contains("records in postgresql://sinki@127.0.0.1:"))
        // A user existed already (alice): no first token is made in the data folder.
        #expect(!FileManager.default.fileExists(atPath: data + "/first-token"))

        let curl = try ChildProcess("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Authorization: Bearer \(token)",
                                                      "http://127.0.0.1:\(port)/v1/changes"], logDirectory: directory.path, label: "curl")
        #expect(curl.waitForExit() == 0)
        #expect(curl.output == "200")

        let listed = try sinkid(["serve", "token", "list", "--data", data, "--database", database.url, "--json"], in: directory)
        #expect(listed.code == 0, "\(listed.errors)")
        #expect(listed.output.contains("\"alice\""))
    }
}
