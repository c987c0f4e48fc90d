import Foundation
import Glibc
import SinkiRecord
import SinkiTestSupport
import Testing

/// Modes (issue 25, item 1): a chmod alone is a change that crosses, each machine keeps a mode within
/// its own umask without sending back what it could not keep, and `sync --verify` compares modes.
@Suite(.serialized) struct ModeTests {
    static func mode(_ path: String) -> mode_t? {
        var info = stat()
        return stat(path, &info) == 0 ? info.st_mode & 0o777 : nil
    }

    static func inode(_ path: String) -> ino_t? {
        var info = stat()
        return stat(path, &info) == 0 ? info.st_ino : nil
    }

    @Test func aChmodAloneCrossesWithinEachUmaskAndNothingComesBack() async throws {
        let cluster = Cluster("sinki-modes")
        try cluster.startServer()
        try cluster.startAgent("a")
        // b runs under umask 077: it keeps only the owner's bits of whatever mode comes.
        try cluster.startAgent("b", prefix: ["/bin/sh", "-c", "umask 077 && exec \"$0\" \"$@\""])
        let onA = cluster.root("a") + "/run.sh", onB = cluster.root("b") + "/run.sh"
        let large = String(repeating: "echo large\n", count: 200_000)  // above the inline limit: chunked
        let bigA = cluster.root("a") + "/big.sh", bigB = cluster.root("b") + "/big.sh"
        try writeFile(onA, "#!/bin/sh\necho hi\n")
        try writeFile(bigA, large)
        chmod(onA, 0o644)
        chmod(bigA, 0o644)
        try await waitUntil("both files on b", timeout: 20) { readFile(onB) != nil && readFile(bigB)?.count == large.count }
        #expect(Self.mode(onB) == 0o600 && Self.mode(bigB) == 0o600, "b keeps 0644 within its umask")
        let before = (Self.inode(onB), Self.inode(bigB))

        // A chmod alone on a: b takes it (within its umask), without the bytes coming again.
        chmod(onA, 0o755)
        chmod(bigA, 0o755)
        try await waitUntil("the modes on b", timeout: 20) { Self.mode(onB) == 0o700 && Self.mode(bigB) == 0o700 }
        #expect((Self.inode(onB), Self.inode(bigB)) == before, "a mode-only change rewrote the files on b")
        try await waitUntil("the server's records to say 0755", timeout: 20) {
            try cluster.serverRecords().filter { $0.path.hasSuffix(".sh") }.allSatisfy { $0.mode & 0o777 == 0o755 }
        }
        // b's 0700 is 0755 as b can keep it: nothing goes back, and a keeps its 0755.
        try await waitUntil("b up to date") { try agentState(cluster, "b") == "up-to-date" }
        try await waitUntil("a up to date") { try agentState(cluster, "a") == "up-to-date" }
        #expect(Self.mode(onA) == 0o755 && Self.mode(bigA) == 0o755)
        #expect(try cluster.serverRecords().filter { $0.path.hasSuffix(".sh") }.allSatisfy { $0.mode & 0o777 == 0o755 })

        // And back the other way: a chmod on b reaches a.
        chmod(onB, 0o600)
        try await waitUntil("b's chmod on a", timeout: 20) { Self.mode(onA) == 0o600 }
        #expect(readFile(onA) == "#!/bin/sh\necho hi\n")

        // A full comparison finds nothing more to do: the modes agree with the server.
        try await waitUntil("a up to date again") { try agentState(cluster, "a") == "up-to-date" }
        let verify = try sinkid(["sync", "--verify", "--state", cluster.directory.child("a") + "/state"], in: cluster.directory, timeout: 60)
        #expect(verify.code == 0 && verify.output.contains("the same"), "\(verify.output)\(verify.errors)")
    }

    /// An agent's database of schema 10 (trees without modes) upgrades in place: a chmod made before
    /// the upgrade, which that schema could not see, is sent; nothing else moves.
    @Test func aStateOfSchemaTenUpgradesAndSendsAChmodItCouldNotSee() async throws {
        let cluster = Cluster("sinki-modes-upgrade")
        try cluster.startServer()
        try cluster.startAgent("a")
        try cluster.startAgent("b")
        let onA = cluster.root("a") + "/tool.sh", onB = cluster.root("b") + "/tool.sh"
        try writeFile(onA, "#!/bin/sh\n")
        try writeFile(cluster.root("a") + "/plain.txt", "stays 0644")
        chmod(onA, 0o644)
        try await cluster.waitForConvergence("a", "b", timeout: 20) { $0.entries.count == 2 }
        #expect(cluster.stopAgent("b") == 0)
        chmod(onB, 0o755)
        // Schema 10 as that release made it: no mode columns, work indexes on content alone.
        try cluster.stateScript("b", OldStateSchemas.thirteen + """
            DROP INDEX tree_local_work; DROP INDEX tree_remote_work; DROP INDEX tree_new_content;
            DROP TRIGGER IF EXISTS tree_counted_in; DROP TRIGGER IF EXISTS tree_counted_out; DROP TRIGGER IF EXISTS tree_counted_again;
            ALTER TABLE tree DROP COLUMN l_perm; ALTER TABLE tree DROP COLUMN s_perm; ALTER TABLE tree DROP COLUMN r_perm;
            ALTER TABLE tree DROP COLUMN r_incomplete;
            CREATE INDEX tree_local_work ON tree(path) WHERE ignored = 0 AND NOT (l_kind IS s_kind AND l_hash = s_hash);
            CREATE INDEX tree_remote_work ON tree(path) WHERE ignored = 0 AND NOT (r_tag = s_tag AND r_kind IS s_kind AND r_hash = s_hash);
            CREATE INDEX tree_new_content ON tree(l_hash) WHERE l_kind IN (0, 2) AND NOT (l_kind IS s_kind AND l_hash = s_hash);
            CREATE TABLE sent_ten(path TEXT NOT NULL, kind INTEGER NOT NULL, hash TEXT NOT NULL, PRIMARY KEY(path, kind, hash)) WITHOUT ROWID;
            INSERT INTO sent_ten SELECT path, kind, hash FROM sent; DROP TABLE sent; ALTER TABLE sent_ten RENAME TO sent;
            PRAGMA user_version = 10;
            """)
        let b = try cluster.startAgent("b")
        try await waitUntil("b's chmod on a", timeout: 20) { Self.mode(onA) == 0o755 }
        try await waitUntil("b up to date") { try agentState(cluster, "b") == "up-to-date" }
        #expect(Self.mode(cluster.root("a") + "/plain.txt") == 0o644 && Self.mode(cluster.root("b") + "/plain.txt") == 0o644)
        #expect(!b.errors.contains("ERROR"), "\(b.errors.suffix(2000))")
        // The upgraded trees count nothing pending.
        let status = try sinkid(["status", "--json", "--state", cluster.directory.child("b") + "/state"], in: cluster.directory)
        #expect(try status.json()["pending"]?["count"] == .int(0))
    }

    func agentState(_ cluster: Cluster, _ agent: String) throws -> String? {
        let run = try sinkid(["status", "--json", "--state", cluster.directory.child(agent) + "/state"], in: cluster.directory)
        guard case let .string(state)? = try run.json()["agent"]?["state"] else { return nil }
        return state
    }
}
