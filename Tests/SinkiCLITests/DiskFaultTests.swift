import Foundation
import SinkiRecord
import SinkiTestSupport
import Testing

/// Faults on the receiving agent's own disk (issue 11): a clear status naming the path and the cause,
/// no partial or temporary file left behind, no version lost, and recovery without a restart once
/// the cause is gone. Needs root (mount, chattr), as CI runs.
@Suite(.serialized) struct DiskFaultTests {
    /// Runs a system command the test needs, failing the test when it fails.
    @discardableResult
    static func system(_ cluster: Cluster, _ command: String, _ arguments: [String]) throws -> Int32 {
        let process = try ChildProcess(command, arguments, logDirectory: cluster.directory.path,
                                       label: "cmd-\(UInt64.random(in: 0...UInt64.max))")
        let code = process.waitForExit()
        #expect(code == 0, "\(command) \(arguments.joined(separator: " ")): \(process.errors)")
        return code
    }

    /// A tmpfs of `size` mounted as agent `name`'s root (unmounted by the returned closure).
    static func tmpfs(_ cluster: Cluster, _ name: String, size: String) throws -> () -> Void {
        let root = cluster.root(name)
        try system(cluster, "/usr/bin/mount", ["-t", "tmpfs", "-o", "size=\(size),mode=0755", "sinki-test", root])
        return { _ = try? ChildProcess("/usr/bin/umount", ["-l", root], logDirectory: cluster.directory.path, label: "umount").waitForExit() }
    }

    func statusText(_ cluster: Cluster, _ agent: String) throws -> String {
        try sinkid(["status", "--state", cluster.directory.child(agent) + "/state"], in: cluster.directory).output
    }

    /// Waits until `agent` lists `path` as not applied with `cause`; returns its reason.
    func waitNotApplied(_ cluster: Cluster, _ agent: String, _ path: String, cause: String) async throws -> String {
        var reason = ""
        try await waitUntil("\(agent) to list \(path) as not applied (\(cause))", timeout: 20) {
            guard case let .array(changes)? = try statusJSON(cluster, agent)["notApplied"]?["changes"],
                  let entry = changes.first(where: { $0["path"] == .string(path) }),
                  entry["cause"] == .string(cause), case let .string(text)? = entry["reason"] else { return false }
            reason = text
            return true
        }
        let status = try statusJSON(cluster, agent)
        #expect(status["agent"]?["state"] == .string("error"))
        #expect(status["remote"]?["upToDate"] == .bool(false))
        #expect(try statusText(cluster, agent).contains("not applied  \(path)  \(cause)"))
        return reason
    }

    /// Every name below `root`, sinkid's temporary files included (TreeSnapshot leaves those out).
    func allNames(_ root: String) -> [String] {
        (FileManager.default.enumerator(atPath: root)?.allObjects as? [String]) ?? []
    }

    func random(_ count: Int) throws -> Data {
        let handle = try #require(FileHandle(forReadingAtPath: "/dev/urandom"))
        defer { try? handle.close() }
        return try #require(try handle.read(upToCount: count))
    }

    @Test func aFullDiskHoldsTheChangeUntilSpaceIsFreed() async throws {
        let cluster = Cluster("sinki-disk-full")
        let unmount = try Self.tmpfs(cluster, "b", size: "3m")
        defer { unmount() }
        try cluster.startServer()
        try cluster.startAgent("a")
        try cluster.startAgent("b")
        let filler = try random(2 << 20)
        try writeFile(cluster.root("a") + "/filler.bin", filler)
        // (Not the only file: a root that empties is a safety stop, not a delete.)
        try writeFile(cluster.root("a") + "/keep.txt", "kept")
        try await cluster.waitForConvergence("a", "b", timeout: 20) { $0.entries["filler.bin"] != nil && $0.entries["keep.txt"] != nil }
        // 2 MiB used of 3: neither a 1.5 MiB file (through tus) nor a small one fits next to it.
        let big = try random(3 << 19)
        try writeFile(cluster.root("a") + "/big.bin", big)
        let reason = try await waitNotApplied(cluster, "b", "SaveGames/big.bin", cause: "no-space")
        #expect(reason.contains("No space left on device") && reason.contains("big.bin"), "\(reason)")
        #expect(!allNames(cluster.root("b")).contains { $0.contains(".sinki-tmp-") })
        #expect(!FileManager.default.fileExists(atPath: cluster.root("b") + "/big.bin"))

        // Freed on b itself: the deletion is an event there, and the change goes at once.
        try FileManager.default.removeItem(atPath: cluster.root("b") + "/filler.bin")
        try await cluster.waitForConvergence("a", "b", timeout: 20) { $0.entries["big.bin"] != nil && $0.entries["filler.bin"] == nil }
        #expect(FileManager.default.contents(atPath: cluster.root("b") + "/big.bin") == big)
        try await waitUntil("b up to date", timeout: 10) { try statusJSON(cluster, "b")["notApplied"]?["count"] == .int(0) }
    }

    @Test func anImmutableFileAndAFolderWithoutWritePermission() async throws {
        let cluster = Cluster("sinki-disk-perm")
        try cluster.startServer()
        try cluster.startAgent("a")
        // b without the capabilities that let root write anywhere, as an ordinary user's agent.
        try cluster.startAgent("b", prefix: ["/usr/bin/setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner,-linux_immutable",
                                             "--inh-caps=-all", "--"])
        try writeFile(cluster.root("a") + "/locked.save", "v1")
        try writeFile(cluster.root("a") + "/shut/keep.txt", "kept")
        try await cluster.waitForConvergence("a", "b", timeout: 10) { $0.entries.count == 3 }
        let lockedOnB = cluster.root("b") + "/locked.save"
        try Self.system(cluster, "/usr/bin/chattr", ["+i", lockedOnB])
        defer { _ = try? Self.system(cluster, "/usr/bin/chattr", ["-i", lockedOnB]) }
        try FileManager.default.setAttributes([.posixPermissions: 0o555], ofItemAtPath: cluster.root("b") + "/shut")

        try writeFile(cluster.root("a") + "/locked.save", "v2 from a")
        try writeFile(cluster.root("a") + "/shut/new.txt", "new from a")
        let locked = try await waitNotApplied(cluster, "b", "SaveGames/locked.save", cause: "permission")
        #expect(locked.contains("locked.save") && locked.contains("Operation not permitted"), "\(locked)")
        let shut = try await waitNotApplied(cluster, "b", "SaveGames/shut/new.txt", cause: "permission")
        #expect(shut.contains("shut") && shut.contains("Permission denied"), "\(shut)")
        #expect(readFile(lockedOnB) == "v1")
        #expect(!allNames(cluster.root("b")).contains { $0.contains(".sinki-tmp-") })
        // Both versions are still on a and on the server.
        #expect(readFile(cluster.root("a") + "/locked.save") == "v2 from a")

        // The causes go (each is an attribute change, an event on b): both arrive without a restart.
        try Self.system(cluster, "/usr/bin/chattr", ["-i", lockedOnB])
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: cluster.root("b") + "/shut")
        try await cluster.waitForConvergence("a", "b", timeout: 20) { $0.entries["shut/new.txt"] != nil }
        #expect(readFile(lockedOnB) == "v2 from a")
        #expect(readFile(cluster.root("b") + "/shut/new.txt") == "new from a")
        try await waitUntil("b up to date", timeout: 10) { try statusJSON(cluster, "b")["agent"]?["state"] == .string("up-to-date") }
    }

    @Test func aRootWhoseFileSystemGoesReadOnly() async throws {
        let cluster = Cluster("sinki-disk-ro")
        let unmount = try Self.tmpfs(cluster, "b", size: "16m")
        defer { unmount() }
        try cluster.startServer()
        try cluster.startAgent("a")
        try cluster.startAgent("b")
        try writeFile(cluster.root("a") + "/before.save", "before")
        try await cluster.waitForConvergence("a", "b", timeout: 10) { $0.entries["before.save"] != nil }
        try Self.system(cluster, "/usr/bin/mount", ["-o", "remount,ro", cluster.root("b")])
        try writeFile(cluster.root("a") + "/during.save", "written while b was read-only")
        try writeFile(cluster.root("a") + "/before.save", "edited while b was read-only")
        let reason = try await waitNotApplied(cluster, "b", "SaveGames/during.save", cause: "read-only")
        #expect(reason.contains("Read-only file system"), "\(reason)")
        _ = try await waitNotApplied(cluster, "b", "SaveGames/before.save", cause: "read-only")
        #expect(readFile(cluster.root("b") + "/before.save") == "before")

        // Made writable again: no event says so; the retries find it (within their capped backoff).
        try Self.system(cluster, "/usr/bin/mount", ["-o", "remount,rw", cluster.root("b")])
        try await cluster.waitForConvergence("a", "b", timeout: 30) { $0.entries["during.save"] != nil }
        #expect(readFile(cluster.root("b") + "/before.save") == "edited while b was read-only")
        #expect(!allNames(cluster.root("b")).contains { $0.contains(".sinki-tmp-") })
        try await waitUntil("b up to date", timeout: 10) { try statusJSON(cluster, "b")["agent"]?["state"] == .string("up-to-date") }
    }
}
