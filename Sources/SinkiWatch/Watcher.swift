import Glibc
import SinkiLoop
import SinkiSupport

/// Turns raw inotify events into batches of paths worth looking at, on the agent's loop.
///
/// A file is ready once it is complete (`IN_CLOSE_WRITE`, or renamed into place), or once it has
/// been quiet for `delay` after its last `IN_CREATE`/`IN_MODIFY`: then nothing half-written is read.
/// Deletes and directory changes are ready at once.
public final class Watcher {
    private let loop: EventLoop
    public let inotify: Inotify
    /// Events of the agent's own writes, dropped here.
    public let echoes: EchoFilter?
    private let logger: Logger
    /// How long a file written without a close must be quiet before it is read.
    public var delayMilliseconds: UInt64
    private var poll: LoopPoll?
    private let timer: LoopTimer
    private var handler: ((WatchBatch) -> Void)?
    /// Files written but not closed yet, with the time they may be read.
    private var quiet: [WatchBatch.Change: Int64] = [:]
    private var batch = WatchBatch()

    public init(loop: EventLoop, inotify: Inotify, echoes: EchoFilter? = nil, delayMilliseconds: UInt64 = 50, logger: Logger) {
        self.loop = loop
        self.inotify = inotify
        self.echoes = echoes
        self.delayMilliseconds = delayMilliseconds
        self.logger = logger
        timer = LoopTimer(loop: loop)
    }

    /// Starts reading events; `handler` gets each batch on the loop.
    public func start(_ handler: @escaping (WatchBatch) -> Void) throws(LoopError) {
        self.handler = handler
        let poll = try LoopPoll(loop: loop, fd: inotify.fd)
        self.poll = poll
        poll.start(.readable) { [unowned self] _, _ in self.readEvents() }
    }

    public func stop() {
        poll?.stop()
        poll = nil
        timer.stop()
    }

    /// Number of files waiting to become quiet (for status and tests).
    public var waiting: Int { quiet.count }

    func readEvents() {
        let events = inotify.read()
        if events.isEmpty { return }
        absorb(events)
        flush()
    }

    /// Folds events into the pending batch (exposed to tests, which feed it events directly).
    func absorb(_ events: [InotifyEvent]) {
        var movedFrom: [UInt32: InotifyEvent] = [:]
        let now = Clock.monotonic()
        for event in events {
            if event.root < 0 {
                logger.warning("inotify queue overflowed (fs.inotify.max_queued_events); rescanning every root")
                batch.overflow = true
                continue
            }
            if event.relative.isEmpty {
                // The root directory itself went away, moved, or its file system was unmounted.
                if event.has(IN_DELETE_SELF) || event.has(IN_MOVE_SELF) || event.has(IN_UNMOUNT) || event.has(IN_IGNORED) {
                    batch.rootsGone.insert(event.root)
                }
                continue
            }
            // Self events of subdirectories repeat what the parent's watch already said.
            if event.has(IN_DELETE_SELF) || event.has(IN_MOVE_SELF) || event.has(IN_IGNORED) { continue }
            if event.has(IN_UNMOUNT) {
                ready(event.root, event.relative, recursive: true)
                continue
            }
            let name = event.relative.split(separator: "/").last ?? ""
            if TempNames.isTemporary(name) { continue }
            if let echoes, echoes.consume(event) { continue }
            if event.has(IN_MOVED_FROM) {
                movedFrom[event.cookie] = event
                ready(event.root, event.relative, recursive: false)
                continue
            }
            if event.has(IN_MOVED_TO) {
                if event.isDirectory {
                    if let from = movedFrom.removeValue(forKey: event.cookie), from.root == event.root {
                        inotify.renameWatches(root: event.root, from: from.relative, to: event.relative)
                    }
                    ready(event.root, event.relative, recursive: true)
                } else {
                    movedFrom.removeValue(forKey: event.cookie)
                    ready(event.root, event.relative, recursive: false)
                }
                continue
            }
            if event.isDirectory {
                ready(event.root, event.relative, recursive: event.has(IN_CREATE))
                continue
            }
            if event.has(IN_CLOSE_WRITE) || event.has(IN_DELETE) || event.has(IN_ATTRIB) {
                ready(event.root, event.relative, recursive: false)
            } else if event.has(IN_CREATE) || event.has(IN_MODIFY) {
                let change = WatchBatch.Change(root: event.root, relative: event.relative, recursive: false)
                quiet[change] = now + Int64(delayMilliseconds) * 1_000_000
            }
        }
        // A directory moved out of every root: its watches would report on a foreign tree.
        for event in movedFrom.values where event.isDirectory {
            inotify.unwatch(root: event.root, under: event.relative)
        }
    }

    private func ready(_ root: Int, _ relative: String, recursive: Bool) {
        let change = WatchBatch.Change(root: root, relative: relative, recursive: recursive)
        quiet[WatchBatch.Change(root: root, relative: relative, recursive: false)] = nil
        batch.changes.append(change)
    }

    /// Hands the ready part of the batch over and arms the timer for files still being written.
    func flush() {
        let now = Clock.monotonic()
        var earliest = Int64.max
        for (change, deadline) in quiet {
            if deadline <= now {
                quiet[change] = nil
                batch.changes.append(change)
            } else {
                earliest = min(earliest, deadline)
            }
        }
        if !batch.isEmpty {
            let out = batch
            batch = WatchBatch()
            handler?(out)
        }
        if earliest != .max {
            let milliseconds = UInt64(max(1, (earliest - now + 999_999) / 1_000_000))
            timer.start(after: milliseconds) { [unowned self] in self.flush() }
        } else {
            timer.stop()
        }
    }
}
