import Foundation
import SinkiRecord
import SinkiTestSupport
import Testing

/// Folders that move, vanish or change kind while the other side works in them (issue 11 item 3):
/// two real agents, real inotify, one real server. Each case must converge losing no file.
@Suite(.serialized) struct FolderMoveTests {
    // MARK: A folder of many files side by side, renamed

    @Test func aFolderOfAThousandFilesSideBySideIsRenamedWithoutSendingContent() async throws {
        try await renameSideBySide(1_000, label: "sinki-move-1k", timeout: 30)
    }

    @Test func aFolderOfTenThousandFilesSideBySideIsRenamedWithoutSendingContent() async throws {
        try await renameSideBySide(10_000, label: "sinki-move-10k", timeout: 90)
    }

    /// `level/f1` … `level/fN` synced, then `mv level renamed` while both agents run: the other side
    /// gets the rename, the server copies every file from its old path, nothing is read again.
    func renameSideBySide(_ count: Int, label: String, timeout: Double) async throws {
        let cluster = try pair(label)
        let a = cluster.root("a"), b = cluster.root("b")
        try FileManager.default.createDirectory(atPath: a + "/level", withIntermediateDirectories: true)
        for index in 1...count { _ = FileManager.default.createFile(atPath: a + "/level/f\(index)", contents: Data("file \(index)".utf8)) }
        try await cluster.waitForConvergence("a", "b", timeout: timeout) { $0.entries.count == count + 2 }
        let inodeBefore = try inode(b + "/level/f7")
        let logBefore = cluster.agent("a")?.errors.count ?? 0

        try FileManager.default.moveItem(atPath: a + "/level", toPath: a + "/renamed")
        try await cluster.waitForConvergence("a", "b", timeout: timeout) { snapshot in
            snapshot.entries["level"] == nil && snapshot.entries["renamed/f\(count)"] != nil && snapshot.entries.count == count + 2
        }
        for side in [a, b] {
            #expect(readFile(side + "/renamed/f1") == "file 1")
            #expect(readFile(side + "/renamed/f\(count)") == "file \(count)")
            #expect(!FileManager.default.fileExists(atPath: side + "/level"))
            #expect(temporaries(side).isEmpty)
        }
        // On the server each new path names its old one; the old ones become tombstones once their
        // new paths are accepted (b renamed its folder as a whole: the pushes may still be on their way).
        var records: [Record] = []
        try await waitUntil("the old paths' tombstones on the server", timeout: timeout) {
            records = try cluster.serverRecords()
            return records.filter { $0.path == "SaveGames/level" || $0.path.hasPrefix("SaveGames/level/") }.allSatisfy { $0.deleted }
        }
        let moved = records.filter { $0.path.hasPrefix("SaveGames/renamed/") && !$0.deleted }
        #expect(moved.count == count)
        #expect(moved.allSatisfy { $0.movedFrom == "SaveGames/level/" + $0.path.dropFirst("SaveGames/renamed/".count) })
        // All pushed by now (the tombstones went last).
        let log = String(cluster.agent("a")?.errors.dropFirst(logBefore) ?? "")
        #expect(log.contains("moved \(count + 1) path(s) from \"SaveGames/level\" to \"SaveGames/renamed\" without reading them"))
        #expect(readsAgain(log) == 0, "the sender read \(readsAgain(log)) files again")
        // Every new path went named after its source, with no bytes: the server copied the content.
        let pushed = batchesPushed(log)
        #expect(pushed.renamed == count + 1 && pushed.bytes == 0, "pushed \(pushed)")
        // The receiver renamed its own copy, and took in each file's record without refusing one.
        #expect(try inode(b + "/renamed/f7") == inodeBefore)
        #expect(cluster.agent("b")?.errors.contains("cannot apply") == false)
    }

    // MARK: 1. A folder renamed on one side while the other works inside it

    @Test func aFolderRenamedWhileTheOtherSideWorksInItOfflineLosesNothing() async throws {
        let cluster = try pair("sinki-move-offline-edits")
        let a = cluster.root("a"), b = cluster.root("b")
        try shareWorkFolder(a)
        try await cluster.waitForConvergence("a", "b", timeout: 5) { $0.entries.count == 8 }

        cluster.stopAgent("b")
        try FileManager.default.moveItem(atPath: a + "/shelf", toPath: a + "/renamed")
        try writeFile(a + "/renamed/a-edits.txt", "edited on a")
        try await waitUntil("a's rename and edit on the server", timeout: 5) {
            let records = try cluster.serverRecords()
            return records.contains { $0.path == "SaveGames/renamed/keep.txt" && !$0.deleted }
                && records.contains { $0.path == "SaveGames/shelf" && $0.deleted }
                && records.contains { $0.path == "SaveGames/renamed/a-edits.txt" && $0.size == Int64("edited on a".utf8.count) }
        }
        // b works in the old folder before it hears of the rename.
        try writeFile(b + "/shelf/new.txt", "created on b")
        try writeFile(b + "/shelf/edit.txt", "edited on b")
        try FileManager.default.removeItem(atPath: b + "/shelf/delete.txt")
        try FileManager.default.removeItem(atPath: b + "/shelf/a-edits.txt")
        try cluster.startAgent("b")

        try await cluster.waitForConvergence("a", "b", timeout: 10) { snapshot in
            snapshot.entries["renamed/keep.txt"] != nil && !files(snapshot, holding: "created on b", in: a).isEmpty
                && !files(snapshot, holding: "edited on b", in: a).isEmpty
        }
        try expectWorkFolderOutcome(cluster, created: true, edited: true, deleted: true, aEdited: true)
    }

    @Test func aFolderRenamedWhileTheOtherSideWorksInItLiveLosesNothing() async throws {
        let cluster = try pair("sinki-move-live-edits")
        let a = cluster.root("a"), b = cluster.root("b")
        try shareWorkFolder(a)
        try await cluster.waitForConvergence("a", "b", timeout: 5) { $0.entries.count == 8 }

        // At once: b's operations race a's rename reaching b. One that finds the folder gone already
        // did not happen (as for any program), and is not expected afterwards.
        try FileManager.default.moveItem(atPath: a + "/shelf", toPath: a + "/renamed")
        let created = writeInPlace(b + "/shelf/new.txt", "created on b")
        let edited = writeInPlace(b + "/shelf/edit.txt", "edited on b")
        let deleted = unlink(b + "/shelf/delete.txt") == 0

        try await cluster.waitForConvergence("a", "b", timeout: 10) { snapshot in
            snapshot.entries["renamed/keep.txt"] != nil && (!created || !files(snapshot, holding: "created on b", in: a).isEmpty)
                && (!edited || !files(snapshot, holding: "edited on b", in: a).isEmpty)
        }
        try expectWorkFolderOutcome(cluster, created: created, edited: edited, deleted: deleted, aEdited: false)
    }

    /// `work/` with a file kept as it is, one b edits, one b deletes, one a edits and b deletes, and a subfolder.
    func shareWorkFolder(_ a: String) throws {
        try writeFile(a + "/shelf/keep.txt", "kept")
        try writeFile(a + "/shelf/edit.txt", "before the edit")
        try writeFile(a + "/shelf/delete.txt", "deleted on b")
        try writeFile(a + "/shelf/a-edits.txt", "before a's edit")
        try writeFile(a + "/shelf/sub/deep.txt", "deep")
    }

    /// After `work` became `renamed` on a while b created, edited and deleted in `work`: b's new file
    /// and edit exist (where the rules put them), b's delete stayed a delete unless a edited the file.
    func expectWorkFolderOutcome(_ cluster: Cluster, created: Bool, edited: Bool, deleted: Bool, aEdited: Bool) throws {
        for side in [cluster.root("a"), cluster.root("b")] {
            let snapshot = TreeSnapshot(side)
            #expect(readFile(side + "/renamed/keep.txt") == "kept")
            #expect(readFile(side + "/renamed/sub/deep.txt") == "deep")
            if created {
                let found = files(snapshot, holding: "created on b", in: side)
                #expect(found.count == 1 && found.allSatisfy { $0.hasSuffix("new.txt") }, "b's new file: \(found)")
            }
            if edited {
                let found = files(snapshot, holding: "edited on b", in: side)
                #expect(found.count == 1 && found.allSatisfy { $0.contains("edit") }, "b's edit: \(found)")
            }
            if deleted { #expect(files(snapshot, holding: "deleted on b", in: side).isEmpty, "b's delete came back") }
            if aEdited {
                // a edited what b deleted: the edit wins.
                #expect(readFile(side + "/renamed/a-edits.txt") == "edited on a")
                #expect(files(snapshot, holding: "before a's edit", in: side).isEmpty)
            }
            #expect(temporaries(side).isEmpty)
        }
    }

    // MARK: 2. A folder removed on one side while the other writes into it

    @Test func filesWrittenIntoAFolderRemovedOfflineOnTheOtherSideWin() async throws {
        let cluster = try pair("sinki-rmdir-offline")
        let a = cluster.root("a"), b = cluster.root("b")
        try shareDoomedFolder(a)
        try await cluster.waitForConvergence("a", "b", timeout: 5) { $0.entries.count == 6 }

        cluster.stopAgent("b")
        try FileManager.default.removeItem(atPath: a + "/doomed")
        try await waitUntil("a's delete on the server", timeout: 5) {
            try cluster.serverRecords().contains { $0.path == "SaveGames/doomed" && $0.deleted }
        }
        try writeFile(b + "/doomed/new.txt", "written on b")
        try writeFile(b + "/doomed/sub/new.txt", "written deeper on b")
        try writeFile(b + "/doomed/old.txt", "edited on b")
        try cluster.startAgent("b")

        let written = ["doomed/new.txt": "written on b", "doomed/sub/new.txt": "written deeper on b", "doomed/old.txt": "edited on b"]
        try await cluster.waitForConvergence("a", "b", timeout: 10) { snapshot in
            written.keys.allSatisfy { snapshot.entries[$0] != nil } && snapshot.entries["doomed/untouched.txt"] == nil
        }
        try expectDoomedFolderOutcome(cluster, written: written)
    }

    @Test func filesWrittenIntoAFolderRemovedLiveOnTheOtherSideWin() async throws {
        let cluster = try pair("sinki-rmdir-live")
        let a = cluster.root("a"), b = cluster.root("b")
        try shareDoomedFolder(a)
        try await cluster.waitForConvergence("a", "b", timeout: 5) { $0.entries.count == 6 }

        // At once; a write that finds its folder removed already did not happen.
        try FileManager.default.removeItem(atPath: a + "/doomed")
        var written: [String: String] = [:]
        for (path, text) in [("doomed/new.txt", "written on b"), ("doomed/sub/new.txt", "written deeper on b")] where writeInPlace(b + "/" + path, text) {
            written[path] = text
        }

        try await cluster.waitForConvergence("a", "b", timeout: 10) { snapshot in
            written.keys.allSatisfy { snapshot.entries[$0] != nil } && snapshot.entries["doomed/untouched.txt"] == nil
                && snapshot.entries["doomed/old.txt"] == nil
        }
        try expectDoomedFolderOutcome(cluster, written: written)
    }

    func shareDoomedFolder(_ a: String) throws {
        try writeFile(a + "/doomed/old.txt", "before the edit")
        try writeFile(a + "/doomed/untouched.txt", "deleted with its folder")
        try writeFile(a + "/doomed/sub/old.txt", "deleted with its folder too")
    }

    /// Edit beats delete: what b wrote exists on both sides, with the folders it is in; what nobody
    /// touched is gone.
    func expectDoomedFolderOutcome(_ cluster: Cluster, written: [String: String]) throws {
        for side in [cluster.root("a"), cluster.root("b")] {
            for (path, text) in written { #expect(readFile(side + "/" + path) == text, "\(path) on \(side)") }
            #expect(!FileManager.default.fileExists(atPath: side + "/doomed/untouched.txt"))
            #expect(!FileManager.default.fileExists(atPath: side + "/doomed/sub/old.txt"))
            if written.isEmpty { #expect(!FileManager.default.fileExists(atPath: side + "/doomed")) }
            #expect(temporaries(side).isEmpty)
        }
    }

    // MARK: 3. A file becomes a folder, a folder a file

    @Test func aFileBecomesAFolderAndAFolderAFileLive() async throws {
        let cluster = try pair("sinki-kind-live")
        try await changeKinds(cluster, stoppingB: false)
    }

    @Test func aFileBecomesAFolderAndAFolderAFileWhileTheOtherAgentIsStopped() async throws {
        let cluster = try pair("sinki-kind-offline")
        try await changeKinds(cluster, stoppingB: true)
    }

    /// `rm f; mkdir f; echo x > f/inner` and `rm -r d; echo x > d` on a; b follows.
    func changeKinds(_ cluster: Cluster, stoppingB: Bool) async throws {
        let a = cluster.root("a"), b = cluster.root("b")
        try writeFile(a + "/f", "a plain file")
        try writeFile(a + "/d/one.txt", "one")
        try writeFile(a + "/d/two/three.txt", "three")
        try await cluster.waitForConvergence("a", "b", timeout: 5) { $0.entries.count == 6 }

        if stoppingB { cluster.stopAgent("b") }
        try FileManager.default.removeItem(atPath: a + "/f")
        try FileManager.default.createDirectory(atPath: a + "/f", withIntermediateDirectories: false)
        #expect(writeInPlace(a + "/f/inner", "x"))
        try FileManager.default.removeItem(atPath: a + "/d")
        #expect(writeInPlace(a + "/d", "x, a file now"))
        if stoppingB {
            try await waitUntil("a's changes on the server", timeout: 5) {
                let records = try cluster.serverRecords()
                return records.contains { $0.path == "SaveGames/f/inner" && !$0.deleted }
                    && records.contains { $0.path == "SaveGames/d" && !$0.deleted && $0.kind == .file }
            }
            try cluster.startAgent("b")
        }

        try await cluster.waitForConvergence("a", "b", timeout: 10) { $0.entries["f/inner"] != nil && $0.entries["d"]?.hasPrefix("file:") == true }
        for side in [a, b] {
            #expect(readFile(side + "/f/inner") == "x")
            #expect(readFile(side + "/d") == "x, a file now")
            #expect(TreeSnapshot(side).entries.count == 4, "\(TreeSnapshot(side))")
            #expect(temporaries(side).isEmpty)
        }
    }

    @Test func aFileAndAFolderChangedDifferentlyOnBothSidesKeepEveryVersion() async throws {
        let cluster = try pair("sinki-kind-both")
        let a = cluster.root("a"), b = cluster.root("b")
        try writeFile(a + "/f", "a plain file")
        try writeFile(a + "/d/one.txt", "one")
        try await cluster.waitForConvergence("a", "b", timeout: 5) { $0.entries.count == 4 }

        cluster.stopAgent("b")
        // a: f becomes a folder, d a file.
        try FileManager.default.removeItem(atPath: a + "/f")
        try writeFile(a + "/f/inner", "inner, from a")
        try FileManager.default.removeItem(atPath: a + "/d")
        try writeFile(a + "/d", "d as a file, from a")
        try await waitUntil("a's changes on the server", timeout: 5) {
            let records = try cluster.serverRecords()
            return records.contains { $0.path == "SaveGames/f/inner" && !$0.deleted }
                && records.contains { $0.path == "SaveGames/d" && !$0.deleted && $0.kind == .file }
        }
        // b: f stays a file and is edited, d stays a folder and gets a new file.
        try writeFile(b + "/f", "f edited, from b")
        try writeFile(b + "/d/new.txt", "new in d, from b")
        try cluster.startAgent("b")

        let texts = ["f edited, from b", "new in d, from b", "inner, from a", "d as a file, from a"]
        try await cluster.waitForConvergence("a", "b", timeout: 10) { snapshot in
            texts.allSatisfy { !files(snapshot, holding: $0, in: a).isEmpty }
        }
        for side in [a, b] {
            let snapshot = TreeSnapshot(side)
            for text in texts { #expect(files(snapshot, holding: text, in: side).count == 1, "\(text) on \(side): \(snapshot)") }
            #expect(files(snapshot, holding: "one", in: side).isEmpty, "d/one.txt was deleted on a and left alone on b")
            #expect(temporaries(side).isEmpty)
        }
    }

    // MARK: 4. Case-only renames

    @Test func caseOnlyRenamesOfAFileAndOfAFolderArePlainRenames() async throws {
        let cluster = try pair("sinki-case")
        let a = cluster.root("a"), b = cluster.root("b")
        try writeFile(a + "/Save.dat", "the save")
        try writeFile(a + "/Level/one.txt", "one")
        try writeFile(a + "/Level/inner/two.txt", "two")
        try await cluster.waitForConvergence("a", "b", timeout: 5) { $0.entries.count == 6 }

        try FileManager.default.moveItem(atPath: a + "/Save.dat", toPath: a + "/save.dat")
        try FileManager.default.moveItem(atPath: a + "/Level", toPath: a + "/level")
        try await cluster.waitForConvergence("a", "b", timeout: 10) { snapshot in
            snapshot.entries["save.dat"] != nil && snapshot.entries["Save.dat"] == nil
                && snapshot.entries["level/inner/two.txt"] != nil && snapshot.entries["Level"] == nil
        }
        for side in [a, b] {
            #expect(readFile(side + "/save.dat") == "the save")
            #expect(readFile(side + "/level/one.txt") == "one")
            #expect(readFile(side + "/level/inner/two.txt") == "two")
            #expect(try FileManager.default.contentsOfDirectory(atPath: side).sorted() == ["keeper.txt", "level", "save.dat"])
            #expect(temporaries(side).isEmpty)
        }
        let records = try cluster.serverRecords()
        #expect(records.first { $0.path == "SaveGames/save.dat" }?.movedFrom == "SaveGames/Save.dat")
        #expect(records.first { $0.path == "SaveGames/level/inner/two.txt" }?.movedFrom == "SaveGames/Level/inner/two.txt")
        #expect(records.filter { $0.path.hasPrefix("SaveGames/Level") || $0.path == "SaveGames/Save.dat" }.allSatisfy { $0.deleted })
    }

    // MARK: A folder made again while its parent is renamed elsewhere (fault suite seed 310)

    /// a renames `Saves/` while paused; meanwhile b removes `Saves/sub/` and makes it again, and c
    /// follows both. The old agent let c, following a's rename, move its whole `Saves/` away while a and
    /// b kept `Saves/sub`. With the three trees a folder is a folder: b's re-made empty `Saves/sub` is
    /// no change against what a last agreed on, so a's rename takes it along. What matters is that the
    /// three agree, with the server, and that nothing with content is lost.
    @Test func aFolderMadeAgainWhileItsParentIsRenamedElsewhereIsThereEverywhere() async throws {
        let cluster = Cluster("sinki-move-made-again")
        let a = cluster.root("a"), b = cluster.root("b"), c = cluster.root("c")
        try writeFile(a + "/keeper.txt", "keeps the root from looking emptied")
        try writeFile(a + "/Saves/f.txt", "in saves")
        try FileManager.default.createDirectory(atPath: a + "/Saves/sub", withIntermediateDirectories: true)
        try cluster.startServer()
        for name in ["a", "b", "c"] { try cluster.startAgent(name) }
        try await cluster.waitForConvergence("a", "b", timeout: 10) { $0.entries["Saves/sub"] != nil && $0.entries["Saves/f.txt"] != nil }
        try await cluster.waitForConvergence("a", "c", timeout: 10) { $0.entries["Saves/sub"] != nil && $0.entries["Saves/f.txt"] != nil }

        _ = try sinkid(["pause", "--state", cluster.directory.child("a") + "/state"], in: cluster.directory)
        try FileManager.default.moveItem(atPath: a + "/Saves", toPath: a + "/Renamed")
        try FileManager.default.removeItem(atPath: b + "/Saves/sub")
        try await waitUntil("c to follow b's removal", timeout: 10) { !FileManager.default.fileExists(atPath: c + "/Saves/sub") }
        try FileManager.default.createDirectory(atPath: b + "/Saves/sub", withIntermediateDirectories: false)
        try await waitUntil("c to follow b's new folder", timeout: 10) { FileManager.default.fileExists(atPath: c + "/Saves/sub") }
        _ = try sinkid(["resume", "--state", cluster.directory.child("a") + "/state"], in: cluster.directory)

        let expected: (TreeSnapshot) -> Bool = { snapshot in
            snapshot.entries["Renamed/sub"] != nil && snapshot.entries["Renamed/f.txt"] != nil && snapshot.entries["Saves/f.txt"] == nil
        }
        try await cluster.waitForConvergence("a", "b", timeout: 15, expected)
        try await cluster.waitForConvergence("a", "c", timeout: 15, expected)
        let records = try cluster.serverRecords()
        let onDisk = FileManager.default.fileExists(atPath: a + "/Saves/sub")
        #expect(records.contains { $0.path == "SaveGames/Saves/sub" && $0.deleted != onDisk }, "the server holds what the agents hold")
        #expect(readFile(a + "/Renamed/f.txt") == "in saves")
    }

    // MARK: Helpers

    /// Two agents on one server; a file at the top keeps a root from looking emptied (a safety stop)
    /// when a test removes or renames the only folder in it.
    func pair(_ label: String) throws -> Cluster {
        let cluster = Cluster(label)
        try writeFile(cluster.root("a") + "/keeper.txt", "keeps the root from looking emptied")
        try cluster.startServer()
        try cluster.startAgent("a")
        try cluster.startAgent("b")
        return cluster
    }
}

/// The paths of `snapshot` (taken of `root`) whose file holds exactly `text`.
func files(_ snapshot: TreeSnapshot, holding text: String, in root: String) -> [String] {
    let size = "file:\(text.utf8.count):"
    return snapshot.entries.filter { $0.value.hasPrefix(size) }.keys.filter { readFile(root + "/" + $0) == text }.sorted()
}

/// Writes `text` at `path` in place (open, truncate, write, close), as a program does, without
/// making folders: false when the folder is not there (any more).
func writeInPlace(_ path: String, _ text: String) -> Bool {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    let bytes = Array(text.utf8)
    return write(fd, bytes, bytes.count) == bytes.count
}

/// sinkid's temporary files anywhere below `root` (a finished sync leaves none).
func temporaries(_ root: String) -> [String] {
    let walker = FileManager.default.enumerator(atPath: root)
    var found: [String] = []
    while let relative = walker?.nextObject() as? String {
        if (relative as NSString).lastPathComponent.hasPrefix(".sinki-tmp-") { found.append(relative) }
    }
    return found
}

func inode(_ path: String) throws -> Int {
    try #require(FileManager.default.attributesOfItem(atPath: path)[.systemFileNumber] as? Int)
}

/// What the agent's batches carried, by its debug log's `batch N of M planned (R renamed, B
/// bytes of content)` lines: records naming their source, and bytes of content.
func batchesPushed(_ log: String) -> (renamed: Int, bytes: Int) {
    var renamed = 0, bytes = 0
    for line in log.components(separatedBy: "\n") where line.contains("replica: batch ") {
        guard let open = line.range(of: " planned ("), let close = line.range(of: " bytes of content)") else { continue }
        let parts = line[open.upperBound..<close.lowerBound].components(separatedBy: " renamed, ")
        renamed += Int(parts.first ?? "") ?? 0
        bytes += Int(parts.last ?? "") ?? 0
    }
    return (renamed, bytes)
}

/// How many files the agent read to hash them, by its debug log's `absorb … read N` lines.
func readsAgain(_ log: String) -> Int {
    log.components(separatedBy: "\n").filter { $0.contains("replica: absorb") }
        .compactMap { Int($0.components(separatedBy: "read ").last ?? "") }.reduce(0, +)
}
