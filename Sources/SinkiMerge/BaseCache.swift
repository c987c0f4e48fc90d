import Glibc
import SinkiSupport

/// The last shared versions of files whose rule merges three ways (`union`, `json`, `command`),
/// addressed by their SHA-256 and bounded by `[merge] base-cache` bytes, the least recently used
/// dropped first.
///
/// On disk (the folder is the index; there is no other):
///
///     DIR/ab/ab12…ef   one file per version, named by its lowercase hex SHA-256 under a folder
///                      named by the first two digits; its mtime is when it was last used
///     DIR/.tmp-…       a version being written; any found at open are leftovers, removed
///
/// A version is written to a temporary file and renamed to its name, so a crash leaves either no
/// entry or a whole one. There is no fsync (a base is a cache: losing one costs a fallback, not
/// data); instead every read checks the bytes against the name and drops an entry that does not
/// match, so a file the kernel lost part of in a power cut is never used as a base.
///
/// Not Sendable: the agent's `Replica` owns it, and its serial queue is where the blocking file
/// work happens.
public final class BaseCache {
    public let directory: String
    /// The byte budget; 0 keeps nothing.
    public private(set) var limit: Int64
    /// Bytes held now.
    public private(set) var totalBytes: Int64 = 0
    private var order = LRUOrder()
    /// The last use time written, so that uses in one process are strictly ordered on disk too.
    private var lastStamp: Int64 = 0
    private let folder: FileDescriptor
    private let logger: Logger

    /// Opens (creating) the cache in `directory`: removes leftovers of interrupted writes, reads
    /// the entries and their last use from the folder, and drops the oldest beyond `limit`.
    public init(directory: String, limit: Int64, logger: Logger) throws(BaseCacheError) {
        self.directory = directory
        self.limit = max(0, limit)
        self.logger = logger
        do {
            try MergeWorkspace.makeFolder(directory)
            folder = try FileDescriptor.open(directory, flags: O_RDONLY | O_DIRECTORY)
        } catch {
            throw BaseCacheError("cannot open the base cache", error)
        }
        var found: [(hash: String, size: Int64, used: Int64)] = []
        do {
            for name in try folder.listDirectory().names {
                if name.hasPrefix(Self.tempPrefix) {
                    unlinkat(folder.raw, name, 0)
                    continue
                }
                guard name.utf8.count == 2, Self.isHex(name),
                      let shard = try? FileDescriptor.open(name, flags: O_RDONLY | O_DIRECTORY | O_NOFOLLOW, relativeTo: folder) else { continue }
                for entry in try shard.listDirectory().names where Self.isHash(entry) && entry.hasPrefix(name) {
                    guard let stat = try shard.statEntry(entry), stat.kind == .file else { continue }
                    found.append((entry, stat.size, stat.mtime))
                }
            }
        } catch {
            throw BaseCacheError("cannot read the base cache", error)
        }
        found.sort { ($0.used, $0.hash) < ($1.used, $1.hash) }
        for entry in found {
            order.insertNewest(entry.hash, size: entry.size)
            totalBytes += entry.size
            lastStamp = max(lastStamp, entry.used)
        }
        evict(keeping: nil)
    }

    /// Versions held now.
    public var count: Int { order.count }

    public func contains(_ sha256: String) -> Bool { order.contains(sha256) }

    /// Hashes from least to most recently used.
    public var hashesOldestFirst: [String] { order.keysOldestFirst }

    /// Keeps `bytes`; returns their hash, or nil when they alone exceed the budget (not kept).
    /// `sha256`, when the caller knows it, must match.
    @discardableResult
    public func put(_ bytes: [UInt8], sha256: String? = nil) throws(BaseCacheError) -> String? {
        let hash = ContentID.of(bytes)
        if let sha256, sha256 != hash { throw BaseCacheError("put: the bytes hash to \(hash), not \(sha256)", nil) }
        if order.contains(hash) {
            touch(hash)
            return hash
        }
        guard Int64(bytes.count) <= limit else { return nil }
        let temp = Self.tempPrefix + RandomID.hex(bytes: 8)
        do {
            let file = try FileDescriptor.open(temp, flags: O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o600, relativeTo: folder,
                                               displayPath: directory + "/" + temp)
            try file.write(bytes)
            try install(temp, as: hash, file: file)
        } catch {
            unlinkat(folder.raw, temp, 0)
            throw BaseCacheError("cannot keep a base version", error)
        }
        add(hash, size: Int64(bytes.count))
        return hash
    }

    /// Keeps the content of the file at `path` (not following a symlink at its end), read once
    /// while it is named (`ContentID`); returns its name, or nil when it alone exceeds the budget.
    @discardableResult
    public func put(file path: String) throws(BaseCacheError) -> String? {
        let temp = Self.tempPrefix + RandomID.hex(bytes: 8)
        do {
            let input = try FileDescriptor.open(path, flags: O_RDONLY | O_NOFOLLOW)
            let expected = try input.stat().size
            guard expected <= limit else { return nil }
            let output = try FileDescriptor.open(temp, flags: O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o600, relativeTo: folder,
                                                 displayPath: directory + "/" + temp)
            var hasher = ContentHasher(expectedSize: expected)
            let size = try input.copyAll(to: output) { hasher.feed($0) }
            let named = hasher.finish()
            // A file that changed size while it was copied is named by what it was meant to be: not kept.
            guard named.complete else {
                unlinkat(folder.raw, temp, 0)
                return nil
            }
            let hash = named.id
            if order.contains(hash) || size > limit {
                unlinkat(folder.raw, temp, 0)
                if order.contains(hash) { touch(hash) }
                return size > limit ? nil : hash
            }
            try install(temp, as: hash, file: output)
            add(hash, size: size)
            return hash
        } catch {
            unlinkat(folder.raw, temp, 0)
            throw BaseCacheError("cannot keep a base version of \(path)", error)
        }
    }

    /// The version with this hash, checked against it; nil when it is not kept (or was damaged:
    /// then it is dropped). A hit counts as a use.
    public func get(_ sha256: String) -> [UInt8]? {
        guard order.contains(sha256) else { return nil }
        let name = Self.relativePath(sha256)
        let bytes: [UInt8]
        do {
            let file = try FileDescriptor.open(name, flags: O_RDONLY | O_NOFOLLOW, relativeTo: folder, displayPath: directory + "/" + name)
            bytes = try file.readAll(sizeHint: Int(order.size(of: sha256) ?? 0))
        } catch {
            logger.warning("base cache: cannot read \(error); dropping it")
            remove(sha256)
            return nil
        }
        guard ContentID.of(bytes) == sha256 else {
            logger.warning("base cache: \(directory)/\(name) does not match its hash (damaged by a crash?); dropping it")
            remove(sha256)
            return nil
        }
        touch(sha256)
        return bytes
    }

    /// Marks a version as just used, so that it is dropped last; false when it is not kept.
    @discardableResult
    public func touch(_ sha256: String) -> Bool {
        guard order.contains(sha256) else { return false }
        let now = stamp()
        let spec = timespec(tv_sec: time_t(now / 1_000_000_000), tv_nsec: Int(now % 1_000_000_000))
        var times = [spec, spec]
        utimensat(folder.raw, Self.relativePath(sha256), &times, AT_SYMLINK_NOFOLLOW)
        order.use(sha256)
        return true
    }

    /// Drops a version (nothing happens when it is not kept).
    public func remove(_ sha256: String) {
        guard let size = order.remove(sha256) else { return }
        totalBytes -= size
        unlinkat(folder.raw, Self.relativePath(sha256), 0)
    }

    /// A new budget (a config reload); drops the oldest versions beyond it.
    public func setLimit(_ newLimit: Int64) {
        limit = max(0, newLimit)
        evict(keeping: nil)
    }

    // MARK: - Inside

    static let tempPrefix = ".tmp-"

    private static func isHex(_ text: String) -> Bool {
        text.utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) }
    }

    /// Whether `text` can name an entry: 64 lowercase hex digits (so a hash never walks the folder).
    static func isHash(_ text: String) -> Bool { text.utf8.count == 64 && isHex(text) }

    private static func relativePath(_ hash: String) -> String {
        precondition(isHash(hash), "bug: \(quotedHash(hash)) is not a SHA-256 in hex")
        return String(hash.prefix(2)) + "/" + hash
    }

    private static func quotedHash(_ text: String) -> String { "\"\(text.prefix(80))\"" }

    /// Renames the temporary file into place under its hash, making its shard folder if needed.
    private func install(_ temp: String, as hash: String, file: FileDescriptor) throws(SystemError) {
        let shard = String(hash.prefix(2))
        if mkdirat(folder.raw, shard, 0o700) != 0, errno != EEXIST {
            throw SystemError("mkdir", errno: errno, path: directory + "/" + shard)
        }
        try file.setModified(stamp())
        try syscall("rename", path: directory + "/" + Self.relativePath(hash)) { renameat(folder.raw, temp, folder.raw, Self.relativePath(hash)) }
    }

    /// Now, as a last-use time later than any this cache wrote before.
    private func stamp() -> Int64 {
        lastStamp = max(Clock.now(), lastStamp + 1)
        return lastStamp
    }

    private func add(_ hash: String, size: Int64) {
        order.insertNewest(hash, size: size)
        totalBytes += size
        evict(keeping: hash)
    }

    /// Drops least recently used versions until the total fits the budget; `keeping` (just added)
    /// is never dropped.
    private func evict(keeping: String?) {
        while totalBytes > limit, let oldest = order.oldest, oldest != keeping {
            logger.debug("base cache: dropping \(oldest.prefix(12)) (\(order.size(of: oldest) ?? 0) bytes) to stay within \(limit) bytes")
            remove(oldest)
        }
    }
}

/// A base cache operation that failed, with the system error behind it.
public struct BaseCacheError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var cause: SystemError?

    init(_ message: String, _ cause: (any Error)?) {
        self.message = message
        self.cause = cause as? SystemError
        if cause != nil, self.cause == nil { self.message += ": \(cause!)" }
    }

    public var description: String { cause.map { "\(message): \($0)" } ?? message }
}
