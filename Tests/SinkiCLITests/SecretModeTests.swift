import Foundation
import Glibc
import SinkiTestSupport
import Testing

/// Secrets on disk with loose modes (issue 24, item 12): the agent takes a token file others can read
/// with one warning naming it and the fix, and the server's database, which holds small files' content
/// and token hashes, is its owner's alone even in a data folder that existed before.
@Suite struct SecretModeTests {
    @Test func aTokenFileOthersCanReadIsTakenWithOneWarning() async throws {
        let cluster = Cluster("sinki-secret-mode")
        try cluster.startServer()
        let loose = try #require(try cluster.tokenFile(for: "a"))
        chmod(loose, 0o644)
        let a = try cluster.startAgent("a")
        let warnings = a.errors.split(separator: "\n").filter { $0.contains("can be read by others") }
        #expect(warnings.count == 1, "\(a.errors.suffix(2000))")
        // Named as the agent resolved it (an absolute, tidied path), with the fix.
        #expect(warnings.first?.contains("WARNING") == true && warnings.first?.contains("mode 644") == true)
        #expect(warnings.first?.contains("chmod 600 /") == true && warnings.first?.hasSuffix("/a/token") == true, "\(warnings)")
        // Taken all the same: the agent syncs.
        try cluster.startAgent("b")
        try writeFile(cluster.root("a") + "/x.save", "sent with a loose token file")
        try await cluster.waitForConvergence("a", "b", timeout: 20) { $0.entries["x.save"] != nil }
        #expect(try #require(cluster.agent("b")).errors.contains("can be read by others") == false, "b's token file is 0600")
    }

    /// The README's recipe (issue 25, item 10): the token goes straight where the agent reads it, 0600.
    @Test func tokenAddWritesTheTokenWhereTheAgentReadsItForItsOwnerAlone() async throws {
        let cluster = Cluster("sinki-token-output")
        try cluster.startServer()
        let config = cluster.directory.child("home") + "/.config/sinki"
        let path = config + "/token"
        let data = try #require(cluster.serverData)
        let add = try ChildProcess(sinkidExecutable(), ["serve", "token", "add", "owner", "--device", "b", "--data", data, "--output", path],
                                   logDirectory: cluster.directory.path, label: "token-output")
        #expect(add.waitForExit(timeout: 20) == 0, "\(add.errors)")
        #expect(add.output.contains("written to \(path) (mode 0600)"), "\(add.output)")
        var info = stat()
        #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(stat(config, &info) == 0 && info.st_mode & 0o777 == 0o700, "a folder made for the token is its owner's alone")
        let token = try #require(readFile(path)?.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(!token.isEmpty && !add.output.contains(token), "the token is written, not printed")
        // And it is a token the server takes: an agent with it syncs, with no warning about its mode.
        cluster.useTokenFile(path, for: "b")
        try cluster.startAgent("a")
        let b = try cluster.startAgent("b")
        try writeFile(cluster.root("a") + "/z.save", "to the agent with the written token")
        try await cluster.waitForConvergence("a", "b", timeout: 20) { $0.entries["z.save"] != nil }
        #expect(!b.errors.contains("can be read by others"))
    }

    @Test func theServersDatabaseIsItsOwnersAloneInAFolderThatExistedBefore() throws {
        let cluster = Cluster("sinki-secret-db")
        let data = cluster.directory.child("server-data")
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        // An older server's database, made under a loose mode.
        let old = data + "/records.db"
        #expect(FileManager.default.createFile(atPath: old, contents: nil, attributes: [.posixPermissions: 0o644]))
        try cluster.startServer()
        try cluster.startAgent("a")
        try writeFile(cluster.root("a") + "/y.save", "kept in records.db")
        try waitUntilSync("the record saved", timeout: 20) { try cluster.serverRecords().contains { $0.path == "SaveGames/y.save" } }
        for name in ["records.db", "records.db-wal", "records.db-shm"] where FileManager.default.fileExists(atPath: data + "/" + name) {
            var info = stat()
            #expect(stat(data + "/" + name, &info) == 0)
            #expect(info.st_mode & 0o777 == 0o600, "\(name) is \(String(info.st_mode & 0o777, radix: 8))")
        }
    }
}
