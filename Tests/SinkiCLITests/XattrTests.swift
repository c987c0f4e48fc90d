import Foundation
import Glibc
import SinkiRecord
import SinkiTestSupport
import Testing

/// Extended attributes (issue 25, item 2): a setfattr alone is a change that crosses both ways without
/// the bytes moving (the receiving file keeps its inode); only the names `[transfer] xattrs` covers are
/// read and written, the others a record brings are carried along; what a receiving file system cannot
/// keep is listed under skipped with the reason while the bytes sync, and never sent back as a removal.
/// Every root is on a file system the test mounts (an ext4 image, ramfs): they need root, as CI runs.
@Suite(.serialized) struct XattrTests {
    /// Above the inline limit: the file travels as chunks.
    static let large = String(repeating: "chunked line\n", count: 40_000)

    /// Rewrites a file in place (same inode, its attributes kept), as an editor that saves in place does.
    static func rewrite(_ path: String, _ text: String) throws {
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.truncate(atOffset: 0)
        try handle.write(contentsOf: Data(text.utf8))
        try handle.close()
    }

    static func status(_ cluster: Cluster, _ agent: String) throws -> JSONValue { try statusJSON(cluster, agent) }

    static func upToDate(_ cluster: Cluster, _ agent: String) throws -> Bool {
        try status(cluster, agent)["agent"]?["state"] == .string("up-to-date")
    }

    /// The reason status gives for skipping `path`; nil when it is not listed.
    static func skipped(_ cluster: Cluster, _ agent: String, _ path: String) throws -> String? {
        let skipped = try status(cluster, agent)["skipped"]
        guard case let .array(paths)? = skipped?["paths"], case let .array(reasons)? = skipped?["reasons"],
              let index = paths.firstIndex(of: .string(path)), index < reasons.count, case let .string(reason) = reasons[index] else { return nil }
        return reason
    }

    static func serverXattrs(_ cluster: Cluster, _ path: String) throws -> ExtendedAttributes? {
        try cluster.serverRecords().first { $0.path == path && !$0.deleted }?.xattrs
    }

    /// Runs a system command the test needs, failing the test when it fails.
    static func system(_ cluster: Cluster, _ command: String, _ arguments: [String]) throws {
        let process = try ChildProcess(command, arguments, logDirectory: cluster.directory.path, label: "cmd-\(UInt64.random(in: 0...UInt64.max))")
        let code = process.waitForExit()
        #expect(code == 0, "\(command) \(arguments.joined(separator: " ")): \(process.errors)")
    }

    /// Mounts `type` (with `options`, from `source`) as agent `name`'s root; the returned closure unmounts it.
    static func mount(_ cluster: Cluster, _ name: String, type: String, options: String, source: String) throws -> () -> Void {
        let root = cluster.root(name)
        try system(cluster, "/usr/bin/mount", ["-t", type, "-o", options, source, root])
        return { _ = try? ChildProcess("/usr/bin/umount", ["-l", root], logDirectory: cluster.directory.path, label: "umount").waitForExit() }
    }

    /// An ext4 file system in a loop file of its own, with `blockSize`-byte blocks: a value larger than
    /// about one block cannot be kept (no `ea_inode`), whatever the machine's own disks are.
    static func ext4(_ cluster: Cluster, _ name: String, blockSize: Int) throws -> () -> Void {
        let image = cluster.directory.child(name + ".ext4")
        try system(cluster, "/usr/bin/truncate", ["-s", "32M", image])
        try system(cluster, "/usr/sbin/mkfs.ext4", ["-q", "-F", "-b", "\(blockSize)", "-O", "^ea_inode", image])
        let unmount = try mount(cluster, name, type: "ext4", options: "loop", source: image)
        // Its own folder, not the agent's to sync.
        try system(cluster, "/usr/bin/rmdir", [cluster.root(name) + "/lost+found"])
        return unmount
    }

    /// Puts the roots of agents `names` on ext4 images of their own, which keep user attributes whatever
    /// the machine's temporary folder is (a tmpfs before Linux 6.6 keeps none).
    static func attributed(_ cluster: Cluster, _ names: [String]) throws -> () -> Void {
        let unmounts = try names.map { try ext4(cluster, $0, blockSize: 4096) }
        return { for unmount in unmounts { unmount() } }
    }

    @Test func aSetfattrAloneCrossesBothWaysAndOnlyTheNamesThePatternCovers() async throws {
        let cluster = Cluster("sinki-xattrs")
        try cluster.startServer()
        let unmount = try Self.attributed(cluster, ["a", "b"])
        defer { unmount() }
        // a syncs only names under user.sync; b every user. name (the default).
        let conf = cluster.directory.child("a.conf")
        try writeFile(conf, "[transfer]\nxattrs = user.sync*\n")
        try cluster.startAgent("a", extra: ["--config", conf])
        try cluster.startAgent("b")
        let smallA = cluster.root("a") + "/small.txt", smallB = cluster.root("b") + "/small.txt"
        let bigA = cluster.root("a") + "/big.txt", bigB = cluster.root("b") + "/big.txt"
        try writeFile(smallA, "small\n")
        try writeFile(bigA, Self.large)
        try await waitUntil("both files on b", timeout: 20) { readFile(smallB) == "small\n" && readFile(bigB)?.count == Self.large.count }
        let before = (Xattrs.identity(smallB)?.inode, Xattrs.identity(bigB)?.inode)

        // Set on a: b takes it in place; user.private is outside a's pattern and never read there.
        for path in [smallA, bigA] { try Xattrs.set(path, "user.sync.test", "1") }
        try Xattrs.set(smallA, "user.private", "secret")
        try await waitUntil("user.sync.test on b", timeout: 20) {
            Xattrs.get(smallB, "user.sync.test") == "1" && Xattrs.get(bigB, "user.sync.test") == "1"
        }
        // Changed, then removed.
        for path in [smallA, bigA] { try Xattrs.set(path, "user.sync.test", "2") }
        try await waitUntil("the change on b", timeout: 20) {
            Xattrs.get(smallB, "user.sync.test") == "2" && Xattrs.get(bigB, "user.sync.test") == "2"
        }
        for path in [smallA, bigA] { try Xattrs.remove(path, "user.sync.test") }
        try await waitUntil("the removal on b", timeout: 20) { Xattrs.userNames(smallB).isEmpty && Xattrs.userNames(bigB).isEmpty }
        #expect((Xattrs.identity(smallB)?.inode, Xattrs.identity(bigB)?.inode) == before, "an attribute change rewrote the files on b")
        #expect(readFile(smallB) == "small\n" && readFile(bigB)?.count == Self.large.count)

        // The other way: b's set reaches a, without rewriting a's files either.
        let onA = (Xattrs.identity(smallA)?.inode, Xattrs.identity(bigA)?.inode)
        try Xattrs.set(bigB, "user.sync.back", "from b")
        // Outside a's pattern: a never writes it to its disk, but carries it in what it sends.
        try Xattrs.set(smallB, "user.other", "kept")
        try await waitUntil("user.sync.back on a", timeout: 20) { Xattrs.get(bigA, "user.sync.back") == "from b" }
        try await waitUntil("user.other on the server", timeout: 20) {
            try Self.serverXattrs(cluster, "SaveGames/small.txt")?["user.other"] == Array("kept".utf8)
        }
        try await waitUntil("a up to date", timeout: 20) { try Self.upToDate(cluster, "a") }
        #expect(Xattrs.get(smallA, "user.other") == nil)
        #expect((Xattrs.identity(smallA)?.inode, Xattrs.identity(bigA)?.inode) == onA, "an attribute change rewrote the files on a")

        // An edit of the bytes on a goes with b's attribute it carries, and a's own.
        try Xattrs.set(smallA, "user.sync.note", "edited")
        try Self.rewrite(smallA, "small, edited on a\n")
        try await waitUntil("the edit on b", timeout: 20) { readFile(smallB) == "small, edited on a\n" }
        try await waitUntil("both attributes on b", timeout: 20) {
            Xattrs.get(smallB, "user.other") == "kept" && Xattrs.get(smallB, "user.sync.note") == "edited"
        }
        #expect(try Self.serverXattrs(cluster, "SaveGames/small.txt").map { $0.names } == ["user.other", "user.sync.note"])
        // user.private never left a.
        #expect(try cluster.serverRecords().allSatisfy { $0.xattrs["user.private"] == nil })
        #expect(Xattrs.get(smallB, "user.private") == nil && Xattrs.get(smallA, "user.private") == "secret")

        // A full comparison finds the attributes the same as the server's.
        try await waitUntil("a up to date again", timeout: 20) { try Self.upToDate(cluster, "a") }
        let verify = try sinkid(["sync", "--verify", "--state", cluster.directory.child("a") + "/state"], in: cluster.directory, timeout: 60)
        #expect(verify.code == 0 && verify.output.contains("the same"), "\(verify.output)\(verify.errors)")
    }

    @Test func aFileSystemWithoutUserAttributesListsTheFileAsSkippedWhileItsBytesSync() async throws {
        let cluster = Cluster("sinki-xattrs-ramfs")
        try cluster.startServer()
        let unmountA = try Self.attributed(cluster, ["a"])
        defer { unmountA() }
        try cluster.startAgent("a")
        // ramfs keeps no extended attributes at all: every setxattr there answers ENOTSUP.
        let unmount = try Self.mount(cluster, "b", type: "ramfs", options: "mode=0755", source: "sinki-test")
        defer { unmount() }
        try cluster.startAgent("b")
        let smallA = cluster.root("a") + "/tagged.txt", smallB = cluster.root("b") + "/tagged.txt"
        let bigA = cluster.root("a") + "/tagged-big.txt", bigB = cluster.root("b") + "/tagged-big.txt"
        try writeFile(smallA, "tagged\n")
        try writeFile(bigA, Self.large)
        for path in [smallA, bigA] { try Xattrs.set(path, "user.test", "1") }
        try await waitUntil("the bytes on b", timeout: 30) { readFile(smallB) == "tagged\n" && readFile(bigB)?.count == Self.large.count }
        for path in ["SaveGames/tagged.txt", "SaveGames/tagged-big.txt"] {
            try await waitUntil("\(path) skipped on b", timeout: 20) { try Self.skipped(cluster, "b", path) != nil }
            let reason = try #require(try Self.skipped(cluster, "b", path))
            #expect(reason.contains("user.test") && reason.contains("keeps no user extended attributes"), "\(reason)")
        }
        let text = try sinkid(["status", "--state", cluster.directory.child("b") + "/state"], in: cluster.directory).output
        #expect(text.contains("SaveGames/tagged.txt: extended attributes user.test not kept here"), "\(text)")
        try await waitUntil("b up to date", timeout: 20) { try Self.upToDate(cluster, "b") }
        #expect(try Self.status(cluster, "b")["pending"]?["count"] == .int(0))

        // An edit of the bytes on b carries the attribute it could not keep: the server and a keep it.
        try Self.rewrite(smallB, "edited on b\n")
        try await waitUntil("b's edit on a", timeout: 20) { readFile(smallA) == "edited on b\n" }
        #expect(try Self.serverXattrs(cluster, "SaveGames/tagged.txt")?["user.test"] == Array("1".utf8))
        try await waitUntil("the attribute on a's new version", timeout: 20) { Xattrs.get(smallA, "user.test") == "1" }
        #expect(Xattrs.get(bigA, "user.test") == "1")
        #expect(try Self.serverXattrs(cluster, "SaveGames/tagged-big.txt")?["user.test"] == Array("1".utf8))
        // A change of the attribute on a crosses as far as it can: still skipped, still the bytes.
        try Xattrs.set(smallA, "user.test", "2")
        try await waitUntil("the server to hold 2", timeout: 20) {
            try Self.serverXattrs(cluster, "SaveGames/tagged.txt")?["user.test"] == Array("2".utf8)
        }
        try await waitUntil("b up to date again", timeout: 20) { try Self.upToDate(cluster, "b") }
        #expect(try Self.serverXattrs(cluster, "SaveGames/tagged.txt")?["user.test"] == Array("2".utf8))
        #expect(try Self.skipped(cluster, "b", "SaveGames/tagged.txt") != nil && readFile(smallB) == "edited on b\n")
    }

    @Test func aValueTheReceivingFileSystemCannotHoldIsSkippedAndTheRestCrosses() async throws {
        let cluster = Cluster("sinki-xattrs-size")
        try cluster.startServer()
        // a on ext4 with 4 KiB blocks holds a 3,000-byte value; b on ext4 with 1 KiB blocks cannot.
        let unmountA = try Self.ext4(cluster, "a", blockSize: 4096)
        defer { unmountA() }
        let unmountB = try Self.ext4(cluster, "b", blockSize: 1024)
        defer { unmountB() }
        try cluster.startAgent("a")
        try cluster.startAgent("b")
        let onA = cluster.root("a") + "/labelled.txt", onB = cluster.root("b") + "/labelled.txt"
        try writeFile(onA, "labelled\n")
        try await waitUntil("the file on b", timeout: 20) { readFile(onB) == "labelled\n" }
        let inode = Xattrs.identity(onB)?.inode
        try Xattrs.set(onA, "user.big", String(repeating: "v", count: 3000))
        try Xattrs.set(onA, "user.small", "fits")
        try await waitUntil("user.small on b", timeout: 20) { Xattrs.get(onB, "user.small") == "fits" }
        try await waitUntil("labelled.txt skipped on b", timeout: 20) { try Self.skipped(cluster, "b", "SaveGames/labelled.txt") != nil }
        let reason = try #require(try Self.skipped(cluster, "b", "SaveGames/labelled.txt"))
        #expect(reason.contains("user.big") && reason.contains("too large"), "\(reason)")
        #expect(Xattrs.get(onB, "user.big") == nil && Xattrs.identity(onB)?.inode == inode)
        try await waitUntil("b up to date", timeout: 20) { try Self.upToDate(cluster, "b") }
        // Nothing went back: the server and a keep the large value.
        #expect(try Self.serverXattrs(cluster, "SaveGames/labelled.txt")?["user.big"]?.count == 3000)
        #expect(Xattrs.get(onA, "user.big")?.count == 3000)
        // Once the value is one b can hold, it crosses and the path is no longer skipped.
        try Xattrs.set(onA, "user.big", "smaller now")
        try await waitUntil("user.big on b", timeout: 20) { Xattrs.get(onB, "user.big") == "smaller now" }
        try await waitUntil("no longer skipped", timeout: 20) { try Self.skipped(cluster, "b", "SaveGames/labelled.txt") == nil }
    }

    /// Past the bounds: a file with more attributes than a record carries sends the first 64 by name, and
    /// is listed as skipped on its own device with the name left out; its bytes and the rest sync. Once it
    /// is back within them, the last one crosses and the path leaves the list.
    @Test func attributesPastTheCountAreNotSentAndTheFileIsListedAsSkipped() async throws {
        let cluster = Cluster("sinki-xattrs-bounds")
        try cluster.startServer()
        let unmount = try Self.attributed(cluster, ["a", "b"])
        defer { unmount() }
        try cluster.startAgent("a")
        try cluster.startAgent("b")
        let onA = cluster.root("a") + "/many.txt", onB = cluster.root("b") + "/many.txt"
        try writeFile(onA, "many\n")
        try await waitUntil("the file on b", timeout: 20) { readFile(onB) == "many\n" }
        let names = (0...ExtendedAttributes.Limits.count).map { "user.n" + String(1000 + $0).dropFirst() }
        for name in names { try Xattrs.set(onA, name, "v") }
        let sent = Array(names.prefix(ExtendedAttributes.Limits.count)), over = names[ExtendedAttributes.Limits.count]
        try await waitUntil("64 attributes on b", timeout: 20) { Xattrs.userNames(onB) == sent }
        try await waitUntil("many.txt skipped on a", timeout: 20) { try Self.skipped(cluster, "a", "SaveGames/many.txt") != nil }
        let reason = try #require(try Self.skipped(cluster, "a", "SaveGames/many.txt"))
        #expect(reason.contains(over) && reason.contains("is not sent"), "\(reason)")
        #expect(try Self.serverXattrs(cluster, "SaveGames/many.txt")?.names == sent)
        #expect(readFile(onB) == "many\n" && Xattrs.get(onB, over) == nil)
        // One fewer: the last fits, and nothing is skipped any more.
        try Xattrs.remove(onA, names[0])
        try await waitUntil("\(over) on b", timeout: 20) { Xattrs.get(onB, over) == "v" && Xattrs.get(onB, names[0]) == nil }
        try await waitUntil("no longer skipped", timeout: 20) { try Self.skipped(cluster, "a", "SaveGames/many.txt") == nil }
        #expect(try Self.serverXattrs(cluster, "SaveGames/many.txt")?.names == Array(names.dropFirst()))
    }

    /// An agent's database of schema 13 (trees without attributes) upgrades in place: an attribute set
    /// while that schema ran (its ctime taken in, the attribute not) is read at the start and sent;
    /// nothing else moves.
    @Test func aStateOfSchemaThirteenUpgradesAndSendsASetfattrItCouldNotSee() async throws {
        let cluster = Cluster("sinki-xattrs-upgrade")
        try cluster.startServer()
        let unmount = try Self.attributed(cluster, ["a", "b"])
        defer { unmount() }
        try cluster.startAgent("a")
        try cluster.startAgent("b")
        let onA = cluster.root("a") + "/tool.txt", onB = cluster.root("b") + "/tool.txt"
        try writeFile(onA, "a tool\n")
        try writeFile(cluster.root("a") + "/plain.txt", "no attributes")
        try await cluster.waitForConvergence("a", "b", timeout: 20) { $0.entries.count == 2 }
        #expect(cluster.stopAgent("b") == 0)
        try Xattrs.set(onB, "user.test", "set under schema 13")
        let identity = try #require(Xattrs.identity(onB))
        // Schema 13 as that release made it, its Local entry of tool.txt taken in after the setfattr:
        // no walk would look at the file again.
        try cluster.stateScript("b", OldStateSchemas.thirteen + """
            UPDATE tree SET l_ctime = \(identity.ctime) WHERE path = 'SaveGames/tool.txt';
            """)
        let b = try cluster.startAgent("b")
        try await waitUntil("b's attribute on a", timeout: 20) { Xattrs.get(onA, "user.test") == "set under schema 13" }
        try await waitUntil("b up to date") { try Self.upToDate(cluster, "b") }
        #expect(Xattrs.identity(onA) != nil && readFile(onA) == "a tool\n")
        #expect(Xattrs.userNames(cluster.root("a") + "/plain.txt").isEmpty && Xattrs.userNames(cluster.root("b") + "/plain.txt").isEmpty)
        #expect(!b.errors.contains("ERROR"), "\(b.errors.suffix(2000))")
        #expect(try Self.status(cluster, "b")["pending"]?["count"] == .int(0))
    }
}
