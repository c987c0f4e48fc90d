import Glibc
import SinkiSupport
import Synchronization

/// One raw inotify event, with its watch translated to the root and directory it stands for.
public struct InotifyEvent: Sendable, Equatable {
    /// Index of the root in the watcher's list; -1 for queue-wide events (overflow).
    public var root: Int
    /// The entry's path below the root (`""` for an event about the watched directory itself).
    public var relative: String
    public var mask: UInt32
    public var cookie: UInt32

    public var isDirectory: Bool { mask & UInt32(IN_ISDIR) != 0 }
    /// The entry as a path inside its root (for an event of a root; not of the queue).
    public var path: LocalPath { LocalPath(RootID(root), relative) }
    public func has(_ flag: Int32) -> Bool { mask & UInt32(bitPattern: flag) != 0 }
}

/// The inotify instance: one descriptor for every root, and the table of watches.
///
/// Watches are added from whichever executor walks the tree (the kernel call is thread-safe) while
/// events are read on the loop, so the table sits behind a mutex.
public final class Inotify: Sendable {
    public let fd: Int32
    private let table = Mutex(WatchTable())

    /// The events sinkid listens for on every directory. No IN_DONT_FOLLOW: the watch goes through
    /// the `/proc/self/fd` link on purpose, which resolves to exactly the directory that was opened.
    public static let mask: UInt32 = UInt32(IN_CREATE | IN_DELETE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO
        | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR) | UInt32(IN_EXCL_UNLINK)

    struct WatchTable {
        var byDescriptor: [Int32: (root: Int, relative: String)] = [:]
        var byPath: [WatchKey: Int32] = [:]
    }

    struct WatchKey: Hashable {
        var root: Int
        var relative: String
    }

    public init() throws(SystemError) {
        fd = try syscall("inotify_init1") { inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC)) }
    }

    deinit { close(fd) }

    /// Watches the open directory `directory`, known as `relative` below root number `root`.
    /// Going through `/proc/self/fd` watches exactly the directory that was opened, even if the
    /// path is swapped for a symlink meanwhile.
    public func watch(_ directory: FileDescriptor, root: Int, relative: String) throws(SystemError) {
        let wd = try syscall("inotify_add_watch", path: directory.path) {
            inotify_add_watch(fd, "/proc/self/fd/\(directory.raw)", Inotify.mask)
        }
        table.withLock { table in
            if let old = table.byDescriptor[wd], old.root != root || old.relative != relative {
                table.byPath[WatchKey(root: old.root, relative: old.relative)] = nil
            }
            table.byDescriptor[wd] = (root, relative)
            table.byPath[WatchKey(root: root, relative: relative)] = wd
        }
    }

    /// Whether a directory is currently watched.
    public func isWatched(root: Int, relative: String) -> Bool {
        table.withLock { $0.byPath[WatchKey(root: root, relative: relative)] != nil }
    }

    public var watchCount: Int { table.withLock { $0.byDescriptor.count } }

    /// A directory moved inside a root: its watches (and those below it) now stand for the new path.
    public func renameWatches(root: Int, from old: String, to new: String) {
        table.withLock { table in
            for (wd, entry) in table.byDescriptor where entry.root == root && PathText.isWithin(entry.relative, old) {
                let moved = new + entry.relative.dropFirst(old.count)
                table.byPath[WatchKey(root: root, relative: entry.relative)] = nil
                table.byDescriptor[wd] = (root, moved)
                table.byPath[WatchKey(root: root, relative: moved)] = wd
            }
        }
    }

    /// Stops watching a directory and everything below it (it left the root).
    public func unwatch(root: Int, under relative: String) {
        let removed: [Int32] = table.withLock { table in
            var removed: [Int32] = []
            for (wd, entry) in table.byDescriptor where entry.root == root && (relative.isEmpty || PathText.isWithin(entry.relative, relative)) {
                removed.append(wd)
                table.byDescriptor[wd] = nil
                table.byPath[WatchKey(root: root, relative: entry.relative)] = nil
            }
            return removed
        }
        for wd in removed { inotify_rm_watch(fd, wd) }
    }

    /// Reads every event queued now (non-blocking), translated to roots and paths.
    public func read() -> [InotifyEvent] {
        var events: [InotifyEvent] = []
        let capacity = 256 * 1024
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 8)
        defer { buffer.deallocate() }
        while true {
            let count = Glibc.read(fd, buffer, capacity)
            if count <= 0 { break }
            var offset = 0
            table.withLock { table in
                while offset < count {
                    let header = (buffer + offset).loadUnaligned(as: inotify_event.self)
                    let nameLength = Int(header.len)
                    let namePointer = (buffer + offset + MemoryLayout<inotify_event>.size).assumingMemoryBound(to: CChar.self)
                    offset += MemoryLayout<inotify_event>.size + nameLength
                    if header.mask & UInt32(IN_Q_OVERFLOW) != 0 {
                        events.append(InotifyEvent(root: -1, relative: "", mask: header.mask, cookie: 0))
                        continue
                    }
                    guard let entry = table.byDescriptor[header.wd] else { continue }
                    if header.mask & UInt32(IN_IGNORED) != 0 {
                        table.byDescriptor[header.wd] = nil
                        if table.byPath[WatchKey(root: entry.root, relative: entry.relative)] == header.wd {
                            table.byPath[WatchKey(root: entry.root, relative: entry.relative)] = nil
                        }
                        events.append(InotifyEvent(root: entry.root, relative: entry.relative, mask: header.mask, cookie: 0))
                        continue
                    }
                    var relative = entry.relative
                    if nameLength > 0 {
                        let name = String(cString: namePointer)
                        relative = relative.isEmpty ? name : relative + "/" + name
                    }
                    events.append(InotifyEvent(root: entry.root, relative: relative, mask: header.mask, cookie: header.cookie))
                }
            }
        }
        return events
    }
}
