import Glibc
import Foundation
import SinkiLoop
import SinkiSupport
import SinkiTestSupport
import Testing
@testable import SinkiWatch

/// The watcher's aggregation, on a real loop, fed events directly (what the kernel would send).
actor Aggregator {
    nonisolated let loop: EventLoop
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }
    var watcher: Watcher?
    var batches: [WatchBatch] = []

    init(loop: EventLoop) { self.loop = loop }

    func setUp(delay: UInt64 = 50, grace: UInt64 = 200) throws {
        let watcher = Watcher(loop: loop, inotify: try Inotify(), delayMilliseconds: delay, graceMilliseconds: grace,
                              logger: Logger(label: "test", level: .error))
        try watcher.start { [unowned self] batch in self.assumeIsolated { $0.batches.append(batch) } }
        self.watcher = watcher
    }

    func feed(_ events: [InotifyEvent]) {
        watcher?.absorb(events)
        watcher?.flush()
    }

    func tearDown() { watcher?.stop() }

    var all: WatchBatch {
        var merged = WatchBatch()
        for batch in batches { merged.merge(batch) }
        return merged
    }
}

func path(_ relative: String, root: Int = 0) -> LocalPath { LocalPath(RootID(root), relative) }

func event(_ relative: String, _ mask: Int32, cookie: UInt32 = 0, root: Int = 0) -> InotifyEvent {
    InotifyEvent(LocalPath(RootID(root), relative), mask: UInt32(bitPattern: mask), cookie: cookie)
}

@Suite(.serialized) struct WatcherTests {
    @Test func anOverflowAsksForARescanOfEverything() async throws {
        let thread = LoopThread()
        defer { thread.stop() }
        let aggregator = Aggregator(loop: thread.loop)
        try await aggregator.setUp()
        await aggregator.feed([InotifyEvent(nil, mask: UInt32(IN_Q_OVERFLOW))])
        #expect(await aggregator.all.overflow)
        await aggregator.tearDown()
    }

    @Test func completeFilesAreReadyAtOnceAndOpenOnesWaitForQuiet() async throws {
        let thread = LoopThread()
        defer { thread.stop() }
        let aggregator = Aggregator(loop: thread.loop)
        try await aggregator.setUp(delay: 50)
        await aggregator.feed([event("done.txt", IN_CREATE), event("done.txt", IN_CLOSE_WRITE), event("open.log", IN_MODIFY)])
        #expect(await aggregator.all.changes.map(\.path.relative) == ["done.txt"])
        try await waitUntil("the quiet file", timeout: 10) { await aggregator.all.changes.map(\.path.relative).contains("open.log") }
        await aggregator.tearDown()
    }

    @Test func renamesInsideARootArePairedIntoMoves() async throws {
        let thread = LoopThread()
        defer { thread.stop() }
        let aggregator = Aggregator(loop: thread.loop)
        try await aggregator.setUp()
        await aggregator.feed([event("a.txt", IN_MOVED_FROM, cookie: 7), event("sub/b.txt", IN_MOVED_TO, cookie: 7),
                               event("dir", IN_MOVED_FROM | IN_ISDIR, cookie: 8), event("dir2", IN_MOVED_TO | IN_ISDIR, cookie: 8),
                               event("gone.txt", IN_MOVED_FROM, cookie: 9)])
        let all = await aggregator.all
        let root = RootID(0)
        #expect(all.moves == [WatchBatch.Move(from: LocalPath(root, "a.txt"), to: LocalPath(root, "sub/b.txt"), isDirectory: false),
                              WatchBatch.Move(from: LocalPath(root, "dir"), to: LocalPath(root, "dir2"), isDirectory: true)])
        // Moved out of the root (no partner): a delete to look at.
        #expect(all.changes.map(\.path.relative) == ["gone.txt"])
        await aggregator.tearDown()
    }

    @Test func vimsAtomicSaveLeavesOnlyTheRealFile() async throws {
        let thread = LoopThread()
        defer { thread.stop() }
        let aggregator = Aggregator(loop: thread.loop)
        try await aggregator.setUp(delay: 20, grace: 100)
        // vim with backupcopy=no: probe 4913, rename the file to file~, write anew, delete the backup.
        await aggregator.feed([
            event("4913", IN_CREATE), event("4913", IN_CLOSE_WRITE), event("4913", IN_DELETE),
            event("notes.txt", IN_MOVED_FROM, cookie: 3), event("notes.txt~", IN_MOVED_TO, cookie: 3),
            event("notes.txt", IN_CREATE), event("notes.txt", IN_MODIFY), event("notes.txt", IN_CLOSE_WRITE),
            event("notes.txt~", IN_DELETE),
        ])
        let first = await aggregator.all
        #expect(first.moves.isEmpty)
        #expect(first.changes.map(\.path.relative) == ["notes.txt"])
        // The temporary names are only looked at after the grace period (and are gone by then).
        try await waitUntil("the grace period", timeout: 10) { await aggregator.all.changes.count >= 3 }
        let later = await aggregator.all.changes.map(\.path.relative)
        #expect(Set(later) == ["notes.txt", "4913", "notes.txt~"])
        await aggregator.tearDown()
    }

    @Test func aTemporaryFileRenamedOverTheTargetIsOneChange() async throws {
        let thread = LoopThread()
        defer { thread.stop() }
        let aggregator = Aggregator(loop: thread.loop)
        try await aggregator.setUp(delay: 20, grace: 100)
        await aggregator.feed([event(".save.dat.tmp1234", IN_CREATE), event(".save.dat.tmp1234", IN_CLOSE_WRITE),
                               event(".save.dat.tmp1234", IN_MOVED_FROM, cookie: 5), event("save.dat", IN_MOVED_TO, cookie: 5)])
        let all = await aggregator.all
        #expect(all.moves.isEmpty)
        #expect(all.changes.map(\.path.relative) == ["save.dat"])
        await aggregator.tearDown()
    }

    @Test func ownWritesAreDroppedOnce() async throws {
        let thread = LoopThread()
        defer { thread.stop() }
        let echoes = EchoFilter()
        echoes.expect(path("written.txt"), .fileIn, watch: 0)
        #expect(echoes.consume(event("written.txt", IN_MOVED_TO), at: path("written.txt")))
        #expect(!echoes.consume(event("written.txt", IN_MOVED_TO), at: path("written.txt")))
        echoes.expect(path("#123"), .anonymous, watch: 0)
        #expect(echoes.consume(event("#123", IN_MODIFY), at: path("#123")))
        #expect(echoes.consume(event("#123", IN_CLOSE_WRITE), at: path("#123")))
        #expect(!echoes.consume(event("#123", IN_CLOSE_WRITE), at: path("#123")))
    }

    /// An echo belongs to the watch of the folder written in: the same path in a folder made anew
    /// (another watch) is someone else's, and a write into a folder with no watch expects nothing.
    @Test func anEchoIsMatchedOnlyByTheWatchItWasExpectedFrom() throws {
        let echoes = EchoFilter()
        echoes.expect(path("d/log"), .fileIn, watch: 7)
        #expect(!echoes.consume(InotifyEvent(path("d/log"), mask: UInt32(IN_MOVED_TO), watch: 8), at: path("d/log")))
        #expect(echoes.consume(InotifyEvent(path("d/log"), mask: UInt32(IN_MOVED_TO), watch: 7), at: path("d/log")))

        let directory = TemporaryDirectory("sinki-echo-watch")
        try FileManager.default.createDirectory(atPath: directory.child("watched"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: directory.child("new"), withIntermediateDirectories: true)
        let inotify = try Inotify()
        let link = InotifyLink(inotify: inotify, echoes: echoes)
        try inotify.watch(try FileDescriptor.open(directory.path, flags: O_RDONLY | O_DIRECTORY), path(""))
        try inotify.watch(try FileDescriptor.open(directory.child("watched"), flags: O_RDONLY | O_DIRECTORY), path("watched"))
        #expect(try link.note(.expect(path("watched/a.txt"), .fileIn)))
        #expect(try link.note(.expect(path("top.txt"), .fileIn)))
        #expect(try !link.note(.expect(path("new/a.txt"), .fileIn)))
        #expect(echoes.count == 2)
        // What the kernel says of a write in each: the unwatched folder's event never comes.
        try Data("x".utf8).write(to: URL(fileURLWithPath: directory.child("watched/a.txt.part")))
        #expect(rename(directory.child("watched/a.txt.part"), directory.child("watched/a.txt")) == 0)
        let events = inotify.read().filter { $0.has(IN_MOVED_TO) }
        #expect(events.count == 1)
        #expect(events.allSatisfy { echoes.consume($0, at: $0.path!) })
        link.cancel(path("top.txt"), .fileIn)
        #expect(echoes.count == 0)
    }

    /// Names the disk keeps apart (é as one code point and as e with a combining accent) are two
    /// expectations: the write of one never swallows an edit of the other.
    @Test func anEchoIsMatchedByTheBytesOfItsName() {
        let composed = path("caf\u{E9}.txt"), decomposed = path("cafe\u{301}.txt")
        let echoes = EchoFilter()
        echoes.expect(composed, .fileIn, watch: 0)
        #expect(!echoes.consume(event(decomposed.relative, IN_MOVED_TO), at: decomposed))
        #expect(echoes.consume(event(composed.relative, IN_MOVED_TO), at: composed))
    }

    @Test func temporaryNamesAreRecognised() {
        for name in ["4913", "5036", "notes.txt~", ".notes.txt.swp", ".file.tmp1234", "x.tmp", ".goutputstream-ABC123", ".dat.nosync12.aB3dEf", "#draft#", ".rsync.aB3xYz"] {
            #expect(TemporaryNames.looksTemporary(Substring(name)), "\(name)")
        }
        for name in ["notes.txt", "4914", "player1.save", ".bashrc", ".config", "archive.tar.gz", "README"] {
            #expect(!TemporaryNames.looksTemporary(Substring(name)), "\(name)")
        }
    }
}

/// Real inotify on a temporary folder: watches through `/proc/self/fd`, events named by path.
@Suite struct InotifyTests {
    @Test func eventsArriveWithTheirPaths() throws {
        let directory = TemporaryDirectory("sinki-inotify")
        let inotify = try Inotify()
        let folder = try FileDescriptor.open(directory.path, flags: O_RDONLY | O_DIRECTORY)
        try inotify.watch(folder, path(""))
        mkdir(directory.child("sub"), 0o755)
        let sub = try FileDescriptor.open(directory.child("sub"), flags: O_RDONLY | O_DIRECTORY)
        try inotify.watch(sub, path("sub"))
        let file = try FileDescriptor.open(directory.child("sub/x.txt"), flags: O_WRONLY | O_CREAT, mode: 0o644)
        try file.write(Array("hi".utf8))
        _ = file // closed at the end of scope
        var seen: [InotifyEvent] = []
        try waitUntilSync("events", timeout: 10) {
            seen += inotify.read()
            return seen.contains { $0.path == path("sub/x.txt") && $0.has(IN_CREATE) }
        }
        #expect(seen.contains { $0.path == path("sub") && $0.isDirectory && $0.has(IN_CREATE) })
        #expect(inotify.watchCount == 2)
        inotify.renameWatches(from: path("sub"), to: path("renamed"))
        #expect(inotify.isWatched(path("renamed")))
        inotify.unwatch(under: path("renamed"))
        #expect(inotify.watchCount == 1)
    }

    /// A folder whose name ends in a prepending mark (U+0600 joins the slash after it into one
    /// Character): the watches below it are renamed by bytes, so `in\u{600}/deep` becomes `out/deep`.
    @Test func watchesBelowAFolderNamedWithAPrependingMarkFollowItsRename() throws {
        let directory = TemporaryDirectory("sinki-inotify")
        let inotify = try Inotify()
        let name = "in\u{600}"
        #expect(mkdir(directory.child(name), 0o755) == 0 && mkdir(directory.child(name + "/deep"), 0o755) == 0)
        let folders = try [name, name + "/deep"].map { relative in
            let folder = try FileDescriptor.open(directory.child(relative), flags: O_RDONLY | O_DIRECTORY)
            try inotify.watch(folder, path(relative))
            return folder
        }
        #expect(folders.count == 2 && inotify.watchCount == 2)
        inotify.renameWatches(from: path(name), to: path("out"))
        #expect(inotify.isWatched(path("out")) && inotify.isWatched(path("out/deep")))
        #expect(!inotify.isWatched(path(name + "/deep")))
    }

    /// Two folders whose names differ only in normalization are two watches, each with its own events.
    @Test func foldersNamedAlikeButNotByteForByteAreWatchedApart() throws {
        let directory = TemporaryDirectory("sinki-inotify")
        let inotify = try Inotify()
        let composed = "caf\u{E9}", decomposed = "cafe\u{301}"
        var folders: [FileDescriptor] = []
        for name in [composed, decomposed] {
            #expect(mkdir(directory.child(name), 0o755) == 0)
            let folder = try FileDescriptor.open(directory.child(name), flags: O_RDONLY | O_DIRECTORY)
            try inotify.watch(folder, path(name))
            folders.append(folder)
        }
        #expect(inotify.watchCount == 2)
        let file = try FileDescriptor.open(directory.child(decomposed + "/x"), flags: O_WRONLY | O_CREAT, mode: 0o644)
        _ = file
        var seen: [InotifyEvent] = []
        try waitUntilSync("the event in the decomposed folder", timeout: 10) {
            seen += inotify.read()
            return seen.contains { $0.has(IN_CREATE) }
        }
        #expect(seen.filter { $0.has(IN_CREATE) }.map(\.path) == [path(decomposed + "/x")])
        inotify.unwatch(under: path(composed))
        #expect(inotify.isWatched(path(decomposed)) && !inotify.isWatched(path(composed)))
    }
}
