import Glibc
import SinkiLoop
import SinkiSupport

/// Turns raw inotify events into batches of paths worth looking at, on the agent's loop.
///
/// A file is ready once it is complete (`IN_CLOSE_WRITE`, or renamed into place), or once it has
/// been quiet for `delay` after its last `IN_CREATE`/`IN_MODIFY`: then nothing half-written is read.
/// Deletes and directory changes are ready at once. Names that look temporary wait a grace period
/// (`TemporaryNames`), and so does a file renamed to such a name (an editor's backup: the real file
/// comes back in a moment). Renames inside a root, paired by cookie, are reported as moves.
public final class Watcher {
    private let loop: EventLoop
    public let inotify: Inotify
    /// Events of the agent's own writes, dropped here.
    public let echoes: EchoFilter?
    private let logger: Logger
    /// How long a file written without a close must be quiet before it is read.
    public var delayMilliseconds: UInt64
    /// How long a temporary-looking name waits before it is read.
    public var graceMilliseconds: UInt64
    private var poll: LoopPoll?
    private let timer: LoopTimer
    private var handler: ((WatchBatch) -> Void)?
    /// Paths held back until a deadline (monotonic ns): files still being written, temporary names.
    private var held: [WatchBatch.Change: Int64] = [:]
    private var batch = WatchBatch()

    public init(loop: EventLoop, inotify: Inotify, echoes: EchoFilter? = nil, delayMilliseconds: UInt64 = 50,
                graceMilliseconds: UInt64 = 500, logger: Logger) {
        self.loop = loop
        self.inotify = inotify
        self.echoes = echoes
        self.delayMilliseconds = delayMilliseconds
        self.graceMilliseconds = graceMilliseconds
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

    /// Number of paths held back (for status and tests).
    public var waiting: Int { held.count }

    func readEvents() {
        let events = inotify.read()
        if events.isEmpty { return }
        absorb(events)
        flush()
    }

    /// Folds events into the pending batch (tests feed it events directly).
    func absorb(_ events: [InotifyEvent]) {
        var movedFrom: [UInt32: (event: InotifyEvent, path: LocalPath)] = [:]
        let now = Clock.monotonic()
        let quietDeadline = now + Int64(delayMilliseconds) * 1_000_000
        let graceDeadline = now + Int64(max(graceMilliseconds, delayMilliseconds)) * 1_000_000
        for event in events {
            guard let path = event.path else {
                logger.warning("inotify queue overflowed (fs.inotify.max_queued_events); rescanning every root")
                batch.overflow = true
                continue
            }
            if path.relative.isEmpty {
                // The root directory itself went away, moved, or its file system was unmounted.
                if event.has(IN_DELETE_SELF) || event.has(IN_MOVE_SELF) || event.has(IN_UNMOUNT) || event.has(IN_IGNORED) {
                    batch.rootsGone.insert(path.root)
                }
                continue
            }
            // Self events of subdirectories repeat what the parent's watch already said.
            if event.has(IN_DELETE_SELF) || event.has(IN_MOVE_SELF) || event.has(IN_IGNORED) { continue }
            if event.has(IN_UNMOUNT) {
                ready(path, recursive: true)
                continue
            }
            let name = Substring(path.name)
            if TempNames.isTemporary(name) { continue }
            if let echoes, echoes.consume(event, at: path) {
                // A folder the agent made itself is looked at once anyway (cheap: its row and its watch
                // are in place), so that an expectation gone stale can never hide a folder someone else
                // made, and with it everything written in it before it is watched.
                if event.isDirectory && (event.has(IN_CREATE) || event.has(IN_MOVED_TO)) { ready(path, recursive: false) }
                continue
            }
            let temporary = TemporaryNames.looksTemporary(name)
            if event.has(IN_MOVED_FROM) {
                movedFrom[event.cookie] = (event, path)
                continue
            }
            if event.has(IN_MOVED_TO) {
                let from = movedFrom.removeValue(forKey: event.cookie)
                let fromTemporary = from.map { TemporaryNames.looksTemporary(Substring($0.path.name)) } ?? false
                // Into another root, renameWatches drops the watches instead.
                if let from, from.event.isDirectory { inotify.renameWatches(from: from.path, to: path) }
                if let from, temporary && !fromTemporary {
                    // A real file renamed to a backup-looking name: the editor writes it anew.
                    hold(from.path, until: graceDeadline)
                    hold(path, until: graceDeadline)
                    continue
                }
                if let from, from.path.root == path.root, !fromTemporary, !temporary {
                    // The replica moves the rows and then looks at both ends itself.
                    batch.moves.append(WatchBatch.Move(from: from.path, to: path, isDirectory: event.isDirectory))
                    continue
                } else if let from {
                    fromTemporary ? hold(from.path, until: graceDeadline) : ready(from.path, recursive: false)
                }
                if temporary { hold(path, until: graceDeadline) } else { ready(path, recursive: event.isDirectory) }
                continue
            }
            if event.isDirectory {
                ready(path, recursive: event.has(IN_CREATE))
                continue
            }
            if temporary {
                hold(path, until: graceDeadline)
            } else if event.has(IN_CLOSE_WRITE) || event.has(IN_DELETE) || event.has(IN_ATTRIB) {
                ready(path, recursive: false)
            } else if event.has(IN_CREATE) || event.has(IN_MODIFY) {
                hold(path, until: quietDeadline)
            }
        }
        // Renamed away with no partner in this read: moved out of the roots (or into a place not
        // watched). A directory's watches would report on a foreign tree.
        for (event, path) in movedFrom.values {
            if event.isDirectory { inotify.unwatch(under: path) }
            if TemporaryNames.looksTemporary(Substring(path.name)) {
                hold(path, until: graceDeadline)
            } else {
                ready(path, recursive: false)
            }
        }
    }

    private func hold(_ path: LocalPath, until deadline: Int64) {
        let key = WatchBatch.Change(path, recursive: false)
        held[key] = max(held[key] ?? 0, deadline)
    }

    private func ready(_ path: LocalPath, recursive: Bool) {
        held[WatchBatch.Change(path, recursive: false)] = nil
        batch.changes.append(WatchBatch.Change(path, recursive: recursive))
    }

    /// Hands the ready part of the batch over and arms the timer for what is still held.
    func flush() {
        let now = Clock.monotonic()
        var earliest = Int64.max
        for (change, deadline) in held {
            if deadline <= now {
                held[change] = nil
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

    /// The batch not yet handed over (tests).
    var pending: WatchBatch { batch }
}
