import Dispatch
import CSystemShim
import Foundation
import Glibc
import SinkiRecord
import SinkiSupport
import Synchronization

/// The content-defined chunks of every user (docs/chunking.md), on disk under `DATA/chunks/`: per
/// user, each chunk stored once however many files and versions name it, named by its SHA-256. One
/// user's chunks are never visible to, nor shared with, another.
///
/// On-disk format, one folder per user:
///
/// - `KEY/`: `KEY` is the SHA-256 (64 lowercase hex digits) of the user's name in UTF-8, so that any
///   name makes a safe folder name of one length.
/// - `KEY/user`: the user's name, written once (as `user.tmp.PID`, then renamed): garbage collection
///   reads it to ask the record store what the user's records name, and leaves alone a folder whose
///   `KEY` is not the hash of the name it holds.
/// - `KEY/lock`: an empty file, `flock`ed by every server sharing the folder. Shared by whatever adds a
///   chunk, finds one present (`missing`) or checks a modify's chunks until its commit; exclusive while
///   garbage collection deletes and while a damaged chunk is removed. So a chunk found present, or
///   checked for a record, is never deleted before that record is committed (and then it is named).
/// - `KEY/XX/HASH`: a chunk's bytes (mode 0600), `XX` the first two hex digits of `HASH`. It arrives by
///   a rename of a finished tus upload (`uploads/ID.bin`), never by a copy, so the uploads folder must
///   be on the same file system (checked at start). Its mtime is when it was last uploaded or found
///   present: garbage collection keeps a chunk no record names until its mtime is `grace` old.
/// - `KEY/scoped/PREFIX/XX/HASH`: empty markers, `PREFIX` the SHA-256 of a token's path prefix: a token
///   narrowed to that prefix uploaded these bytes within the grace (their mtime). Such a token is told
///   every chunk is missing and may name in a record, read or report damaged only the chunks it
///   uploaded itself, so it cannot probe or read the user's content outside its prefix by hash.
///
/// Durability: a finished chunk is not fsynced (write-back is started); a modify that names chunks
/// changed (`ctime`) since the start of the last `syncfs` of this file system runs one `syncfs` before
/// its commit (`makeDurable`), which also covers the renames and chunks written by other servers on
/// this machine. Servers on other machines reach the folder over NFS, whose close flushes and commits.
public final class ChunkStore: Sendable {
    let directory: String
    let logger: Logger
    /// `Clock.now()` when the last successful `syncfs` began: every chunk changed before it is durable.
    private let syncedBefore = Atomic<Int64>(0)
    /// For tests: called at the named points of a garbage collection, with the user.
    let collectionHook = Mutex<(@Sendable (CollectionPoint, String) -> Void)?>(nil)

    /// The largest chunk (`ChunkProfile.large.maximum`, 2 MiB), as a chunk upload's length may be.
    static let maxChunkBytes = Int64(ChunkProfile.large.maximum)
    /// Chunk times come from the kernel's coarse clock and may lag `Clock.now()` by a tick or so: a
    /// chunk changed this close before a `syncfs` began is synced again rather than assumed synced.
    private static let clockSlack: Int64 = 1_000_000_000
    /// Garbage collection deletes at most this many chunks per hold of the exclusive lock, so that a
    /// modify of the user waits at most that long.
    static let deletionsPerLock = 512

    /// The points of a garbage collection pass where tests may step in.
    enum CollectionPoint: Sendable {
        /// The user's referenced set is read, the candidates are listed, the lock is not yet taken.
        case beforeLocking
        /// The exclusive lock is held, nothing is deleted yet.
        case locked
    }

    init(directory: String, logger: Logger) throws(ServerError) {
        self.directory = directory
        self.logger = logger
        do {
            try makeDirectories(directory)
        } catch {
            throw ServerError(.store, "cannot create the chunks folder \(directory): \(error)")
        }
    }

    // MARK: Names and places

    /// Whether `name` is a chunk name: 64 lowercase hex digits.
    static func isName(_ name: String) -> Bool { ContentID.rawHash(name) != nil }

    /// The folder name of a user, or of a token's prefix: the SHA-256 of its UTF-8.
    static func key(_ text: String) -> String { Digest.sha256Hex(Array(text.utf8)) }

    func userFolder(_ user: String) -> String { directory + "/" + Self.key(user) }

    /// Where the chunk `name` of `user` lives (whether or not it does).
    func path(user: String, chunk name: String) -> String { userFolder(user) + "/" + name.prefix(2) + "/" + name }

    private func markerPath(user: String, prefix: String, chunk name: String) -> String {
        userFolder(user) + "/scoped/" + Self.key(prefix) + "/" + name.prefix(2) + "/" + name
    }

    /// Makes the user's folder and its `user` file when missing.
    private func prepare(_ user: String) throws(SystemError) {
        let folder = userFolder(user)
        if mkdir(folder, 0o700) != 0 && errno != EEXIST { throw SystemError("mkdir", errno: errno, path: folder) }
        guard access(folder + "/user", F_OK) != 0 else { return }
        // Per call: two servers, or two requests of one, may make the folder at once; each writes its
        // own and renames it in.
        let temporary = folder + "/user.tmp." + String(getpid()) + "." + RandomID.hex(bytes: 8)
        let file = try FileDescriptor.open(temporary, flags: O_WRONLY | O_CREAT | O_TRUNC, mode: 0o600)
        try file.write(Array(user.utf8))
        try syscall("rename", path: temporary) { rename(temporary, folder + "/user") }
    }

    /// Takes the user's lock across servers (see the type comment); released when the descriptor goes.
    /// Nil when the user has no chunks folder and `create` is false: then there is nothing to guard.
    func lock(_ user: String, exclusive: Bool, create: Bool = false) throws(SystemError) -> FileDescriptor? {
        if create { try prepare(user) }
        let path = userFolder(user) + "/lock"
        let file: FileDescriptor
        do {
            // Read-write: NFS maps flock to byte-range locks, whose exclusive kind needs a writable descriptor.
            file = try FileDescriptor.open(path, flags: O_RDWR | (create ? O_CREAT : 0), mode: 0o600)
        } catch where error.errno == ENOENT && !create {
            return nil
        }
        try syscall("flock", path: path) { flock(file.raw, exclusive ? LOCK_EX : LOCK_SH) }
        return file
    }

    // MARK: Looking chunks up

    /// What `lstat` says of a held chunk.
    struct Held {
        var size: Int64
        /// Nanoseconds since the epoch.
        var modified: Int64
        var changed: Int64
    }

    private static func held(_ path: String) -> Held? {
        var info = Glibc.stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        return Held(size: Int64(info.st_size),
                    modified: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec),
                    changed: Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec))
    }

    /// The chunk `name` of `user`, nil when not held.
    func held(user: String, chunk name: String) -> Held? { Self.held(path(user: user, chunk: name)) }

    /// Whether a token narrowed to `prefix` uploaded the chunk within the grace (its marker is there).
    func uploaded(user: String, prefix: String, chunk name: String) -> Bool {
        access(markerPath(user: user, prefix: prefix, chunk: name), F_OK) == 0
    }

    /// Whether a token of `user` (narrowed to `prefix`, when given) may see the chunk: held, and for a
    /// narrowed token uploaded by it.
    func visible(user: String, prefix: String?, chunk name: String) -> Held? {
        if let prefix, !uploaded(user: user, prefix: prefix, chunk: name) { return nil }
        return held(user: user, chunk: name)
    }

    /// Sets the chunk's mtime to now, so that garbage collection keeps it another grace; false when the
    /// user does not hold it. The caller holds the user's lock.
    func touch(user: String, chunk name: String) -> Bool {
        var times = [timespec(tv_sec: 0, tv_nsec: utimeOmit), timespec(tv_sec: 0, tv_nsec: utimeNow)]
        return utimensat(AT_FDCWD, path(user: user, chunk: name), &times, AT_SYMLINK_NOFOLLOW) == 0
    }

    /// For a modify, under the user's shared lock: the chunks of `names` the user lacks (for a token
    /// narrowed to `prefix`, also those it did not upload itself), or holds at another size than
    /// `sizes` says (a damaged copy: the sender uploads it again, which replaces it), each once; and the
    /// newest change time among those held, for `makeDurable`.
    func absent(_ chunks: [ChunkRef], user: String, prefix: String?) -> (missing: [String], newestChange: Int64) {
        var missing: [String] = []
        var seen = Set<String>()
        var newest: Int64 = 0
        for chunk in chunks where seen.insert(chunk.sha256).inserted {
            guard let held = visible(user: user, prefix: prefix, chunk: chunk.sha256), held.size == chunk.size else {
                missing.append(chunk.sha256)
                continue
            }
            newest = max(newest, held.changed)
        }
        return (missing, newest)
    }

    /// Makes every chunk changed at or after `newestChange` durable before a record naming it is
    /// committed: one `syncfs` of the chunks' file system when a chunk changed since the last one began
    /// (or close before it), none otherwise. It flushes the renames too, and whatever else is dirty on
    /// that file system; finished chunks started their write-back when they came in, so little is left.
    func makeDurable(newestChange: Int64) throws(SystemError) {
        guard newestChange >= syncedBefore.load(ordering: .acquiring) - Self.clockSlack else { return }
        let started = Clock.now()
        let folder = try FileDescriptor.open(directory, flags: O_RDONLY | O_DIRECTORY)
        try folder.syncFileSystem()
        var known = syncedBefore.load(ordering: .relaxed)
        while known < started {
            let (exchanged, original) = syncedBefore.compareExchange(expected: known, desired: started, ordering: .acquiringAndReleasing)
            if exchanged { break }
            known = original
        }
    }

    // MARK: Adding chunks

    /// What became of a finished chunk upload.
    enum Adoption: Equatable {
        /// Its bytes are the user's chunk now.
        case stored
        /// The user held the chunk already: the upload's bytes were dropped, the chunk touched.
        case alreadyHeld
        /// A narrowed token sent bytes that do not hash to the name: dropped.
        case refused
    }

    /// Moves a finished chunk upload's file (`source`, `length` bytes) into the user's chunks under
    /// `name`: a rename, never a copy. A chunk held already keeps its bytes (the upload's are dropped),
    /// unless it has another size than the upload, which only a damaged copy has: then the upload
    /// replaces it. A token narrowed to `prefix` proves it has a chunk before it may name it: its
    /// bytes must hash to the name (then they take the name, held or not, and the token its marker).
    func adopt(source: String, length: Int64, user: String, chunk name: String, prefix: String?) throws -> Adoption {
        let lock = try lock(user, exclusive: false, create: true)
        defer { withExtendedLifetime(lock) {} }
        let target = path(user: user, chunk: name)
        let fanOut = String(target.dropLast(name.utf8.count + 1))
        if mkdir(fanOut, 0o700) != 0 && errno != EEXIST { throw SystemError("mkdir", errno: errno, path: fanOut) }
        // A narrowed token's bytes count only when they hash to their name, checked first and whether
        // or not the user holds the chunk: the answer (and its cost) is then the same either way, so
        // the token learns nothing of content outside its prefix, and it cannot plant other bytes under
        // a name the owner's devices will then never send (issue 24 items 1 and 2). A full token's
        // upload is taken as the chunk: receivers check every chunk and report damage.
        if prefix != nil {
            // The upload's own descriptor is write-only: its bytes are read through its path.
            guard try Self.hashes(FileDescriptor.open(source, flags: O_RDONLY), length: length, to: name) else {
                unlink(source)
                logger.warning("chunk \(name) of a narrowed token's upload is other bytes than its name says; dropped")
                return .refused
            }
        }
        let adoption: Adoption
        if prefix != nil {
            // Checked bytes: whatever was held under the name is these or a damaged copy.
            try syscall("rename", path: target) { rename(source, target) }
            adoption = .stored
        } else if sinki_rename_noreplace(AT_FDCWD, source, AT_FDCWD, target) == 0 {
            adoption = .stored
        } else {
            let code = errno
            guard code == EEXIST else { throw SystemError("rename", errno: code, path: target) }
            let held = Self.held(target)
            if held?.size != length {
                // Another size: the held copy is damaged. The new bytes take its place.
                try syscall("rename", path: target) { rename(source, target) }
                logger.info("chunk \(name) held at \(held.map { String($0.size) } ?? "no") bytes replaced by an upload of \(length)")
                adoption = .stored
            } else {
                unlink(source)
                _ = touch(user: user, chunk: name)
                adoption = .alreadyHeld
            }
        }
        if let prefix {
            // The chunk is in either way; without its marker the narrowed token is told it is missing
            // when it names it, and uploads it once more.
            do { try mark(user: user, prefix: prefix, chunk: name) } catch { logger.warning("chunk \(name): \(error)") }
        }
        clearDamaged(user: user, chunk: name)
        return adoption
    }

    /// Where chunks' write-back is started, one after another, off the threads that answer requests.
    private static let writeback = DispatchQueue(label: "sinki-chunk-writeback", qos: .utility)

    /// Starts writing a new chunk's bytes to disk, later, on `writeback`.
    static func startWriteback(of file: FileDescriptor, length: Int64) {
        let fd = dup(file.raw)
        guard fd >= 0 else { return }
        writeback.async {
            _ = sinki_start_writeback(fd, 0, length)
            close(fd)
        }
    }

    /// The folder the chunk `name` of `user` lives in, made when missing (with the user's folder).
    func fanOut(user: String, chunk name: String) throws(SystemError) -> String {
        try prepare(user)
        let folder = userFolder(user) + "/" + name.prefix(2)
        if mkdir(folder, 0o700) != 0 && errno != EEXIST { throw SystemError("mkdir", errno: errno, path: folder) }
        return folder
    }

    /// Gives an unnamed file holding a whole chunk (`DirectChunkWriter`) the chunk's name, under the
    /// user's shared lock; when the user holds the chunk already at that size the file is simply let go
    /// (and the chunk touched), at another size (a damaged copy) it replaces it. For a token narrowed to
    /// `prefix` the caller has checked that the bytes hash to the name: they take the name, held or not,
    /// and the token its marker, as in `adopt(source:…)`.
    func adopt(anonymous file: FileDescriptor, length: Int64, user: String, chunk name: String, checkedFor prefix: String? = nil) throws -> Adoption {
        let lock = try lock(user, exclusive: false, create: true)
        defer { withExtendedLifetime(lock) {} }
        let target = path(user: user, chunk: name)
        if let prefix {
            try replace(target, with: file)
            do { try mark(user: user, prefix: prefix, chunk: name) } catch { logger.warning("chunk \(name): \(error)") }
            clearDamaged(user: user, chunk: name)
            return .stored
        }
        if linkat(AT_FDCWD, "/proc/self/fd/\(file.raw)", AT_FDCWD, target, AT_SYMLINK_FOLLOW) == 0 {
            clearDamaged(user: user, chunk: name)
            return .stored
        }
        let code = errno
        guard code == EEXIST else { throw SystemError("link", errno: code, path: target) }
        if Self.held(target)?.size == length {
            _ = touch(user: user, chunk: name)
            return .alreadyHeld
        }
        // Another size: the held copy is damaged. The new bytes take its place (receivers check every chunk).
        try replace(target, with: file)
        logger.info("chunk \(name) held at another size replaced by an upload of \(length)")
        clearDamaged(user: user, chunk: name)
        return .stored
    }

    /// Names the unnamed `file` `target`, in place of whatever is there.
    private func replace(_ target: String, with file: FileDescriptor) throws(SystemError) {
        let replacement = target + ".new." + RandomID.hex(bytes: 8)
        try syscall("link", path: replacement) { linkat(AT_FDCWD, "/proc/self/fd/\(file.raw)", AT_FDCWD, replacement, AT_SYMLINK_FOLLOW) }
        do { try syscall("rename", path: target) { rename(replacement, target) } } catch {
            unlink(replacement)
            throw error
        }
    }

    /// Leaves (or refreshes) the marker saying a token narrowed to `prefix` uploaded the chunk.
    private func mark(user: String, prefix: String, chunk name: String) throws(SystemError) {
        let marker = markerPath(user: user, prefix: prefix, chunk: name)
        let fanOut = String(marker.dropLast(name.utf8.count + 1))
        try makeDirectories(fanOut)
        let file = try FileDescriptor.open(marker, flags: O_WRONLY | O_CREAT, mode: 0o600)
        try syscall("futimens", path: marker) { futimens(file.raw, nil) }
    }

    /// Whether `length` bytes of `file` hash (SHA-256) to `name`.
    static func hashes(_ file: FileDescriptor, length: Int64, to name: String) throws(SystemError) -> Bool {
        let digest = Digest(.sha256)
        let step = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: step, alignment: 16)
        defer { buffer.deallocate() }
        var offset: Int64 = 0
        while offset < length {
            let want = Int(min(Int64(step), length - offset))
            let got = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]), at: offset)
            if got == 0 { break }
            digest.update(UnsafeRawBufferPointer(rebasing: buffer[0..<got]))
            offset += Int64(got)
        }
        return offset == length && digest.finishHex() == name
    }

    // MARK: Removing chunks

    /// What a report of a damaged chunk found.
    enum DamageCheck: Equatable {
        case notHeld
        /// The bytes hash to the name: kept.
        case intact
        /// The bytes do not hash to the name: removed.
        case removed
    }

    /// A receiver found that the chunk's bytes do not hash to its name: hashes them here, under the
    /// user's exclusive lock, and removes the chunk only if they do not.
    func removeIfDamaged(user: String, chunk name: String) throws -> DamageCheck {
        guard let lock = try lock(user, exclusive: true) else { return .notHeld }
        defer { withExtendedLifetime(lock) {} }
        let target = path(user: user, chunk: name)
        guard let held = Self.held(target) else { return .notHeld }
        let file = try FileDescriptor.open(target, flags: O_RDONLY)
        if try Self.hashes(file, length: held.size, to: name) { return .intact }
        // Noted first: from the moment it is gone, records naming it are answered incomplete.
        try noteDamaged(user: user, chunk: name)
        unlink(target)
        logger.warning("chunk \(name) of \(quoted(user)) was reported damaged and does not hash to its name; removed")
        return .removed
    }

    /// Removes every chunk of `user` (`sinkid serve user remove`); returns whether there were any.
    public static func removeAll(user: String, directory: String) throws -> Bool {
        let folder = directory + "/" + key(user)
        guard FileManager.default.fileExists(atPath: folder) else { return false }
        try FileManager.default.removeItem(atPath: folder)
        return true
    }

    // MARK: Garbage collection

    /// What the record store says a user's live records name: every chunk of their manifests, and the
    /// highest change tag it looked at (records changed later come through a second look from there).
    typealias References = @Sendable (_ user: String, _ after: Int64) throws -> ChunkReferences

    /// Removes the chunks no live record names whose mtime is `grace` old or more, and markers as old,
    /// for every user; returns how many chunks went. Safe against uploads and modifies at the same time
    /// (see the type comment): the candidates are listed against what the records named, then, under
    /// the user's exclusive lock, checked once more against the records committed since and the mtime.
    func collect(references: References, now: Int64, grace: Int64) -> Int {
        guard let users = try? FileDescriptor.open(directory, flags: O_RDONLY | O_DIRECTORY).listDirectory().names else { return 0 }
        var removed = 0
        for key in users where Self.isName(key) {
            let folder = directory + "/" + key
            guard let bytes = try? FileDescriptor.open(folder + "/user", flags: O_RDONLY).readAll(),
                  let user = String(validating: bytes, as: UTF8.self), Self.key(user) == key else { continue }
            do {
                removed += try collect(user: user, references: references, now: now, grace: grace)
            } catch {
                logger.warning("chunk collection of \(quoted(user)): \(error)")
            }
            removeMarkers(folder + "/scoped", olderThan: now - grace)
        }
        return removed
    }

    private func collect(user: String, references: References, now: Int64, grace: Int64) throws -> Int {
        var referenced = try references(user, 0)
        let folder = userFolder(user)
        var candidates: [String] = []
        for fanOut in try FileDescriptor.open(folder, flags: O_RDONLY | O_DIRECTORY).listDirectory().names where fanOut.utf8.count == 2 {
            guard let names = try? FileDescriptor.open(folder + "/" + fanOut, flags: O_RDONLY | O_DIRECTORY).listDirectory().names else { continue }
            for name in names where Self.isName(name) && name.hasPrefix(fanOut) && !referenced.names.contains(name) {
                if let held = Self.held(folder + "/" + fanOut + "/" + name), held.modified + grace <= now { candidates.append(name) }
            }
        }
        var removed = 0
        var start = 0
        while start < candidates.count {
            let batch = candidates[start..<min(candidates.count, start + Self.deletionsPerLock)]
            start = batch.endIndex
            let hook = collectionHook.withLock { $0 }
            hook?(.beforeLocking, user)
            guard let lock = try lock(user, exclusive: true) else { break }
            defer { withExtendedLifetime(lock) {} }
            hook?(.locked, user)
            // Records committed since the first look may name a candidate: every modify that checked one
            // has committed by now (it held the shared lock until then), and none can check one until this
            // lock is released, when it will find the chunk gone.
            let later = try references(user, referenced.head)
            referenced.names.formUnion(later.names)
            referenced.head = max(referenced.head, later.head)
            for name in batch where !referenced.names.contains(name) {
                let target = path(user: user, chunk: name)
                // Touched (uploaded again, found present) since it was listed: kept.
                guard let held = Self.held(target), held.modified + grace <= now else { continue }
                if unlink(target) == 0 { removed += 1 }
            }
        }
        removeDamagedMarkers(user: user, referenced: referenced.names)
        return removed
    }

    /// Markers of narrowed tokens' uploads older than `cutoff`.
    private func removeMarkers(_ scoped: String, olderThan cutoff: Int64) {
        guard let prefixes = try? FileDescriptor.open(scoped, flags: O_RDONLY | O_DIRECTORY).listDirectory().names else { return }
        for prefix in prefixes {
            let prefixFolder = scoped + "/" + prefix
            for fanOut in (try? FileDescriptor.open(prefixFolder, flags: O_RDONLY | O_DIRECTORY).listDirectory().names) ?? [] {
                let fanOutFolder = prefixFolder + "/" + fanOut
                for name in (try? FileDescriptor.open(fanOutFolder, flags: O_RDONLY | O_DIRECTORY).listDirectory().names) ?? [] {
                    let marker = fanOutFolder + "/" + name
                    if let held = Self.held(marker), held.modified < cutoff { unlink(marker) }
                }
            }
        }
    }
}

/// `UTIME_OMIT` and `UTIME_NOW` of <sys/stat.h> (utimensat: leave a time alone, set it to now), macros
/// Glibc's Swift module does not export.
private let utimeOmit = (1 << 30) - 2
private let utimeNow = (1 << 30) - 1
