import Glibc
import Synchronization
import SinkiRecord
import SinkiSupport

/// What a walk found, carried back from the thread it ran on (`report` nil: the directory was gone).
struct WalkOutcome: Sendable {
    var report: WalkReport?
    var watchLimitHit: Bool
    var unwatched: [String]
}

/// Walking a root off the replica's queue, and the few looks at a root as a whole.
enum Walk {
    /// Walks `path` (its root's `safeRoot`), placing a watch on each directory before it is listed,
    /// its subtrees on several threads.
    static func tree(_ safeRoot: SafeRoot, at path: LocalPath, watching link: (any WatchLink)?, rules: IgnoreRules,
                     logger: Logger) throws(SystemError) -> WalkOutcome {
        let unwatched = UnwatchedList()
        let watch: @Sendable (FileDescriptor, String) -> Void = { directory, rel in
            guard let link else { return }
            do throws(SystemError) {
                try link.watch(directory, LocalPath(path.root, rel))
            } catch where error.errno == ENOSPC {
                unwatched.append(rel)
            } catch {
                logger.warning("cannot watch \(directory.path): \(error)")
            }
        }
        var ignored: (@Sendable (String, Bool) -> Bool)?
        if !rules.isEmpty { ignored = { @Sendable rel, isDirectory in rules.isIgnored(rel, isDirectory: isDirectory) } }
        let walker = TreeWalker(beforeListing: watch, isIgnored: ignored)
        do {
            let report = try walker.walk(root: try safeRoot.descriptor(), relative: path.relative)
            let missed = unwatched.paths
            return WalkOutcome(report: report, watchLimitHit: !missed.isEmpty, unwatched: missed)
        } catch {
            guard error.errno == ENOENT || error.errno == ENOTDIR || error.errno == ELOOP else { throw error }
            return WalkOutcome(report: nil, watchLimitHit: false, unwatched: [])
        }
    }

    /// Whether the root's directory was removed (its descriptor now points at an unlinked directory)
    /// or is no longer at its path.
    static func rootDeleted(_ safeRoot: SafeRoot, path: String) -> Bool {
        var opened = Glibc.stat()
        guard fstat(safeRoot.fd, &opened) == 0 else { return true }
        if opened.st_nlink == 0 { return true }
        var atPath = Glibc.stat()
        guard fstatat(AT_FDCWD, path, &atPath, 0) == 0 else { return true }
        return atPath.st_ino != opened.st_ino || atPath.st_dev != opened.st_dev
    }

    /// Removes temporary files a kill left in the middle of a write (only on the first walk of a root
    /// after a start, before this agent writes anything of its own there).
    static func removeLeftovers(_ temporaries: [String], in safeRoot: SafeRoot, logger: Logger) {
        for relative in temporaries {
            var made: [String] = []
            guard let parent = try? safeRoot.openParent(of: relative, create: false, made: &made) else { continue }
            if unlinkat(parent.raw, SafeRoot.name(of: relative), 0) == 0 {
                logger.info("removed \(quoted(safeRoot.path + "/" + relative)), left by a write that was cut off")
            }
        }
    }
}

/// Directories a walk could not watch (the inotify watch limit), collected by its callback from
/// the threads the walk runs on.
final class UnwatchedList: Sendable {
    private let list = Mutex<[String]>([])

    func append(_ path: String) { list.withLock { $0.append(path) } }
    var paths: [String] { list.withLock { $0 } }
}

/// Large files whose content vanished lately, kept a few seconds: a large file is not read when it
/// appears, so a new one with the same inode, size and mtime (a rename keeps all three; a new file may
/// get a freed inode, not the old mtime) is named by the content it had there, and its upload finds
/// every chunk on the server already.
struct MoveMemory {
    private struct Gone {
        var path: String
        var hash: String
        var size: Int64
        var inode: UInt64
        var mtime: Int64
        var time: Int64
    }

    private var gone: [Gone] = []
    /// How long a vanished file stays a candidate.
    var window: Int64 = 10_000_000_000

    /// Notes a vanished Local entry, if it is a large file with a known name.
    mutating func rememberGone(_ path: String, _ facts: LocalFacts) {
        guard facts.kind == .file, facts.size > ContentID.wholeFileLimit, !facts.hash.isEmpty else { return }
        let now = Clock.monotonic()
        gone.removeAll { now - $0.time >= window || $0.path == path }
        gone.append(Gone(path: path, hash: facts.hash, size: facts.size, inode: facts.inode, mtime: facts.mtime, time: now))
    }

    /// The content name of the vanished large file a new one is, if any (taken: it names one file).
    mutating func takeGone(inode: UInt64, size: Int64, mtime: Int64) -> String? {
        let now = Clock.monotonic()
        guard let index = gone.firstIndex(where: { $0.inode == inode && $0.size == size && $0.mtime == mtime && now - $0.time < window })
        else { return nil }
        return gone.remove(at: index).hash
    }
}

/// A small file's content as hashed, compressed, with the stat it was read at.
struct CachedContent {
    var stat: FileStat
    var sha256: String
    var data: [UInt8]
    /// The covered extended attributes, read on the same descriptor after the bytes: the push that
    /// takes the entry opens nothing (an attribute changed since moved the ctime, so the entry is not taken).
    var xattrs: XattrDisk.Reading?

    /// What the entry costs the cache's budget: its data, and what keeping it costs beside that (its
    /// key, hash and array headers). For files of a few bytes the overhead is most of it.
    var cost: Int { data.count + Self.overhead }
    static let overhead = 256
}

/// Content read and compressed while hashing, kept for the push that follows so a new file is read
/// once; bounded by `limit` bytes.
struct PushCache {
    private var entries: [String: CachedContent] = [:]
    private var bytes = 0
    /// Enough for the batches a push pipeline holds; more only keeps memory busy on a big scan.
    static let limit = 16 << 20

    /// Which of the files of `sizes`, in order, are worth compressing for the cache: as many as its room
    /// holds now (a file's compressed size is taken to be at most its size).
    func admits(_ sizes: [Int64]) -> [Bool] {
        var room = Self.limit - bytes
        return sizes.map { size in
            let cost = Int(size) + CachedContent.overhead
            guard cost <= room else { return false }
            room -= cost
            return true
        }
    }

    mutating func remember(_ path: String, _ content: CachedContent) {
        if let old = entries.removeValue(forKey: path) { bytes -= old.cost }
        guard bytes + content.cost <= Self.limit else { return }
        entries[path] = content
        bytes += content.cost
    }

    /// The cached content of `path` if it is still what `local` says is on disk.
    mutating func take(_ path: String, matching local: LocalFacts) -> CachedContent? {
        guard let cached = entries.removeValue(forKey: path) else { return nil }
        bytes -= cached.cost
        guard cached.sha256 == local.hash, local.matches(cached.stat) else { return nil }
        return cached
    }

    /// A rename: the content moves with its path.
    mutating func move(_ from: String, to: String) {
        guard let cached = entries.removeValue(forKey: from) else { return }
        bytes -= cached.cost
        remember(to, cached)
    }

    mutating func removeAll() {
        entries = [:]
        bytes = 0
    }
}
