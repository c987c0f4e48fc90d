import Foundation
import Glibc
import SinkiSupport
import SinkiTestSupport
import Testing
@testable import SinkiState

@Suite struct DiskWriterTests {
    /// The fault suite's seed 4008: a download is renamed into place while another fetch of the same
    /// content finishes and renames its own file (mode 0600, mtime now) over the download's name. What
    /// lands must be the file given the record's mode and mtime, not the newcomer.
    @Test func aDownloadPlacedWhileAnotherFetchOfItFinishesKeepsItsModeAndTime() throws {
        let directory = TemporaryDirectory("sinki-diskwriter")
        let downloads = directory.child("downloads"), root = directory.child("root")
        try FileManager.default.createDirectory(atPath: downloads, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let name = String(repeating: "ab", count: 32)
        let bytes = Array("the checked download".utf8)
        try Data(bytes).write(to: URL(fileURLWithPath: downloads + "/" + name))
        let parent = try FileDescriptor.open(root, flags: O_RDONLY | O_DIRECTORY)
        let modifiedAt: Int64 = 1_700_000_000_123_456_789
        let stat = try DiskWriter.placeFile(sourceDirectory: downloads, sourceName: name, move: true, parent: parent.raw, parentPath: root,
                                            name: "game.save", mode: 0o644, modifiedAt: modifiedAt, expect: nil) {
            // Another fetch of the same content ends now.
            let other = downloads + "/other.part"
            #expect(FileManager.default.createFile(atPath: other, contents: Data(bytes), attributes: [.posixPermissions: 0o600]))
            #expect(rename(other, downloads + "/" + name) == 0)
        }
        var placed = Glibc.stat()
        #expect(lstat(root + "/game.save", &placed) == 0)
        #expect(placed.st_mode & 0o777 == 0o644)
        #expect(Int64(placed.st_mtim.tv_sec) * 1_000_000_000 + Int64(placed.st_mtim.tv_nsec) == modifiedAt)
        #expect(UInt64(placed.st_ino) == stat.inode, "the stat returned is the file in place")
        #expect(FileManager.default.fileExists(atPath: downloads + "/" + name), "the other fetch's file stays for its own apply")
    }

    /// A record's mode is never wider than the local umask allows (issue 24, item 13): a peer's 0777
    /// makes no world-writable file or folder here, whichever way it is written.
    @Test func modesFromARecordKeepToTheLocalUmask() throws {
        let directory = TemporaryDirectory("sinki-diskwriter")
        let downloads = directory.child("downloads"), root = directory.child("root")
        try FileManager.default.createDirectory(atPath: downloads, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let parent = try FileDescriptor.open(root, flags: O_RDONLY | O_DIRECTORY)
        let expected = mode_t(0o777) & ~DiskWriter.umaskBits
        func mode(_ name: String) -> mode_t {
            var info = Glibc.stat()
            #expect(lstat(root + "/" + name, &info) == 0)
            return info.st_mode & 0o7777
        }
        _ = try DiskWriter.writeFile(parent: parent.raw, parentPath: root, name: "new.sh", bytes: Array("x".utf8), mode: 0o4777,
                                     modifiedAt: 1_700_000_000_000_000_000, expect: nil)
        #expect(mode("new.sh") == expected)
        let old = try DiskWriter.writeFile(parent: parent.raw, parentPath: root, name: "old.sh", bytes: Array("x".utf8), mode: 0o600,
                                           modifiedAt: 1_700_000_000_000_000_000, expect: nil)
        _ = try DiskWriter.writeFile(parent: parent.raw, parentPath: root, name: "old.sh", bytes: Array("y".utf8), mode: 0o777,
                                     modifiedAt: 1_700_000_000_000_000_000, expect: old)
        #expect(mode("old.sh") == expected)
        let name = String(repeating: "cd", count: 32)
        try Data("z".utf8).write(to: URL(fileURLWithPath: downloads + "/" + name))
        _ = try DiskWriter.placeFile(sourceDirectory: downloads, sourceName: name, move: true, parent: parent.raw, parentPath: root,
                                     name: "placed.bin", mode: 0o777, modifiedAt: 1_700_000_000_000_000_000, expect: nil) {}
        #expect(mode("placed.bin") == expected)
        var made = false
        _ = try DiskWriter.makeDirectory(parent: parent.raw, parentPath: root, name: "folder", mode: 0o777, made: &made)
        #expect(mode("folder") == expected)
    }

    /// The fault suite's seed 5: a program appended to a file in the moment after a download put it in
    /// place. The stat recorded must be the version written, not the appended one, or the row takes the
    /// edit for the version applied and the next remote delete removes it.
    @Test func aFileWrittenJustAfterItIsPlacedIsNotRecordedAsTheVersionApplied() throws {
        let directory = TemporaryDirectory("sinki-diskwriter")
        let path = directory.child("game.save")
        try Data("the version applied".utf8).write(to: URL(fileURLWithPath: path))
        let file = try FileDescriptor.open(path, flags: O_RDONLY)
        let written = try file.stat()
        // Nothing happened meanwhile: the stat now (after a rename would have moved the ctime) is kept.
        #expect(try DiskWriter.placed(file, written: written) == file.stat())
        let handle = try #require(FileHandle(forWritingAtPath: path))
        handle.seekToEndOfFile()
        handle.write(Data(" and the user's append".utf8))
        try handle.close()
        let recorded = try DiskWriter.placed(file, written: written)
        #expect(recorded == written, "the version written, so the next look finds the append")
        #expect(try file.stat().size != recorded.size)
    }
}

/// A new version replacing a file trades places with it and checks the old one where it went: a
/// program that opened the old file to write in the moment after the first check keeps what it writes.
@Suite struct DiskWriterReplaceTests {
    func setUp() throws -> (TemporaryDirectory, FileDescriptor, FileStat) {
        let directory = TemporaryDirectory("sinki-diskwriter-replace")
        try Data("old".utf8).write(to: URL(fileURLWithPath: directory.child("game.save")))
        let parent = try FileDescriptor.open(directory.path, flags: O_RDONLY | O_DIRECTORY)
        return (directory, parent, try DiskWriter.statEntry(parent: parent.raw, parentPath: directory.path, name: "game.save"))
    }

    func names(_ directory: TemporaryDirectory) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).sorted()
    }

    @Test func anUnchangedFileIsReplacedAndLeavesNothingBehind() throws {
        let (directory, parent, stat) = try setUp()
        _ = try DiskWriter.writeFile(parent: parent.raw, parentPath: directory.path, name: "game.save", bytes: Array("new".utf8), mode: 0o644,
                                     modifiedAt: 1_700_000_000_000_000_000, expect: stat)
        #expect(names(directory) == ["game.save"])
        #expect(FileManager.default.contents(atPath: directory.child("game.save")) == Data("new".utf8))
    }

    @Test func aWriterThatOpensTheOldFileInTheMomentBetweenKeepsItUnderItsName() throws {
        let (directory, parent, stat) = try setUp()
        // A reader does not count as a writer; through its /proc name the same inode opens to write.
        let reader = open(directory.child("game.save"), O_RDONLY | O_CLOEXEC)
        defer { close(reader) }
        var writer: Int32 = -1
        #expect(throws: SystemError.self) {
            _ = try DiskWriter.writeFile(parent: parent.raw, parentPath: directory.path, name: "game.save", bytes: Array("new".utf8),
                                         mode: 0o644, modifiedAt: 1_700_000_000_000_000_000, expect: stat, exchanged: {
                writer = open("/proc/self/fd/\(reader)", O_WRONLY | O_CLOEXEC)
            })
        }
        #expect(writer >= 0)
        #expect(pwrite(writer, "OLD, edited", 11, 0) == 11)
        close(writer)
        #expect(names(directory) == ["game.save"])
        #expect(FileManager.default.contents(atPath: directory.child("game.save")) == Data("OLD, edited".utf8))
    }
}

/// A remote delete of a file a program is writing (the fault suite's seeds 30003 and 30012: the
/// program opened the file just before the unlink and wrote into a file with no name left).
@Suite struct DiskWriterRemoveTests {
    func setUp(_ bytes: String) throws -> (TemporaryDirectory, FileDescriptor, FileStat) {
        let directory = TemporaryDirectory("sinki-diskwriter-remove")
        try Data(bytes.utf8).write(to: URL(fileURLWithPath: directory.child("game.save")))
        let parent = try FileDescriptor.open(directory.path, flags: O_RDONLY | O_DIRECTORY)
        let stat = try DiskWriter.statEntry(parent: parent.raw, parentPath: directory.path, name: "game.save")
        return (directory, parent, stat)
    }

    func names(_ directory: TemporaryDirectory) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).sorted()
    }

    @Test func aFileAsPlannedAndOpenToNoWriterGoesAndLeavesNothing() throws {
        let (directory, parent, stat) = try setUp("old")
        // A reader does not hold it back.
        let reader = open(directory.child("game.save"), O_RDONLY)
        defer { close(reader) }
        #expect(try DiskWriter.remove(parent: parent.raw, parentPath: directory.path, name: "game.save", expect: stat))
        #expect(names(directory).isEmpty)
    }

    @Test func aFileOpenToAWriterStaysUnderItsNameAndWhatItWritesIsKept() throws {
        let (directory, parent, stat) = try setUp("old")
        let writer = open(directory.child("game.save"), O_RDWR)
        #expect(writer >= 0)
        #expect(try !DiskWriter.remove(parent: parent.raw, parentPath: directory.path, name: "game.save", expect: stat))
        // The writer goes on writing: into the file that still has its name.
        #expect(pwrite(writer, "new", 3, 0) == 3)
        close(writer)
        #expect(names(directory) == ["game.save"])
        #expect(FileManager.default.contents(atPath: directory.child("game.save")) == Data("new".utf8))
    }

    @Test func aFileChangedSinceItWasPlannedStays() throws {
        let (directory, parent, stat) = try setUp("old")
        try Data("edited here".utf8).write(to: URL(fileURLWithPath: directory.child("game.save")))
        #expect(try !DiskWriter.remove(parent: parent.raw, parentPath: directory.path, name: "game.save", expect: stat))
        #expect(names(directory) == ["game.save"])
        #expect(FileManager.default.contents(atPath: directory.child("game.save")) == Data("edited here".utf8))
    }
}
