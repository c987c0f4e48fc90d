import Foundation
import SinkiRecord
import SinkiTestSupport
import Testing

/// The watcher end to end (issue 3): real inotify on real folders, two agents, one server.
@Suite(.serialized) struct WatchingTests {
    func pair(_ label: String, extra: [String] = []) async throws -> Cluster {
        let cluster = Cluster(label)
        try cluster.startServer()
        try cluster.startAgent("a", extra: extra)
        try cluster.startAgent("b", extra: extra)
        return cluster
    }

    @Test func directoriesCreatedLateRaceTheirFirstFiles() async throws {
        let cluster = try await pair("sinki-late")
        let a = cluster.root("a")
        for index in 0..<40 {
            // The file lands before the agent can have watched the folders it is in.
            try FileManager.default.createDirectory(atPath: a + "/d\(index)/e/f", withIntermediateDirectories: true)
            _ = FileManager.default.createFile(atPath: a + "/d\(index)/e/f/x.txt", contents: Data("deep \(index)".utf8))
        }
        try await cluster.waitForConvergence("a", "b", timeout: 5) { $0.entries.count == 40 * 4 }
    }

    /// Two names that differ only in normalization, written in one moment (one watcher batch), are two
    /// files on the other side: the batch's paths are told apart by their bytes, not as Strings.
    @Test func twoNamesAlikeButNotByteForByteWrittenAtOnceBothCross() async throws {
        let cluster = try await pair("sinki-normalization")
        let a = cluster.root("a"), b = cluster.root("b")
        let composed = "/caf\u{E9}.txt", decomposed = "/cafe\u{301}.txt"
        #expect(writeInPlace(a + composed, "composed") && writeInPlace(a + decomposed, "decomposed"))
        try await waitUntil("both names on b", timeout: 10) {
            bytes(b + composed) == Array("composed".utf8) && bytes(b + decomposed) == Array("decomposed".utf8)
        }
    }

    /// A file's bytes, opened by the very bytes of its name (nil: none there).
    func bytes(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = read(fd, &buffer, buffer.count)
        return count < 0 ? nil : Array(buffer[..<count])
    }

    @Test func renamingADirectoryOfTenThousandFilesReadsAndSendsNothingAgain() async throws {
        let cluster = try await pair("sinki-rename")
        let a = cluster.root("a"), b = cluster.root("b")
        for directory in 0..<100 {
            let folder = a + "/tree/d\(directory)"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            for file in 0..<100 { _ = FileManager.default.createFile(atPath: folder + "/f\(file).bin", contents: Data(repeating: UInt8(file), count: 512 + directory)) }
        }
        try writeFile(a + "/single.txt", "one file")
        try await cluster.waitForConvergence("a", "b", timeout: 60) { $0.entries.count == 10_000 + 100 + 1 + 1 }
        let inodeBefore = try #require(FileManager.default.attributesOfItem(atPath: b + "/tree/d7/f7.bin")[.systemFileNumber] as? Int)
        let logBefore = cluster.agent("a")?.errors.count ?? 0

        try FileManager.default.moveItem(atPath: a + "/tree", toPath: a + "/renamed tree")
        try FileManager.default.moveItem(atPath: a + "/single.txt", toPath: a + "/renamed.txt")
        try await cluster.waitForConvergence("a", "b", timeout: 30) { $0.entries["renamed tree/d99/f99.bin"] != nil && $0.entries["tree"] == nil && $0.entries["renamed.txt"] != nil }

        // The sender read nothing again: the rows moved, the server copied the content it had.
        let log = String(cluster.agent("a")?.errors.dropFirst(logBefore) ?? "")
        #expect(log.contains("moved 10101 path(s) from \"SaveGames/tree\" to \"SaveGames/renamed tree\" without reading them"))
        let reads = log.components(separatedBy: "\n").filter { $0.contains("replica: absorb") }.compactMap { Int($0.components(separatedBy: "read ").last ?? "") }
        #expect(reads.reduce(0, +) == 0, "the sender read \(reads.reduce(0, +)) files again")
        // The old paths become tombstones once their new paths are accepted; b renamed its folder as a
        // whole on the first record, so the trees agree before the last of them is answered.
        var records: [Record] = []
        try await waitUntil("the old paths' tombstones on the server", timeout: 30) {
            records = try cluster.serverRecords()
            return records.filter { $0.path.hasPrefix("SaveGames/tree/") || $0.path == "SaveGames/single.txt" }.allSatisfy { $0.deleted }
        }
        let moved = records.filter { $0.path.hasPrefix("SaveGames/renamed tree/") && !$0.deleted }
        #expect(moved.count == 10_100)
        #expect(moved.allSatisfy { $0.movedFrom?.hasPrefix("SaveGames/tree/") == true })
        #expect(records.first { $0.path == "SaveGames/renamed.txt" }?.movedFrom == "SaveGames/single.txt")
        // The receiver renamed its own copy instead of writing the files again.
        let inodeAfter = try #require(FileManager.default.attributesOfItem(atPath: b + "/renamed tree/d7/f7.bin")[.systemFileNumber] as? Int)
        #expect(inodeAfter == inodeBefore)
    }

    @Test func editorsAtomicSavesLeaveNoTraceOfTheirTemporaryNames() async throws {
        let cluster = try await pair("sinki-editors")
        let a = cluster.root("a")
        try writeFile(a + "/notes.txt", "first draft\n")
        try writeFile(a + "/save.dat", "level 1")
        try await cluster.waitForConvergence("a", "b") { $0.entries["save.dat"] != nil && $0.entries["notes.txt"] != nil }

        // vim (backupcopy=no): probe 4913, rename to notes.txt~, write anew, delete the backup.
        _ = FileManager.default.createFile(atPath: a + "/4913", contents: nil)
        try FileManager.default.removeItem(atPath: a + "/4913")
        try FileManager.default.moveItem(atPath: a + "/notes.txt", toPath: a + "/notes.txt~")
        _ = FileManager.default.createFile(atPath: a + "/notes.txt", contents: Data("second draft\n".utf8))
        try FileManager.default.removeItem(atPath: a + "/notes.txt~")
        // A tool writing .name.tmpXXXX and renaming it over the target.
        _ = FileManager.default.createFile(atPath: a + "/.save.dat.tmp4711", contents: Data("level 2".utf8))
        try FileManager.default.moveItem(atPath: a + "/.save.dat.tmp4711", toPath: a + "/save.dat.swap-in")
        _ = rename(a + "/save.dat.swap-in", a + "/save.dat")

        try await cluster.waitForConvergence("a", "b") { readFile(cluster.root("b") + "/notes.txt") == "second draft\n" && $0.entries["save.dat"]?.hasPrefix("file:7:") == true }
        // Once the held names have been looked at, the server has never heard of them, not even as tombstones.
        try await waitUntil("the held temporary names to be looked at", timeout: 3) {
            let log = cluster.agent("a")?.errors ?? ""
            return log.contains("4913") && log.contains("notes.txt~") && log.contains(".save.dat.tmp4711")
        }
        let names = try cluster.serverRecords().map(\.path)
        for temporary in ["SaveGames/4913", "SaveGames/notes.txt~", "SaveGames/.save.dat.tmp4711"] {
            #expect(!names.contains(temporary), "the server has a record of \(temporary)")
        }
    }

    @Test func ignoreRulesWithNegationAndTheirFileSyncs() async throws {
        let cluster = Cluster("sinki-ignore")
        try cluster.startServer()
        let a = cluster.root("a")
        try writeFile(a + "/.sinkiignore", "# build output\n*.log\n!keep.log\nbuild/\n/top-only.txt\n")
        try cluster.startAgent("a")
        try cluster.startAgent("b")
        try writeFile(a + "/drop.log", "noise")
        try writeFile(a + "/keep.log", "signal")
        try writeFile(a + "/build/out.o", "binary")
        try writeFile(a + "/top-only.txt", "ignored at the top")
        try writeFile(a + "/sub/top-only.txt", "not ignored below")
        try writeFile(a + "/ok.txt", "synced")
        try await waitUntil("b to get the synced ones", timeout: 3) {
            readFile(cluster.root("b") + "/ok.txt") == "synced" && readFile(cluster.root("b") + "/sub/top-only.txt") != nil
                && readFile(cluster.root("b") + "/keep.log") == "signal"
        }
        let names = Set(try cluster.serverRecords().map(\.path))
        #expect(names.contains("SaveGames/.sinkiignore"))
        for ignored in ["SaveGames/drop.log", "SaveGames/build", "SaveGames/build/out.o", "SaveGames/top-only.txt"] {
            #expect(!names.contains(ignored), "\(ignored) reached the server")
        }
        #expect(readFile(cluster.root("b") + "/.sinkiignore")?.contains("!keep.log") == true)
        // Status counts what a whole scan left out: drop.log, build/ (once) and top-only.txt.
        cluster.stopAgent("a")
        try cluster.startAgent("a")
        try await waitUntil("a's status to count the ignored entries", timeout: 10) {
            let run = try sinkid(["status", "--json", "--state", cluster.directory.child("a") + "/state"], in: cluster.directory)
            return (try? run.json()["ignored"]?["count"]) == .int(3)
        }
    }

    @Test func symlinksTravelAsLinksAndFifosAreSkipped() async throws {
        let cluster = try await pair("sinki-links")
        let a = cluster.root("a"), b = cluster.root("b")
        try writeFile(a + "/target.txt", "pointed at")
        try FileManager.default.createSymbolicLink(atPath: a + "/link", withDestinationPath: "target.txt")
        try FileManager.default.createSymbolicLink(atPath: a + "/outside", withDestinationPath: "/etc")
        #expect(mkfifo(a + "/pipe", 0o644) == 0)
        try await cluster.waitForConvergence("a", "b") { $0.entries["outside"] != nil && $0.entries["link"] != nil } 
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: b + "/link") == "target.txt")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: b + "/outside") == "/etc")
        #expect(!FileManager.default.fileExists(atPath: b + "/pipe"))
        #expect(!(try cluster.serverRecords().map(\.path)).contains("SaveGames/pipe"))
        #expect(cluster.agent("a")?.errors.contains("it is a fifo, socket or device") == true)
    }

    @Test func movesIntoAndOutOfARootAreCreatesAndDeletes() async throws {
        let cluster = try await pair("sinki-inout")
        let a = cluster.root("a"), b = cluster.root("b")
        let outside = cluster.directory.child("outside")
        try writeFile(outside + "/incoming.txt", "from outside")
        try writeFile(a + "/leaving.txt", "goes away")
        try await cluster.waitForConvergence("a", "b") { $0.entries["leaving.txt"] != nil }
        try FileManager.default.moveItem(atPath: outside + "/incoming.txt", toPath: a + "/incoming.txt")
        try FileManager.default.moveItem(atPath: a + "/leaving.txt", toPath: outside + "/leaving.txt")
        try await cluster.waitForConvergence("a", "b") { $0.entries["incoming.txt"] != nil && $0.entries["leaving.txt"] == nil }
        #expect(!FileManager.default.fileExists(atPath: b + "/leaving.txt"))
    }

    @Test func aFileRenamedWhileTheAgentWasStoppedIsStillAMove() async throws {
        let cluster = try await pair("sinki-offline-move")
        let a = cluster.root("a")
        try writeFile(a + "/before.dat", String(repeating: "payload ", count: 1000))
        try await cluster.waitForConvergence("a", "b") { $0.entries["before.dat"] != nil }
        cluster.stopAgent("a")
        try FileManager.default.moveItem(atPath: a + "/before.dat", toPath: a + "/after.dat")
        try cluster.startAgent("a")
        try await cluster.waitForConvergence("a", "b") { $0.entries["after.dat"] != nil && $0.entries["before.dat"] == nil }
        #expect(try cluster.serverRecords().first { $0.path == "SaveGames/after.dat" }?.movedFrom == "SaveGames/before.dat")
    }

    @Test func aFileStillBeingWrittenIsNeverSentHalfDone() async throws {
        let cluster = try await pair("sinki-slow-writer")
        let a = cluster.root("a"), b = cluster.root("b")
        // Created and written through one descriptor: never closed until the whole file is there.
        let fd = open(a + "/growing.bin", O_WRONLY | O_CREAT | O_EXCL, 0o644)
        #expect(fd >= 0)
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: false)
        var seenPartial = false
        for chunk in 0..<20 {
            handle.write(Data(repeating: UInt8(chunk), count: 4096))
            // Mostly shorter than the 50 ms quiet delay, and once much longer: a pause with the
            // descriptor still open is not a finished file (the agent asks the kernel for a lease).
            try await Task.sleep(nanoseconds: chunk == 10 ? 400_000_000 : 10_000_000)
            if let size = (try? FileManager.default.attributesOfItem(atPath: b + "/growing.bin"))?[.size] as? Int, size != 20 * 4096 { seenPartial = true }
        }
        try handle.close()
        try await cluster.waitForConvergence("a", "b") { $0.entries["growing.bin"]?.hasPrefix("file:81920:") == true }
        #expect(!seenPartial)
    }
}

/// Safety stops and the inotify watch limit.
@Suite(.serialized) struct WatchSafetyTests {
    @Test func aRootThatDisappearsOrEmptiesSendsNoMassDelete() async throws {
        let cluster = Cluster("sinki-safety")
        try cluster.startServer()
        try cluster.startAgent("a")
        try cluster.startAgent("b")
        let a = cluster.root("a"), b = cluster.root("b")
        for index in 0..<20 { try writeFile(a + "/f\(index).txt", "file \(index)") }
        try await cluster.waitForConvergence("a", "b") { $0.entries.count == 20 }

        // Emptied while the agent is stopped: found empty at start.
        cluster.stopAgent("a")
        for index in 0..<20 { try FileManager.default.removeItem(atPath: a + "/f\(index).txt") }
        try cluster.startAgent("a")
        try await waitUntil("a safety stop", timeout: 5) { cluster.agent("a")?.errors.contains("safety stop") ?? false }
        #expect(cluster.agent("a")?.errors.contains("the root folder is empty but 20 entries are synced from it") == true)

        // And the folder removed while it runs.
        try FileManager.default.removeItem(atPath: a)
        try await waitUntil("a to notice", timeout: 5) { (cluster.agent("a")?.errors.components(separatedBy: "safety stop").count ?? 0) >= 2 || cluster.agent("a")?.errors.contains("deleted, moved away or unmounted") == true }
        let deleted = try cluster.serverRecords().filter { $0.deleted && $0.path.hasPrefix("SaveGames/f") }.map(\.path)
        #expect(deleted.isEmpty, "tombstones reached the server: \(deleted)")
        #expect(TreeSnapshot(b).entries.count == 20)
    }

    @Test func theWatchLimitIsReportedWithTheSysctlAndUnwatchedFoldersStillSync() async throws {
        let cluster = Cluster("sinki-limit")
        try cluster.startServer()
        let a = cluster.root("a")
        for index in 0..<12 { try FileManager.default.createDirectory(atPath: a + "/dir\(index)", withIntermediateDirectories: true) }
        let config = cluster.directory.child("fast-rescan.conf")
        try writeFile(config, "[watch]\nrescan = 1s\n")
        // A user namespace of our own, whose inotify watch limit we may lower without touching anyone else's.
        let agent = try ChildProcess("/usr/bin/unshare", ["--user", "--map-root-user", "sh", "-c",
                                                          "echo 5 > /proc/sys/user/max_inotify_watches && exec \"$0\" \"$@\"",
                                                          sinkidExecutable(), "--root", a, "--server", cluster.serverURL,
                                                          "--state", cluster.directory.child("a/state"), "--device", "a",
                                                          "--config", config, "--log-level", "debug",
                                                          "--token-file", try #require(try cluster.tokenFile(for: "a"))],
                                     logDirectory: cluster.directory.path, label: "agent-limited")
        defer { agent.stop() }
        try await waitUntil("the limit warning", timeout: 10) { agent.errors.contains("fs.inotify.max_user_watches") }
        #expect(agent.errors.contains("sudo sysctl fs.inotify.max_user_watches="))
        #expect(agent.errors.components(separatedBy: "watch limit").count == 2) // one warning
        try cluster.startAgent("b")
        try writeFile(a + "/dir11/late.txt", "written where no watch is")
        try await cluster.waitForConvergence("a", "b", timeout: 10) { $0.entries["dir11/late.txt"] != nil }
    }
}
