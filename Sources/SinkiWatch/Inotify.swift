import Glibc
import SinkiSupport
import Synchronization

/// One raw inotify event, with its watch translated to the root and directory it stands for.
public struct InotifyEvent: Sendable, Equatable {
    /// The entry the event is about (the watched directory itself when its relative path is the
    /// directory's); nil for an event about the whole queue (an overflow).
    public var path: LocalPath?
    public var mask: UInt32
    public var cookie: UInt32
    /// The watch it came from: the directory it happened in, whatever that directory is called now.
    public var watch: Int32

    public init(_ path: LocalPath?, mask: UInt32, cookie: UInt32 = 0, watch: Int32 = 0) {
        self.path = path
        self.mask = mask
        self.cookie = cookie
        self.watch = watch
    }

    public var isDirectory: Bool { mask & UInt32(IN_ISDIR) != 0 }
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

    /// Keyed by `LocalPath`, which compares names by their bytes: two folders whose names differ
    /// only in Unicode normalization are two watches.
    struct WatchTable {
        var byDescriptor: [Int32: LocalPath] = [:]
        var byPath: [LocalPath: Int32] = [:]
    }

    public init() throws(SystemError) {
        fd = try syscall("inotify_init1") { inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC)) }
    }

    deinit { close(fd) }

    /// Watches the open directory `directory`, known as `path`. Going through `/proc/self/fd`
    /// watches exactly the directory that was opened, even if the path is swapped for a symlink
    /// meanwhile.
    public func watch(_ directory: FileDescriptor, _ path: LocalPath) throws(SystemError) {
        let wd = try syscall("inotify_add_watch", path: directory.path) {
            inotify_add_watch(fd, "/proc/self/fd/\(directory.raw)", Inotify.mask)
        }
        table.withLock { table in
            if let old = table.byDescriptor[wd], old != path { table.byPath[old] = nil }
            table.byDescriptor[wd] = path
            table.byPath[path] = wd
        }
    }

    /// Whether a directory is currently watched.
    public func isWatched(_ path: LocalPath) -> Bool {
        table.withLock { $0.byPath[path] != nil }
    }

    /// The watch of the directory `path` is in (its parent, or the root), if that directory is watched.
    public func watchOfParent(_ path: LocalPath) -> Int32? {
        let folder = path.folderPrefix
        let parent = LocalPath(path.root, folder.isEmpty ? "" : String(folder.dropLast()))
        return table.withLock { $0.byPath[parent] }
    }

    public var watchCount: Int { table.withLock { $0.byDescriptor.count } }

    /// A directory moved inside a root: its watches (and those below it) now stand for the new path.
    /// (Into another root, the watches go: their events would be reported under the old root.)
    public func renameWatches(from old: LocalPath, to new: LocalPath) {
        if old.root != new.root { return unwatch(under: old) }
        table.withLock { table in
            for (wd, entry) in table.byDescriptor where entry.isWithin(old) {
                // Cut by bytes, as matched: a name's last Character may take in the slash after it.
                let moved = LocalPath(new.root, new.relative + String(decoding: entry.relative.utf8.dropFirst(old.relative.utf8.count), as: UTF8.self))
                table.byPath[entry] = nil
                table.byDescriptor[wd] = moved
                table.byPath[moved] = wd
            }
        }
    }

    /// Stops watching a directory and everything below it (it left the root).
    public func unwatch(under path: LocalPath) {
        let removed: [Int32] = table.withLock { table in
            var removed: [Int32] = []
            for (wd, entry) in table.byDescriptor where entry.isWithin(path) {
                removed.append(wd)
                table.byDescriptor[wd] = nil
                table.byPath[entry] = nil
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
                        events.append(InotifyEvent(nil, mask: header.mask))
                        continue
                    }
                    guard let entry = table.byDescriptor[header.wd] else { continue }
                    if header.mask & UInt32(IN_IGNORED) != 0 {
                        table.byDescriptor[header.wd] = nil
                        if table.byPath[entry] == header.wd { table.byPath[entry] = nil }
                        events.append(InotifyEvent(entry, mask: header.mask, watch: header.wd))
                        continue
                    }
                    let path = nameLength > 0 ? entry.appending(String(cString: namePointer)) : entry
                    events.append(InotifyEvent(path, mask: header.mask, cookie: header.cookie, watch: header.wd))
                }
            }
        }
        return events
    }
}
