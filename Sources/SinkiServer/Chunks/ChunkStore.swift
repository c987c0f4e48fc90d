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
/// On-disk format, one folder per user (docs/server.md, "Chunks"):
///
/// - `KEY/`: `KEY` is the SHA-256 (64 lowercase hex digits) of the user's name in UTF-8, so that any
///   name makes a safe folder name of one length.
/// - `KEY/user`: the user's name, written once (as `user.tmp.PID`, then renamed): garbage collection
///   reads it to ask the record store what the user's records name, and leaves alone a folder whose
///   `KEY` is not the hash of the name it holds.
/// - `KEY/lock`: an empty file, `flock`ed by every server sharing the folder. Shared by whatever names
///   a chunk, finds one present (`missing`) or checks a modify's chunks until its commit; exclusive while
///   garbage collection deletes and while a damaged chunk is removed. So a chunk found present, or
///   checked for a record, is never deleted before that record is committed (and then it is named).
/// - `KEY/packs/ID`: packs, chunks' bytes back to back, several MiB each (`PackFiles`): a chunk costs
///   no file of its own. A pack being written holds a shared `flock` on itself.
/// - `KEY/index.db`: where each chunk is, when it was stored and last touched, and the markers of
///   narrowed tokens and of damaged chunks (`ChunkIndex`).
/// - `KEY/XX/HASH`: a chunk in the layout before packs, a file of its own; read where it is, and
///   copied into a pack by garbage collection.
///
/// A token narrowed to a prefix is told every chunk is missing, and may name in a record, read or
/// report damaged only the chunks it uploaded itself within the grace (its marker in the index), so it
/// cannot probe or read the user's content outside its prefix by hash.
///
/// Durability: a chunk's bytes are not fsynced as they arrive (their write-back is started); a modify
/// that names chunks stored since the start of the last `syncfs` of this file system runs one `syncfs`
/// before its commit (`makeDurable`), which also covers the packs and index entries written by other
/// servers on this machine. Servers on other machines reach the folder over NFS, whose close flushes
/// and commits, and whose index is opened without WAL, each commit synced.
public final class ChunkStore: Sendable {
    let directory: String
    let logger: Logger
    /// `Clock.now()` when the last successful `syncfs` began: every chunk stored before it is durable.
    private let syncedBefore = Atomic<Int64>(0)
    /// For tests: called at the named points of a garbage collection, with the user.
    let collectionHook = Mutex<(@Sendable (CollectionPoint, String) -> Void)?>(nil)
    /// The folder is on NFS, shared with servers on other machines.
    let shared: Bool
    /// Open indexes and pack appenders, by user, the most recently used last.
    private let open = Mutex<(indexes: [String: ChunkIndex], appenders: [String: PackAppender], order: [String])>(([:], [:], []))

    /// The largest chunk (`ChunkProfile.large.maximum`, 2 MiB), as a chunk upload's length may be.
    static let maxChunkBytes = Int64(ChunkProfile.large.maximum)
    /// A pack is left for a new one once it passes this.
    static let packBytes: Int64 = 8 << 20
    /// Users whose index and current pack stay open at once.
    static let openUsers = 64
    /// Chunk times come from the server's clock and may be a little behind a `syncfs` that began on
    /// another thread: a chunk stored this close before a `syncfs` began is synced again rather than
    /// assumed synced.
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
        shared = sinki_file_system_type(directory) == Self.nfsMagic
    }

    /// `NFS_SUPER_MAGIC` of <linux/magic.h>.
    private static let nfsMagic = 0x6969

    // MARK: Names and places

    /// Whether `name` is a chunk name: 64 lowercase hex digits.
    static func isName(_ name: String) -> Bool { ContentID.rawHash(name) != nil }

    /// Whether `text` is lowercase hex digits only.
    static func isHex(_ text: String) -> Bool { text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) } }

    /// The folder name of a user, or of a token's prefix: the SHA-256 of its UTF-8.
    static func key(_ text: String) -> String { Digest.sha256Hex(Array(text.utf8)) }

    /// The raw key of a token's prefix, as the index keeps its markers.
    static func prefixKey(_ prefix: String) -> [UInt8] { Digest.hash(Array(prefix.utf8)) }

    func userFolder(_ user: String) -> String { directory + "/" + Self.key(user) }

    func packsFolder(_ user: String) -> String { userFolder(user) + "/packs" }

    /// Makes the user's folder, its `user` file and its packs folder when missing.
    func prepare(_ user: String) throws(SystemError) {
        let folder = userFolder(user)
        if mkdir(folder, 0o700) != 0 && errno != EEXIST { throw SystemError("mkdir", errno: errno, path: folder) }
        if mkdir(folder + "/packs", 0o700) != 0 && errno != EEXIST { throw SystemError("mkdir", errno: errno, path: folder + "/packs") }
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

    /// Whether the user has a chunks folder at all.
    func hasFolder(_ user: String) -> Bool { access(userFolder(user) + "/user", F_OK) == 0 }

    /// The user's index, opened (and made, with `create`) when needed; nil when the user has no chunks
    /// folder and `create` is false.
    func index(_ user: String, create: Bool = false) throws -> ChunkIndex? {
        let known = open.withLock { open -> ChunkIndex? in
            guard let index = open.indexes[user] else { return nil }
            Self.use(user, &open.order)
            return index
        }
        if let known { return known }
        if create { try prepare(user) } else if !hasFolder(user) { return nil }
        // Opened outside the lock: an import of the layout before packs may take a while.
        let made = try ChunkIndex(folder: userFolder(user), shared: shared)
        return open.withLock { open in
            if let raced = open.indexes[user] { return raced }
            open.indexes[user] = made
            Self.use(user, &open.order)
            Self.evict(&open)
            return made
        }
    }

    /// Ends every user's current pack here (the next chunk starts another), so that once the slots
    /// under way are written it is a pack like the others, which garbage collection may repack.
    func sealCurrentPacks() {
        for appender in open.withLock({ Array($0.appenders.values) }) { appender.seal() }
    }

    /// The appender of the user's current pack.
    private func appender(_ user: String) -> PackAppender {
        open.withLock { open in
            if let known = open.appenders[user] { return known }
            let made = PackAppender(folder: packsFolder(user), target: Self.packBytes)
            open.appenders[user] = made
            Self.use(user, &open.order)
            Self.evict(&open)
            return made
        }
    }

    private static func use(_ user: String, _ order: inout [String]) {
        if let at = order.lastIndex(of: user) { order.remove(at: at) }
        order.append(user)
    }

    /// Lets go of the least recently used users' index and pack beyond `openUsers` (a pack being
    /// written is closed when its last slot is done).
    private static func evict(_ open: inout (indexes: [String: ChunkIndex], appenders: [String: PackAppender], order: [String])) {
        while open.order.count > openUsers {
            let user = open.order.removeFirst()
            open.indexes[user] = nil
            open.appenders[user] = nil
        }
    }

    // MARK: Looking chunks up

    /// The entries of `names` (64 hex digits each) the user holds, nil for the others.
    func entries(user: String, _ names: [String]) throws -> [ChunkIndex.Entry?] {
        guard let index = try index(user) else { return names.map { _ in nil } }
        let raw = names.map { ContentID.rawHash($0) ?? [] }
        return try index.entries(raw)
    }

    /// The entries of `names` a token of `user` (narrowed to `prefix`, when given) may see: held, and for
    /// a narrowed token uploaded by it; nil for the others.
    func visible(user: String, prefix: String?, _ names: [String]) throws -> [ChunkIndex.Entry?] {
        guard let index = try index(user) else { return names.map { _ in nil } }
        let raw = names.map { ContentID.rawHash($0) ?? [] }
        var found = try index.entries(raw)
        if let prefix {
            let marked = try index.marked(raw, prefixKey: Self.prefixKey(prefix))
            for position in found.indices where !marked[position] { found[position] = nil }
        }
        return found
    }

    func visible(user: String, prefix: String?, chunk name: String) throws -> ChunkIndex.Entry? {
        try visible(user: user, prefix: prefix, [name])[0]
    }

    /// Sets the chunks' `touched` to now, so that garbage collection keeps them another grace; says
    /// which the user holds. The caller holds the user's lock.
    func touch(user: String, _ names: [String]) throws -> [Bool] {
        guard let index = try index(user) else { return names.map { _ in false } }
        return try index.touch(names.map { ContentID.rawHash($0) ?? [] }, now: Clock.now())
    }

    /// For a modify, under the user's shared lock: the chunks of `names` the user lacks (for a token
    /// narrowed to `prefix`, also those it did not upload itself), or holds at another size than
    /// `sizes` says (a damaged copy: the sender uploads it again, which replaces it), each once; and the
    /// newest time one of those held was stored, for `makeDurable`.
    func absent(_ chunks: [ChunkRef], user: String, prefix: String?) throws -> (missing: [String], newestChange: Int64) {
        var seen = Set<String>()
        let unique = chunks.filter { seen.insert($0.sha256).inserted }
        let found = try visible(user: user, prefix: prefix, unique.map(\.sha256))
        var missing: [String] = []
        var newest: Int64 = 0
        for (chunk, entry) in zip(unique, found) {
            guard let entry, entry.size == chunk.size else {
                missing.append(chunk.sha256)
                continue
            }
            newest = max(newest, entry.stored)
        }
        return (missing, newest)
    }

    /// Opens the file holding the chunk's bytes (its pack, or its own file in the layout before packs);
    /// a chunk whose pack went meanwhile (repacked) is looked up again. Nil when it is no longer held.
    func open(user: String, chunk name: String, entry: ChunkIndex.Entry) throws -> OpenChunk? {
        var current = entry
        for _ in 0..<3 {
            if let file = try Self.openIfPresent(path(user: user, chunk: name, entry: current)) { return OpenChunk(file: file, entry: current) }
            guard let again = try entries(user: user, [name])[0], again != current else { return nil }
            current = again
        }
        return nil
    }

    /// The file holding the bytes of the chunk `name` where `entry` says they are.
    func path(user: String, chunk name: String, entry: ChunkIndex.Entry) -> String {
        entry.isFile ? LegacyLayout.path(folder: userFolder(user), name: name) : packsFolder(user) + "/" + entry.pack
    }

    /// `path` opened to read; nil when there is no such file. (Written without a `do`/`catch where`
    /// in a loop: the Swift 6.x compiler's box-to-stack pass never finished such a function.)
    private static func openIfPresent(_ path: String) throws(SystemError) -> FileDescriptor? {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            throw SystemError("open", errno: errno, path: path)
        }
        return FileDescriptor(raw: fd, path: path)
    }

    /// Makes every chunk stored at or after `newestChange` durable before a record naming it is
    /// committed: one `syncfs` of the chunks' file system when a chunk was stored since the last one
    /// began (or close before it), none otherwise. It flushes the packs and the index too, and whatever
    /// else is dirty on that file system; packs started their write-back as chunks came in, so little
    /// is left.
    func makeDurable(newestChange: Int64) throws(SystemError) {
        guard newestChange >= syncedBefore.load(ordering: .acquiring) - Self.clockSlack else { return }
        try syncNow()
    }

    /// One `syncfs` of the chunks' file system, now.
    func syncNow() throws(SystemError) {
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

    /// What became of a chunk that arrived whole.
    enum Adoption: Equatable {
        /// Its bytes are the user's chunk now.
        case stored
        /// The user held the chunk already: the arrival's bytes were left unused, the chunk touched.
        case alreadyHeld
        /// A narrowed token sent bytes that do not hash to the name: dropped.
        case refused
    }

    /// A place for a chunk of `length` bytes in the user's current pack, to write it into as it
    /// arrives. A narrowed token's bytes (`checked`) are hashed as they go.
    func intake(user: String, chunk name: String, length: Int64, checked: Bool) throws -> ChunkIntake {
        guard let raw = ContentID.rawHash(name) else { throw Problem(.badRequest, detail: "\(quoted(name)) is not a chunk name") }
        try prepare(user)
        return ChunkIntake(name: name, raw: raw, slot: try appender(user).reserve(length), hashed: checked)
    }

    /// Gives the chunks fully written into their slots their names, under the user's shared lock, in
    /// one transaction of the index (`ChunkIndex.store`): a chunk held already at that size keeps its
    /// bytes (the new ones are left unused, for repacking to drop) and is touched. A token narrowed
    /// to `prefix` proves it has a chunk before it may name it: its bytes must hash to the name (then
    /// they take the name, held or not, and the token its marker); those that do not are `refused`.
    func arrive(_ intakes: [ChunkIntake], user: String, prefix: String?) throws -> [Adoption] {
        precondition(intakes.allSatisfy(\.isWhole), "bug: naming a chunk whose bytes are not all in")
        let prefixKey = prefix.map(Self.prefixKey)
        var adoptions = [Adoption](repeating: .refused, count: intakes.count)
        var arrivals: [ChunkIndex.Arrival] = []
        var positions: [Int] = []
        for (position, intake) in intakes.enumerated() {
            if prefix != nil && !intake.hashesToName {
                // A narrowed token's bytes count only when they hash to their name, checked whether or
                // not the user holds the chunk: the answer (and its cost) is then the same either way, so
                // the token learns nothing of content outside its prefix, and it cannot plant other bytes
                // under a name the owner's devices will then never send (issue 24 items 1 and 2). A full
                // token's bytes are taken as the chunk: receivers check every chunk and report damage.
                logger.warning("chunk \(intake.name) of a narrowed token's upload is other bytes than its name says; dropped")
                continue
            }
            arrivals.append(ChunkIndex.Arrival(name: intake.raw, pack: intake.slot.pack.id, offset: intake.slot.offset, size: intake.slot.length,
                                               prefixKey: prefixKey))
            positions.append(position)
        }
        guard !arrivals.isEmpty else { return adoptions }
        let lock = try lock(user, exclusive: false, create: true)
        defer { withExtendedLifetime(lock) {} }
        guard let index = try index(user, create: true) else { return adoptions }
        let (outcomes, replaced) = try index.store(arrivals, now: Clock.now())
        for (position, outcome) in zip(positions, outcomes) {
            adoptions[position] = outcome == .stored ? .stored : .alreadyHeld
            if outcome == .stored { intakes[position].slot.pack.startWriteback(intakes[position].slot.offset, intakes[position].slot.length) }
        }
        // Files of the layout before packs whose chunk now lives in a pack (a damaged copy replaced).
        for name in replaced { unlink(LegacyLayout.path(folder: userFolder(user), name: Hex.encode(name))) }
        return adoptions
    }

    /// Takes a finished chunk upload's file (`source`, `length` bytes) into the user's chunks under
    /// `name`: its bytes copied into a pack (at most 2 MiB), then named as `arrive` does; the file is
    /// the caller's to remove.
    func adopt(source: String, length: Int64, user: String, chunk name: String, prefix: String?) throws -> Adoption {
        let file = try FileDescriptor.open(source, flags: O_RDONLY)
        let intake = try intake(user: user, chunk: name, length: length, checked: prefix != nil)
        let read = try Self.forEachPiece(of: file, at: 0, length: length) { piece in try intake.write(piece) }
        guard read == length else { throw SystemError("read", errno: EIO, path: "\(source): ends at \(read) of \(length) bytes") }
        return try arrive([intake], user: user, prefix: prefix)[0]
    }

    /// Whether `length` bytes of `file` from `start` hash (SHA-256) to `name`.
    static func hashes(_ file: FileDescriptor, at start: Int64 = 0, length: Int64, to name: String) throws -> Bool {
        let digest = Digest(.sha256)
        let read = try forEachPiece(of: file, at: start, length: length) { piece in digest.update(piece) }
        return read == length && digest.finishHex() == name
    }

    /// Reads `length` bytes of `file` from `start`, a MiB at a time, handing each piece to `body`;
    /// returns how many there were (fewer when the file ends first).
    static func forEachPiece(of file: FileDescriptor, at start: Int64, length: Int64, _ body: (UnsafeRawBufferPointer) throws -> Void) throws -> Int64 {
        let step = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: step, alignment: 16)
        defer { buffer.deallocate() }
        var offset: Int64 = 0
        while offset < length {
            let want = Int(min(Int64(step), length - offset))
            let got = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]), at: start + offset)
            if got == 0 { break }
            try body(UnsafeRawBufferPointer(rebasing: buffer[0..<got]))
            offset += Int64(got)
        }
        return offset
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
        guard let index = try index(user), let raw = ContentID.rawHash(name), let held = try index.entry(raw),
              let opened = try open(user: user, chunk: name, entry: held) else { return .notHeld }
        if try Self.hashes(opened.file, at: opened.entry.offset, length: opened.entry.size, to: name) { return .intact }
        // Noted with the removal: from the moment it is gone, records naming it are answered incomplete.
        if let removed = try index.removeDamaged(raw), removed.isFile { unlink(LegacyLayout.path(folder: userFolder(user), name: name)) }
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
}

/// A held chunk's file (its pack, or its own file in the layout before packs), open, and where its
/// bytes are in it.
struct OpenChunk {
    let file: FileDescriptor
    let entry: ChunkIndex.Entry
}

/// One chunk's bytes on their way into a pack (a frame of a batch, a whole chunk in a tus creation, a
/// finished tus upload): written into its slot as they come, hashed when they must be checked.
/// Confined to the thread of its request.
final class ChunkIntake {
    let name: String
    let raw: [UInt8]
    let slot: PackSlot
    private let digest: Digest?
    private(set) var received: Int64 = 0
    private var hashed: Bool?

    init(name: String, raw: [UInt8], slot: PackSlot, hashed: Bool) {
        self.name = name
        self.raw = raw
        self.slot = slot
        digest = hashed ? Digest(.sha256) : nil
    }

    /// The next bytes of the chunk.
    func write(_ bytes: UnsafeRawBufferPointer) throws {
        guard received + Int64(bytes.count) <= slot.length else {
            throw Problem(.tooLarge, detail: "chunk \(name) goes past its length of \(slot.length) bytes")
        }
        try slot.write(bytes, at: received)
        digest?.update(bytes)
        received += Int64(bytes.count)
    }

    var isWhole: Bool { received == slot.length }

    /// Whether the bytes hash to the name (only known when hashed as they came).
    var hashesToName: Bool {
        if let hashed { return hashed }
        let result = digest.map { $0.finishHex() == name } ?? false
        hashed = result
        return result
    }
}
