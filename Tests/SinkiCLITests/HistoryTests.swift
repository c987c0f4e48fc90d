import Foundation
import Glibc
import SinkiRecord
import SinkiSupport
import SinkiTestSupport
import Testing

/// Every version kept (issue 23) through real agents: `sinkid history`, `cat` and both kinds of
/// `restore`, on SQLite and on PostgreSQL; a folder rewritten by a process and synced to three agents
/// brought back exactly; a quota the agent meets and waits out, keeping its changes.
/// A `sinkid` command that failed, with what it said.
private struct CommandFailed: Error, CustomStringConvertible {
    var description: String
}

@Suite(.serialized) struct HistoryTests {
    static func mode(_ path: String) -> mode_t? {
        var info = stat()
        return stat(path, &info) == 0 ? info.st_mode & 0o777 : nil
    }

    static func bytes(_ path: String) -> [UInt8]? { FileManager.default.contents(atPath: path).map { Array($0) } }

    static func state(_ cluster: Cluster, _ agent: String) -> String { cluster.directory.child(agent) + "/state" }

    /// `sinkid ARGS` with its standard output as bytes (a `cat`).
    static func sinkidBytes(_ arguments: [String], in directory: TemporaryDirectory) throws -> (code: Int32, bytes: [UInt8], errors: String) {
        let process = try ChildProcess(sinkidExecutable(), arguments, logDirectory: directory.path, label: "cli-\(UInt64.random(in: 0...UInt64.max))")
        let code = process.waitForExit(timeout: 60)
        return (code, Array(FileManager.default.contents(atPath: process.outputPath) ?? Data()), process.errors)
    }

    /// The versions `sinkid history --json` lists, newest first: (version, size, deleted, sha256).
    static func history(_ cluster: Cluster, _ agent: String, _ path: String) throws -> [(version: Int64, size: Int64, deleted: Bool, sha256: String)] {
        let run = try sinkid(["history", path, "--json", "--state", state(cluster, agent)], in: cluster.directory)
        guard run.code == 0 else { throw CommandFailed(description: "sinkid history \(path): \(run.errors)") }
        guard case let .array(items)? = try run.json()["versions"] else { throw CommandFailed(description: "sinkid history \(path): \(run.output)") }
        return items.compactMap { item in
            guard case let .int(version)? = item["version"], case let .int(size)? = item["size"], case let .bool(deleted)? = item["deleted"],
                  case let .string(sha)? = item["sha256"], case .string? = item["time"], case .string? = item["device"] else { return nil }
            return (version, size, deleted, sha)
        }
    }

    /// A moment a little after now, as `--at` takes it, once the clock has passed it: every save before
    /// this call is before it, every one after is after.
    static func moment() async throws -> String {
        let at = Clock.now() + 20_000_000
        try await waitUntil("the clock to pass the moment") { Clock.now() > at + 20_000_000 }
        return Clock.iso8601(at)
    }

    @Test(arguments: [false, true])
    func aFileEditedFiveTimesAndDeletedHasSixVersionsAndEachComesBackWholeWithItsModeOnAnotherAgent(postgres: Bool) async throws {
        let database = postgres ? try PostgresCluster.shared().createDatabase() : nil
        defer { withExtendedLifetime(database) {} }
        let cluster = Cluster("sinki-history")
        try cluster.startServer(extra: database.map { ["--database", $0.url] } ?? [])
        try cluster.startAgent("a")
        try cluster.startAgent("b")
        let a = cluster.root("a"), b = cluster.root("b")
        let path = "SaveGames/slot/a.save"
        // Five versions: text, binary, one large enough to travel as chunks, and two more; each its own mode.
        let contents: [[UInt8]] = [Array("first save\n".utf8), randomData(3000), randomData(700_000), Array("fourth\n".utf8), randomData(50_000)]
        let modes: [mode_t] = [0o644, 0o600, 0o755, 0o640, 0o700]
        try FileManager.default.createDirectory(atPath: a + "/slot", withIntermediateDirectories: true)
        for (index, content) in contents.enumerated() {
            // Bytes and mode land together (one rename), so each edit is one version, not a save and a chmod.
            let staged = cluster.directory.child("staged-\(index)")
            try Data(content).write(to: URL(fileURLWithPath: staged))
            chmod(staged, modes[index])
            #expect(rename(staged, a + "/slot/a.save") == 0)
            try await waitUntil("edit \(index + 1) on the server", timeout: 30) {
                try cluster.serverRecords().contains { $0.path == path && $0.size == Int64(content.count) && $0.mode & 0o777 == modes[index] }
            }
        }
        try FileManager.default.removeItem(atPath: a + "/slot/a.save")
        try await waitUntil("the delete on the server", timeout: 30) { try cluster.serverRecords().contains { $0.path == path && $0.deleted } }
        try await waitUntil("the delete on b", timeout: 30) { !FileManager.default.fileExists(atPath: b + "/slot/a.save") }

        // Six versions, newest first: the delete, then the five edits.
        let versions = try Self.history(cluster, "b", path)
        #expect(versions.count == 6)
        #expect(versions.map(\.deleted) == [true, false, false, false, false, false])
        #expect(versions.dropFirst().map(\.size) == contents.reversed().map { Int64($0.count) })
        let text = try sinkid(["history", path, "--state", Self.state(cluster, "b")], in: cluster.directory)
        #expect(text.code == 0 && text.output.contains("6 version(s)") && text.output.contains("deleted  (current)"), "\(text.output)")

        // Each edit, restored from b, comes back byte for byte with its mode on both agents; cat says the same.
        let edits = Array(versions.dropFirst().reversed())
        for (index, content) in contents.enumerated() {
            let version = edits[index].version
            let cat = try Self.sinkidBytes(["cat", path, "--version", String(version), "--state", Self.state(cluster, "a")], in: cluster.directory)
            #expect(cat.code == 0 && cat.bytes == content, "cat of version \(version): \(cat.errors)")
            let restore = try sinkid(["restore", path, "--version", String(version), "--state", Self.state(cluster, "b")], in: cluster.directory)
            #expect(restore.code == 0 && restore.output.contains("restore \(path) to version \(version)"), "\(restore.output)\(restore.errors)")
            for root in [a, b] {
                try await waitUntil("version \(version) on \(root)", timeout: 30) {
                    Self.bytes(root + "/slot/a.save") == content && Self.mode(root + "/slot/a.save") == modes[index]
                }
            }
        }
        // --to keeps the current one and puts the old version beside it.
        let restoreTo = try sinkid(["restore", path, "--version", String(edits[0].version), "--to", "SaveGames/slot/first.save",
                                    "--state", Self.state(cluster, "a")], in: cluster.directory)
        #expect(restoreTo.code == 0, "\(restoreTo.errors)")
        try await cluster.waitForConvergence("a", "b", timeout: 30) { snapshot in snapshot.entries["slot/first.save"] != nil }
        #expect(Self.bytes(b + "/slot/first.save") == contents[0] && Self.bytes(b + "/slot/a.save") == contents[4])
        // Restores are versions too.
        #expect(try Self.history(cluster, "a", path).count == 11)
        // Unknown versions and a delete's content are refused, naming why.
        let unknown = try sinkid(["cat", path, "--version", "999999", "--state", Self.state(cluster, "a")], in: cluster.directory)
        #expect(unknown.code == 65 && unknown.errors.contains("no version 999999"), "\(unknown.errors)")
        let ofDelete = try sinkid(["cat", path, "--version", String(versions[0].version), "--state", Self.state(cluster, "a")], in: cluster.directory)
        #expect(ofDelete.code == 65 && ofDelete.errors.contains("delete"), "\(ofDelete.errors)")

        // A folder as it was at a moment: its edits undone, its delete undone, what came since removed.
        for name in ["one", "two", "three"] { try writeFile(a + "/docs/\(name).txt", "\(name) as it was") }
        try await cluster.waitForConvergence("a", "b", timeout: 30) { $0.entries["docs/three.txt"] != nil }
        let before = TreeSnapshot(a + "/docs")
        let at = try await Self.moment()
        try writeFile(a + "/docs/one.txt", "one rewritten")
        try FileManager.default.removeItem(atPath: a + "/docs/two.txt")
        try writeFile(a + "/docs/sub/new.txt", "made since")
        try await cluster.waitForConvergence("a", "b", timeout: 30) { $0.entries["docs/sub/new.txt"] != nil && $0.entries["docs/two.txt"] == nil }
        let dry = try sinkid(["restore", "SaveGames/docs/", "--at", at, "--dry-run", "--state", Self.state(cluster, "b")], in: cluster.directory)
        #expect(dry.code == 0 && dry.output.contains("would restore SaveGames/docs/one.txt") && dry.output.contains("would delete SaveGames/docs/sub"),
                "\(dry.output)\(dry.errors)")
        #expect(TreeSnapshot(b + "/docs") != before, "a dry run changed nothing")
        let folder = try sinkid(["restore", "SaveGames/docs/", "--at", at, "--state", Self.state(cluster, "b")], in: cluster.directory)
        #expect(folder.code == 0, "\(folder.errors)")
        try await waitUntil("docs/ as it was on both agents", timeout: 30) { TreeSnapshot(a + "/docs") == before && TreeSnapshot(b + "/docs") == before }
    }

    @Test func aFolderOfAThousandFilesRewrittenByAProcessComesBackExactlyOnThreeAgents() async throws {
        let cluster = Cluster("sinki-ransom")
        try cluster.startServer()
        for agent in ["a", "b", "c"] { try cluster.startAgent(agent) }
        let a = cluster.root("a"), b = cluster.root("b"), c = cluster.root("c")
        for index in 0..<1000 {
            try writeFile(a + "/photos/\(index % 10)/img\(index).jpg", Data(randomData(500 + index % 7 * 300)))
        }
        try writeFile(a + "/elsewhere.txt", "not in the folder")
        for other in ["b", "c"] {
            try await cluster.waitForConvergence("a", other, timeout: 120) { $0.entries.count == 1012 }
        }
        let original = TreeSnapshot(a + "/photos")
        let at = try await Self.moment()

        // On c, a process rewrites every file in place, deletes a few, and leaves a note.
        for index in 0..<1000 {
            let file = c + "/photos/\(index % 10)/img\(index).jpg"
            if index % 97 == 0 {
                try FileManager.default.removeItem(atPath: file)
            } else {
                let scrambled = Self.bytes(file)!.map { $0 ^ 0x5A }
                let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: file))
                try handle.write(contentsOf: Data(scrambled))
                try handle.close()
            }
        }
        try writeFile(c + "/photos/READ-ME-TO-DECRYPT.txt", "send coins")
        try writeFile(c + "/elsewhere.txt", "changed outside the folder, after the moment")
        for other in ["a", "b"] {
            try await cluster.waitForConvergence("c", other, timeout: 120) { snapshot in
                snapshot.entries["photos/READ-ME-TO-DECRYPT.txt"] != nil && snapshot.entries["photos/0/img0.jpg"] == nil
                    && snapshot.entries.filter { $0.key.hasPrefix("photos/") }.count == 1000 - 11 + 10 + 1
            }
        }
        #expect(TreeSnapshot(a + "/photos") != original)

        let restore = try sinkid(["restore", "SaveGames/photos/", "--at", at, "--state", Self.state(cluster, "a")], in: cluster.directory, timeout: 120)
        #expect(restore.code == 0, "\(restore.errors)")
        #expect(restore.output.contains("1000 path(s) restored, 1 deleted"), "\(restore.output.suffix(300))")
        for root in [a, b, c] {
            try await waitUntil("photos/ as it was in \(root)", timeout: 120, interval: 0.2) { TreeSnapshot(root + "/photos") == original }
        }
        // Outside the folder nothing went back; the rewritten versions and the note are history themselves.
        #expect(readFile(b + "/elsewhere.txt") == "changed outside the folder, after the moment")
        let versions = try Self.history(cluster, "b", "SaveGames/photos/1/img1.jpg")
        #expect(versions.count == 3 && versions[0].sha256 == versions[2].sha256 && versions[1].sha256 != versions[0].sha256)
        let note = try Self.history(cluster, "b", "SaveGames/photos/READ-ME-TO-DECRYPT.txt")
        #expect(note.map(\.deleted) == [true, false])
    }

    @Test func aSavePastTheQuotaWaitsQueuedAndStatusSaysServerStorageFull() async throws {
        let cluster = Cluster("sinki-quota")
        let server = try cluster.startServer()
        try cluster.startAgent("a")
        try cluster.startAgent("b")
        let a = cluster.root("a"), b = cluster.root("b")
        let data = try #require(cluster.serverData)
        try writeFile(a + "/small.txt", "fits")
        try await cluster.waitForConvergence("a", "b", timeout: 30) { $0.entries["small.txt"] != nil }
        let set = try sinkid(["serve", "user", "quota", Cluster.user, "64KiB", "--data", data], in: cluster.directory)
        #expect(set.code == 0 && set.output.contains("quota of \(Cluster.user): 64.0 KiB"), "\(set.output)\(set.errors)")

        // 200 KiB that do not compress: past the quota. The change waits on a, queued, and status says why.
        let big = randomData(200 << 10)
        try writeFile(a + "/big.bin", Data(big))
        var report: JSONValue = .null
        try await waitUntil("a's status to say the server's storage is full", timeout: 30) {
            report = try sinkid(["status", "--json", "--state", Self.state(cluster, "a")], in: cluster.directory).json()
            return report["server"]?["storageFull"] != nil && report["server"]?["storageFull"] != .null
        }
        let full = try #require(report["server"]?["storageFull"])
        guard case let .int(quota)? = full["quotaBytes"], case let .int(needed)? = full["neededBytes"], case let .int(live)? = full["liveBytes"],
              case let .string(since)? = full["since"], case let .string(retryAt)? = full["retryAt"] else {
            Issue.record("storageFull lacks its figures: \(full)")
            return
        }
        #expect(quota == 64 << 10 && needed > 200 << 10 && live > 0 && retryAt > since)
        guard case let .string(reason)? = report["agent"]?["reason"], case let .string(state)? = report["agent"]?["state"] else {
            Issue.record("no agent state")
            return
        }
        #expect(state == "error" && reason.contains("server storage full") && reason.contains("64.0 KiB") && reason.contains("kept"), "\(reason)")
        guard case let .int(pending)? = report["pending"]?["count"] else { Issue.record("no pending count"); return }
        #expect(pending == 1, "the change is kept queued, not dropped")
        let text = try sinkid(["status", "--state", Self.state(cluster, "a")], in: cluster.directory)
        #expect(text.output.contains("server storage full (507)"), "\(text.output)")
        #expect(!FileManager.default.fileExists(atPath: b + "/big.bin"))
        #expect(server.errors.contains("storage-full"))

        // The listing shows the usage; a larger quota and sinkid retry send the change at once.
        let list = try sinkid(["serve", "user", "list", "--data", data, "--json"], in: cluster.directory)
        guard case let .array(users)? = try list.json()["users"], let owner = users.first(where: { $0["name"] == .string(Cluster.user) }),
              case let .int(listedLive)? = owner["liveBytes"], case .int? = owner["historyBytes"] else {
            Issue.record("serve user list --json: \(list.output)")
            return
        }
        #expect(listedLive == live && owner["quotaBytes"] == .int(64 << 10))
        #expect(try sinkid(["serve", "user", "quota", Cluster.user, "none", "--data", data], in: cluster.directory).code == 0)
        #expect(try sinkid(["retry", "--state", Self.state(cluster, "a")], in: cluster.directory).code == 0)
        try await waitUntil("big.bin on b", timeout: 30) { Self.bytes(b + "/big.bin") == big }
        try await waitUntil("a's status to forget the refusal", timeout: 30) {
            try sinkid(["status", "--json", "--state", Self.state(cluster, "a")], in: cluster.directory).json()["server"]?["storageFull"] == .null
        }
        let after = try sinkid(["serve", "user", "list", "--data", data], in: cluster.directory)
        #expect(after.output.contains("\(Cluster.user)  since") && after.output.contains("quota none"), "\(after.output)")
    }

    @Test func historyCommandsRefuseBadInputWithTheirReasonsAndExitCodes() throws {
        let directory = TemporaryDirectory("sinki-history-usage")
        let state = directory.child("no-agent")
        func run(_ arguments: [String]) throws -> SinkidRun { try sinkid(arguments + ["--state", state], in: directory) }
        #expect(try run(["cat", "SaveGames/a"]).errors.contains("needs --version N"))
        #expect(try run(["cat", "SaveGames/a", "--version", "x"]).code == 64)
        #expect(try run(["restore", "SaveGames/a", "--version", "1", "--at", "1h"]).errors.contains("not both"))
        #expect(try run(["restore", "SaveGames/docs/", "--version", "1"]).errors.contains("needs --at TIME"))
        #expect(try run(["restore", "SaveGames/docs/", "--at", "yesterday"]).errors.contains("is not a time"))
        #expect(try run(["restore", "SaveGames/docs/", "--at", "2h", "--to", "SaveGames/x"]).errors.contains("--to is for one version"))
        #expect(try run(["history"]).code == 64)
        // Well formed, but no agent runs with that state folder: 3, as for the other control commands.
        let absent = try run(["history", "SaveGames/a"])
        #expect(absent.code == 3 && absent.errors.contains("start it with sinkid"), "\(absent.errors)")
    }
}
