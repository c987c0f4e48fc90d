import Dispatch
import Foundation
import Glibc
import SinkiRecord
import SinkiSupport
import Synchronization

/// The tus uploads of one server, on disk under `DATA/uploads/`.
///
/// On-disk format, two files per upload, named by its id (32 lowercase hex digits, random):
///
/// - `ID.bin`: the bytes received, exactly `offset` of them once the info says so. Bytes past the
///   info's offset (a PATCH the server died in) are cut off when the store opens.
/// - `ID.info`: one JSON object (`UploadInfo`): `id`, `user`, `length` (-1 while deferred), `offset`,
///   `metadata` (the `Upload-Metadata` header as re-encoded from the validated pairs), `createdAt`
///   and `touchedAt` (nanoseconds since the epoch), `concat` (`none`, `partial`, `final`), `parts`
///   (ids of a final's parts), `sha256` (hex, once finished), `expired`, `scope` (the prefix of the
///   token that made it), `chunk` (a chunk upload's name). Replaced whole: written to
///   `ID.info.tmp.PID`, then renamed over.
///
/// A chunk upload (`Upload-Metadata` key `chunk`) is an upload like any other until its last byte:
/// then `ID.bin` is copied into the user's current pack (`ChunkStore`; left unused when the chunk is
/// held already) and `ID.info` goes, so its id answers 404 from then on. It gets no SHA-256 of its own.
///
/// Data is not fsynced per PATCH (a crash costs the client a resend from the offset HEAD gives); a
/// finished upload's data and info are fsynced before the request that finished it is answered, so an
/// asset a record names is durable. The sweep removes an unfinished (or partial) upload's bytes
/// `expiry` after its last PATCH and marks it expired (410); the info goes after another `expiry`
/// (`forgetAfterSeconds`; 404 from then on). Finished uploads stay.
///
/// Every upload's state is in memory too (loaded at start, so the sweep knows its deadlines). A
/// request that writes takes the upload's `busy` flag: one writer at a time, others answer 423.
public final class UploadStore: Sendable {
    let directory: String
    let settings: UploadSettings
    /// Where finished chunk uploads go.
    let chunks: ChunkStore
    private let logger: Logger
    private let uploads = Mutex<[String: Upload]>([:])
    private let sweeper: Sweeper

    init(directory: String, settings: UploadSettings, chunks: ChunkStore, logger: Logger) throws(ServerError) {
        self.directory = directory
        self.settings = settings
        self.chunks = chunks
        self.logger = logger
        sweeper = Sweeper()
        do {
            try makeDirectories(directory)
        } catch {
            throw ServerError(.store, "cannot create the uploads folder \(directory): \(error)")
        }
        try load()
    }

    // MARK: Looking up

    /// Removes every upload of `user` from the folder (`sinkid serve user remove`); returns how many.
    /// A running server keeps what it had loaded until it restarts, but the user's tokens are revoked.
    public static func removeAll(user: String, directory: String) throws -> Int {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return 0 }
        var removed = 0
        for name in names where name.hasSuffix(".info") {
            guard let bytes = try? FileDescriptor.open(directory + "/" + name, flags: O_RDONLY).readAll(),
                  let info = try? UploadInfo.parse(bytes), info.user == user else { continue }
            unlink(directory + "/" + info.id + ".bin")
            unlink(directory + "/" + name)
            removed += 1
        }
        return removed
    }

    /// The upload `id` of `user`, as a token narrowed to `prefix` may see it (only uploads made within
    /// the prefix). Another user's upload, and one outside the prefix, answer exactly like an unknown one.
    ///
    /// Several servers may share the folder (docs/server.md, "Several servers"): an upload another one
    /// made is read from its info file, and one it wrote since is read again before it is used.
    func lookup(_ id: String, user: String, prefix: String? = nil) throws(Problem) -> Upload {
        guard let upload = uploads.withLock({ $0[id] }) ?? loadShared(id), refresh(upload),
              upload.user == user, Self.made(upload, within: prefix) else {
            throw Problem(.notFound, detail: "no upload \(quoted(id))")
        }
        let expired = upload.state.withLock { state in
            state.info.expired || (state.info.canExpire && state.info.touchedAt + settings.expiryNanoseconds <= Clock.now())
        }
        if expired { throw Problem(.uploadExpired, detail: "upload \(id) expired unfinished; start a new one") }
        return upload
    }

    /// An upload another server made in the shared folder, now known here too; nil when there is none.
    private func loadShared(_ id: String) -> Upload? {
        // Only an id as this store makes them names a file: nothing else reaches the file system.
        guard id.utf8.count == 32, id.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }),
              let info = readInfo(id), info.id == id else { return nil }
        let upload = Upload(info: info)
        return uploads.withLock { known in
            if let already = known[id] { return already }
            known[id] = upload
            return upload
        }
    }

    /// Takes what another server wrote to the upload's info since this one last read it. False when its
    /// info is gone (another server terminated or removed it): it is forgotten here too.
    private func refresh(_ upload: Upload) -> Bool {
        let busy = upload.state.withLock { $0.busy }
        // This server writes it right now: what it holds is newer than the file.
        if busy { return true }
        guard let disk = readInfo(upload.id) else {
            // Only an info that is gone means the upload is: one that could not be read now (no
            // descriptor free, a read error) leaves the upload as this server knows it.
            if access(infoPath(upload.id), F_OK) == 0 || errno != ENOENT { return true }
            uploads.withLock { _ = $0.removeValue(forKey: upload.id) }
            return false
        }
        upload.state.withLock { state in
            if !state.busy && state.info != disk { state.info = disk }
        }
        return true
    }

    private func readInfo(_ id: String) -> UploadInfo? {
        guard let file = try? FileDescriptor.open(infoPath(id), flags: O_RDONLY), let bytes = try? file.readAll() else { return nil }
        return try? UploadInfo.parse(bytes)
    }

    /// Takes the upload's lock across processes (an `flock` on its data file, which every server that
    /// shares the folder takes before it writes): nil when another holds it.
    func lockAcrossServers(_ upload: Upload, flags: Int32 = O_WRONLY) throws -> FileDescriptor? {
        let file = try FileDescriptor.open(dataPath(upload.id), flags: flags)
        if flock(file.raw, LOCK_EX | LOCK_NB) == 0 { return file }
        // Only a lock held elsewhere is "busy"; any other failure is the system's, said as such.
        let code = errno
        guard code == EWOULDBLOCK else { throw SystemError("flock", errno: code, path: dataPath(upload.id)) }
        return nil
    }

    /// Whether the upload was made by a token within `prefix` (any upload, for nil).
    private static func made(_ upload: Upload, within prefix: String?) -> Bool {
        guard let prefix else { return true }
        guard let scope = upload.scope else { return false }
        return PathText.isWithin(scope, prefix)
    }

    /// Size and SHA-256 of a finished, non-partial upload of `user`, for records that name it as asset.
    /// A token narrowed to `prefix` sees an asset made within it, or one a record within it names
    /// (`namedWithin`, asked only then: it reads the record store).
    func assetFacts(_ id: String, user: String, prefix: String? = nil, namedWithin: (String) -> Bool = { _ in false }) -> (size: Int64, sha256: String)? {
        guard let upload = try? lookup(id, user: user) else { return nil }
        if let prefix, !Self.made(upload, within: prefix), !namedWithin(prefix) { return nil }
        return upload.state.withLock { state in
            guard state.info.isFinished, state.info.concat != .partial, !state.info.sha256.isEmpty else { return nil }
            return (state.info.length!, state.info.sha256)
        }
    }

    func dataPath(_ id: String) -> String { directory + "/" + id + ".bin" }
    private func infoPath(_ id: String) -> String { directory + "/" + id + ".info" }

    // MARK: Creating and removing

    /// A new empty upload (creation). `length` nil: deferred. `chunk`: the name of the chunk it uploads.
    func create(user: String, length: Int64?, metadata: TusMetadata, concat: UploadInfo.Concat, scope: String? = nil,
                chunk: String? = nil) throws -> Upload {
        let now = Clock.now()
        var info = UploadInfo(id: RandomID.hex(bytes: 16), user: user, length: length, metadata: metadata,
                              createdAt: now, touchedAt: now, concat: concat)
        info.scope = scope
        info.chunk = chunk
        _ = try FileDescriptor.open(dataPath(info.id), flags: O_WRONLY | O_CREAT | O_EXCL, mode: 0o600)
        let upload = Upload(info: info)
        do {
            try persist(info, durable: info.isFinished)
        } catch {
            unlink(dataPath(info.id))
            throw error
        }
        uploads.withLock { $0[info.id] = upload }
        if info.canExpire { sweeper.wake() }
        return upload
    }

    /// A final upload: the concatenation of finished partial uploads of `user`, copied into a new data
    /// file and hashed on the way.
    func createFinal(user: String, parts ids: [String], metadata: TusMetadata, scope: String? = nil, maxBytes: Int64? = nil) throws -> Upload {
        var parts: [(Upload, Int64)] = []
        var total: Int64 = 0
        for id in ids {
            let part = try lookup(id, user: user, prefix: scope)
            let (concat, finished, length) = part.state.withLock { ($0.info.concat, $0.info.isFinished, $0.info.length ?? 0) }
            guard concat == .partial else { throw Problem(.badRequest, detail: "upload \(id) is not a partial upload (Upload-Concat: partial)") }
            guard finished else { throw Problem(.badRequest, detail: "partial upload \(id) is not finished") }
            parts.append((part, length))
            total += length
        }
        guard total <= settings.maxSize else {
            throw Problem(.tooLarge, detail: "the parts add up to \(total) bytes; uploads may have at most \(settings.maxSize)")
        }
        if let maxBytes, total > maxBytes {
            throw Problem(.tooLarge, detail: "the parts add up to \(total) bytes; the token's maxUploadBytes is \(maxBytes)", field: "maxUploadBytes")
        }
        let now = Clock.now()
        var info = UploadInfo(id: RandomID.hex(bytes: 16), user: user, length: total, offset: total, metadata: metadata,
                              createdAt: now, touchedAt: now, concat: .final, parts: ids)
        info.scope = scope
        let path = dataPath(info.id)
        do {
            let out = try FileDescriptor.open(path, flags: O_WRONLY | O_CREAT | O_EXCL, mode: 0o600)
            let digest = Digest(.sha256)
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
            defer { buffer.deallocate() }
            var position: Int64 = 0
            for (part, length) in parts {
                let input = try FileDescriptor.open(dataPath(part.id), flags: O_RDONLY)
                var done: Int64 = 0
                while done < length {
                    let want = Int(min(Int64(buffer.count), length - done))
                    let got = try input.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]), at: done)
                    guard got == want else { throw Problem(.internalError, detail: "partial upload \(part.id) is shorter on disk than its length") }
                    let piece = UnsafeRawBufferPointer(rebasing: buffer[0..<got])
                    digest.update(piece)
                    try out.writeAll(piece, at: position)
                    done += Int64(got)
                    position += Int64(got)
                }
            }
            try out.sync()
            info.sha256 = digest.finishHex()
            try persist(info, durable: true)
        } catch {
            unlink(path)
            throw error
        }
        let upload = Upload(info: info)
        uploads.withLock { $0[info.id] = upload }
        return upload
    }

    /// Termination asked for by a client: refused (423) while any server writes the upload.
    func terminate(_ upload: Upload) throws(Problem) {
        try upload.state.withLock { (state: inout Upload.State) throws(Problem) in
            guard !state.busy else { throw Problem(.uploadLocked, detail: "another request is writing upload \(upload.id); try again") }
            state.busy = true
        }
        guard let lock = (try? lockAcrossServers(upload, flags: O_RDONLY)).flatMap({ $0 }) else {
            upload.state.withLock { $0.busy = false }
            throw Problem(.uploadLocked, detail: "another server is writing upload \(upload.id); try again")
        }
        withExtendedLifetime(lock) { remove(upload) }
    }

    /// Termination: the upload's files go; its id answers 404 from now on. The caller holds `busy`.
    func remove(_ upload: Upload) {
        uploads.withLock { _ = $0.removeValue(forKey: upload.id) }
        unlink(dataPath(upload.id))
        unlink(infoPath(upload.id))
    }

    /// Writes the info file (atomically; fsynced when `durable`).
    func persist(_ info: UploadInfo, durable: Bool) throws(SystemError) {
        // Per process: two servers may write infos of the same folder (never of one upload at once).
        let temporary = infoPath(info.id) + ".tmp." + String(getpid())
        let file = try FileDescriptor.open(temporary, flags: O_WRONLY | O_CREAT | O_TRUNC, mode: 0o600)
        try file.write(info.jsonBytes)
        if durable { try file.sync() }
        try syscall("rename", path: temporary) { rename(temporary, infoPath(info.id)) }
    }

    // MARK: Writing chunks

    /// Takes `busy` and prepares a writer for a chunk at `offset` (the caller checked it against the
    /// upload). A running SHA-256 a restart lost is rebuilt from what is on disk, beside the new chunk.
    /// `maxBytes`: the token's `maxUploadBytes`, which the upload's length (or, deferred, its bytes) may
    /// not pass.
    func beginChunk(_ upload: Upload, offset: Int64, newLength: Int64?, declaredLength: Int64?,
                    checksum: (Digest.Algorithm, [UInt8])?, createdHere: Bool, maxBytes: Int64? = nil,
                    socket: Int32? = nil) throws -> ChunkWriter {
        let stalledAfter = settings.stalledWriterNanoseconds
        // A writer here first (ending one gone silent), then the lock across servers, then what the
        // last writer left: the checks below are against that.
        try upload.state.withLock { (state: inout Upload.State) throws in try refuseIfBusy(upload, &state, stalledAfter: stalledAfter) }
        let locked: FileDescriptor?
        do {
            locked = try lockAcrossServers(upload)
        } catch let error as SystemError where error.errno == ENOENT {
            // Finished elsewhere meanwhile (a chunk upload's bytes went to the chunks) or terminated.
            throw Problem(.notFound, detail: "no upload \(quoted(upload.id))")
        }
        guard let file = locked else {
            throw Problem(.uploadLocked, detail: "another server is writing upload \(upload.id); try again")
        }
        if !refresh(upload) { throw Problem(.notFound, detail: "no upload \(quoted(upload.id))") }
        let (limit, hasher) = try upload.state.withLock { (state: inout Upload.State) throws -> (Int64, TrailingDigest?) in
            try refuseIfBusy(upload, &state, stalledAfter: stalledAfter)
            let info = state.info
            guard info.concat != .final else { throw Problem(.uploadFinal, detail: "upload \(upload.id) is a final upload; it takes no PATCH") }
            guard offset == info.offset else {
                throw Problem(.offsetMismatch, detail: "Upload-Offset is \(offset), the upload stands at \(info.offset)")
            }
            if let newLength {
                if let known = info.length, known != newLength {
                    throw Problem(.badRequest, detail: "Upload-Length is \(newLength); the upload's length is already \(known)")
                }
                guard newLength >= info.offset else { throw Problem(.badRequest, detail: "Upload-Length \(newLength) is below the offset \(info.offset)") }
                guard newLength <= settings.maxSize else { throw Problem(.tooLarge, detail: "Upload-Length \(newLength) is over Tus-Max-Size \(settings.maxSize)") }
            }
            let length = newLength ?? info.length
            if let maxBytes, let length, length > maxBytes {
                throw Problem(.tooLarge, detail: "Upload-Length \(length) is over the token's maxUploadBytes \(maxBytes)", field: "maxUploadBytes")
            }
            let limit = min(length ?? settings.maxSize, maxBytes ?? .max)
            if let declaredLength, offset + declaredLength > limit {
                throw Problem(.tooLarge, detail: "the chunk of \(declaredLength) bytes at \(offset) goes past the upload's \(length == nil ? "limit" : "length") of \(limit) bytes")
            }
            state.busy = true
            state.writerSocket = socket
            state.writerProgressAt = Clock.monotonic()
            // A chunk upload gets no SHA-256 here: its name says what it should be, and every receiver
            // checks the chunk against it before use.
            guard info.chunk == nil else { return (limit, nil) }
            if state.hasher == nil || state.hashedTo != offset {
                // A restart (or a chunk that could not be taken back) lost the running hash: what is on
                // disk is hashed again, beside the new chunk.
                let hasher = TrailingDigest(path: dataPath(upload.id), from: 0, algorithm: .sha256)
                hasher.advance(to: offset)
                state.hasher = hasher
                state.hashedTo = offset
            }
            // The chunk may yet be taken back (a checksum that does not match, a write that fails).
            state.hasher!.mark(at: offset)
            return (limit, state.hasher!)
        }
        let reserved = min(declaredLength ?? 0, limit - offset)
        file.reserve(offset, reserved)
        return ChunkWriter(store: self, upload: upload, file: file, hasher: hasher, start: offset, limit: limit, newLength: newLength,
                           checksum: checksum, createdHere: createdHere, reserved: reserved)
    }

    /// Refuses (423) while a request writes the upload; one that has gone silent for `stalledAfter` is
    /// told to end. The holder is not ended here: its request finishes on its own thread (the chunk
    /// kept or discarded as for any cut-off body), which releases `busy`; the client's retry then gets
    /// the upload. Shut down once only: the socket's number may be reused.
    private func refuseIfBusy(_ upload: Upload, _ state: inout Upload.State, stalledAfter: Int64) throws(Problem) {
        guard state.busy else { return }
        if let holder = state.writerSocket, Clock.monotonic() - state.writerProgressAt >= stalledAfter {
            state.writerSocket = nil
            shutdown(holder, Int32(SHUT_RDWR))
            logger.info("upload \(upload.id): ending the request that holds it, silent for \(stalledAfter / 1_000_000_000) s or more")
            throw Problem(.uploadLocked, detail: "upload \(upload.id) was held by a request that went silent; it is being ended, try again")
        }
        throw Problem(.uploadLocked, detail: "another request is writing upload \(upload.id); try again")
    }

    // MARK: Loading and sweeping

    private func load() throws(ServerError) {
        let names: [String]
        do {
            names = try FileDescriptor.open(directory, flags: O_RDONLY | O_DIRECTORY).listDirectory().names
        } catch {
            throw ServerError(.store, "cannot read the uploads folder \(directory): \(error)")
        }
        var loaded: [String: Upload] = [:]
        for name in names {
            if name.contains(".info.tmp") {
                // Another server's write in progress looks the same as a crash's leftover: only old ones go.
                var size = Glibc.stat()
                if stat(directory + "/" + name, &size) == 0, Int64(size.st_mtim.tv_sec) < Clock.now() / 1_000_000_000 - 600 {
                    unlink(directory + "/" + name)
                }
                continue
            }
            guard name.hasSuffix(".info") else { continue }
            do {
                var info = try UploadInfo.parse(try FileDescriptor.open(directory + "/" + name, flags: O_RDONLY).readAll())
                if !info.expired {
                    var size = Glibc.stat()
                    guard stat(dataPath(info.id), &size) == 0 else {
                        logger.warning("upload \(info.id) has no data file; dropping it")
                        unlink(directory + "/" + name)
                        continue
                    }
                    if Int64(size.st_size) > info.offset {
                        // Bytes of a PATCH the server died in: never acknowledged, so never counted. Unless
                        // another server sharing the folder writes it right now (it holds the lock).
                        if let file = try? FileDescriptor.open(dataPath(info.id), flags: O_WRONLY), flock(file.raw, LOCK_EX | LOCK_NB) == 0 {
                            ftruncate(file.raw, off_t(info.offset))
                        }
                    } else if Int64(size.st_size) < info.offset {
                        logger.warning("upload \(info.id) has \(size.st_size) bytes on disk, its info says \(info.offset); going on from \(size.st_size)")
                        info.offset = Int64(size.st_size)
                        info.sha256 = ""
                    }
                }
                loaded[info.id] = Upload(info: info)
            } catch {
                logger.warning("skipping upload info \(name): \(error)")
            }
        }
        uploads.withLock { $0 = loaded }
        if !loaded.isEmpty { logger.info("\(loaded.count) uploads in \(directory)") }
    }

    /// Starts the sweep thread: it sleeps until the earliest deadline (not at all when there is none).
    func startSweeping() {
        sweeper.start { [self] in sweep(now: Clock.now()) }
    }

    func stopSweeping() { sweeper.stop() }

    /// Expires what is due; returns the next deadline (nanoseconds since the epoch), nil when none.
    @discardableResult
    func sweep(now: Int64) -> Int64? {
        let expiry = settings.expiryNanoseconds
        let forget = settings.forgetNanoseconds
        var next: Int64?
        let all = uploads.withLock { Array($0.values) }
        for upload in all {
            // Another server sharing the folder may have written it since: its info on disk says so.
            let looksDue = upload.state.withLock { !$0.busy && $0.info.touchedAt + expiry <= now }
            if looksDue && !refresh(upload) { continue }
            let deadline: Int64? = upload.state.withLock { state in
                if state.busy { return now + expiry }
                if state.info.expired {
                    if state.info.touchedAt + expiry + forget <= now {
                        unlink(infoPath(upload.id))
                        uploads.withLock { _ = $0.removeValue(forKey: upload.id) }
                        return nil
                    }
                    return state.info.touchedAt + expiry + forget
                }
                guard state.info.canExpire else { return nil }
                guard state.info.touchedAt + expiry <= now else { return state.info.touchedAt + expiry }
                // Not while another server writes it (it will be touched then).
                guard let held = (try? lockAcrossServers(upload, flags: O_RDONLY)).flatMap({ $0 }) else { return now + expiry }
                unlink(dataPath(upload.id))
                withExtendedLifetime(held) {}
                state.info.expired = true
                state.hasher = nil
                do { try persist(state.info, durable: false) } catch { logger.warning("sweep: \(error)") }
                logger.info("upload \(upload.id) expired unfinished at \(state.info.offset) bytes")
                return state.info.touchedAt + expiry + forget
            }
            if let deadline { next = min(next ?? deadline, deadline) }
        }
        return next
    }
}

extension UploadStore {
    /// Removes finished uploads no record names (`referenced`), once they were finished longer than the
    /// upload expiry ago: a finished upload waits that long for the record that will name it. Returns
    /// how many went.
    func removeUnreferenced(keeping referenced: Set<String>, now: Int64) -> Int {
        let grace = settings.expiryNanoseconds
        let all = uploads.withLock { Array($0.values) }
        var removed = 0
        for upload in all where !referenced.contains(upload.id) {
            // Only a candidate is locked: a lock taken on an upload being made would answer its
            // first PATCH 423 (this pass runs when the server starts, as clients begin).
            let candidate = upload.state.withLock { state in
                !state.busy && state.info.isFinished && state.info.concat != .partial && state.info.touchedAt + grace <= now
            }
            guard candidate, refresh(upload), let lock = (try? lockAcrossServers(upload, flags: O_RDONLY)).flatMap({ $0 }) else { continue }
            defer { withExtendedLifetime(lock) {} }
            let gone = upload.state.withLock { state -> Bool in
                guard !state.busy, state.info.isFinished, state.info.concat != .partial,
                      state.info.touchedAt + grace <= now else { return false }
                uploads.withLock { _ = $0.removeValue(forKey: upload.id) }
                unlink(dataPath(upload.id))
                unlink(directory + "/" + upload.id + ".info")
                return true
            }
            if gone { removed += 1 }
        }
        return removed
    }
}

/// How the server keeps tus uploads.
public struct UploadSettings: Sendable, Equatable {
    /// Largest upload accepted (`Tus-Max-Size`; `413` beyond).
    public var maxSize: Int64 = 64 << 30
    /// An unfinished upload is removed this many seconds after its last PATCH.
    public var expirySeconds: Double = 24 * 3600
    /// How long an expired upload still answers 410 before its id is forgotten (404); nil: `expirySeconds`.
    /// Not meant to be changed, but changeable for tests.
    public var forgetAfterSeconds: Double?
    /// A PATCH that finds the upload held by a request that has received nothing for this long ends
    /// that request (its socket is shut down) instead of only being refused: a client that lost its
    /// connection without the server hearing of it (a FIN the server missed, a path that died
    /// silently) would otherwise hold the lock until the connection timeout, and every retry of its
    /// own upload would be refused meanwhile. Changeable for tests.
    public var stalledWriterSeconds: Double = 5

    public init() {}

    var expiryNanoseconds: Int64 { Int64(expirySeconds * 1e9) }
    var forgetNanoseconds: Int64 { Int64((forgetAfterSeconds ?? expirySeconds) * 1e9) }
    var stalledWriterNanoseconds: Int64 { Int64(stalledWriterSeconds * 1e9) }
}

/// One upload: its info and, while a request writes it, the `busy` flag and the running hash.
final class Upload: Sendable {
    let id: String
    let user: String
    /// The prefix of the token that made it (`UploadInfo.scope`).
    let scope: String?
    let state: Mutex<State>

    struct State {
        var info: UploadInfo
        var busy = false
        /// While `busy`: the socket of the request that writes (nil when it has none, or it was shut
        /// down already) and when it last received bytes (`Clock.monotonic`), so that a writer that went
        /// silent can be ended by the next PATCH.
        var writerSocket: Int32?
        var writerProgressAt: Int64 = 0
        /// The upload's SHA-256, told of bytes `0..<hashedTo`; nil when lost (a restart, a chunk taken
        /// back that it could not forget).
        var hasher: TrailingDigest?
        var hashedTo: Int64 = 0
    }

    init(info: UploadInfo) {
        id = info.id
        user = info.user
        scope = info.scope
        state = Mutex(State(info: info))
    }

    var info: UploadInfo { state.withLock { $0.info } }
}

/// Takes one chunk of an upload as it arrives (PATCH, or a creation-with-upload POST), straight into
/// the data file at its offset, hashing on the way. Confined to the worker thread of its request.
///
/// Ends exactly once: `commit` (the request is in: check the checksum, move the offset) or `abandon`
/// (the client went away: keep what arrived, unless a checksum cannot vouch for it). Either releases
/// the upload's `busy` flag.
final class ChunkWriter: BodySink {
    private let store: UploadStore
    let upload: Upload
    private let file: FileDescriptor
    /// The upload's SHA-256, told of each byte written; nil for a chunk upload.
    private let hasher: TrailingDigest?
    private let start: Int64
    private let limit: Int64
    private let newLength: Int64?
    private let checksum: (algorithm: Digest.Algorithm, expected: [UInt8])?
    /// Hashes the chunk for its checksum, beside this thread.
    private let checker: TrailingDigest?
    private let createdHere: Bool
    /// Bytes past `start` whose blocks were allocated for this chunk (its declared length).
    private let reserved: Int64
    private(set) var received: Int64 = 0
    private var ended = false
    /// Bytes of this chunk whose write-back has been started.
    private var flushed: Int64 = 0
    /// Write-back is started per this many bytes received.
    private static let writebackStep: Int64 = 8 << 20

    init(store: UploadStore, upload: Upload, file: FileDescriptor, hasher: TrailingDigest?, start: Int64, limit: Int64, newLength: Int64?,
         checksum: (Digest.Algorithm, [UInt8])?, createdHere: Bool, reserved: Int64 = 0) {
        self.hasher = hasher
        self.store = store
        self.reserved = reserved
        self.upload = upload
        self.file = file
        self.start = start
        self.limit = limit
        self.newLength = newLength
        self.checksum = checksum.map { (algorithm: $0.0, expected: $0.1) }
        checker = checksum.map { TrailingDigest(path: file.path, from: start, algorithm: $0.0) }
        self.createdHere = createdHere
    }

    func write(_ chunk: UnsafeRawBufferPointer) throws {
        guard !ended else { return }
        guard start + received + Int64(chunk.count) <= limit else {
            discard()
            throw Problem(.tooLarge, detail: "the chunk goes past the upload's \(newLength == nil ? "length" : "Upload-Length") of \(limit) bytes")
        }
        do {
            try file.writeAll(chunk, at: start + received)
        } catch {
            discard()
            throw error
        }
        received += Int64(chunk.count)
        upload.state.withLock { $0.writerProgressAt = Clock.monotonic() }
        if received - flushed >= Self.writebackStep {
            file.startWriteback(start + flushed, received - flushed)
            flushed = received
        }
        hasher?.advance(to: start + received)
        checker?.advance(to: start + received)
    }

    /// The request is complete: verify, move the offset, finish the upload if it is whole. Returns the
    /// info as it now stands.
    func commit() throws -> UploadInfo {
        precondition(!ended, "bug: a chunk ended twice")
        if let checksum, let checker {
            let actual: [UInt8]
            do { actual = try checker.finish(at: start + received) } catch {
                discard()
                throw error
            }
            guard actual == checksum.expected else {
                discard()
                throw Problem(.checksumMismatch, detail: "the chunk's \(checksum.algorithm.rawValue) is \(Base64.encode(actual)), "
                              + "Upload-Checksum says \(Base64.encode(checksum.expected)); the chunk was discarded")
            }
        }
        return try keep()
    }

    /// The request ended before it was answered (the client hung up, a timeout): keep what arrived,
    /// unless a checksum was to vouch for it.
    func abandon() {
        guard !ended else { return }
        if checksum != nil || createdHere {
            discard()
            return
        }
        do { _ = try keep() } catch { discard() }
    }

    private func keep() throws -> UploadInfo {
        ended = true
        defer { hasher?.release() }
        // The chunk's tail, below one write-back step, starts for the disk too: left to the kernel, the
        // tails of a file's chunks add up to half of it, all waiting for the finishing fsync.
        file.startWriteback(start + flushed, received - flushed)
        // A PATCH only moves the upload's expiry later: the sweep need not wake for it.
        return try upload.state.withLock { (state: inout Upload.State) throws -> UploadInfo in
            // The lock across servers goes with `busy`, after the info on disk says where the upload stands.
            defer {
                flock(file.raw, LOCK_UN)
                state.busy = false
                state.writerSocket = nil
            }
            var info = state.info
            info.offset = start + received
            // A chunk cut short gives back the blocks reserved past its end (truncating frees them).
            if received < reserved { ftruncate(file.raw, off_t(info.offset)) }
            if let newLength { info.length = newLength }
            info.touchedAt = Clock.now()
            state.hashedTo = info.offset
            if info.isFinished, let name = info.chunk {
                // The chunk's bytes are copied into the user's current pack, and the upload is done with.
                let adoption: ChunkStore.Adoption
                do {
                    adoption = try store.chunks.adopt(source: store.dataPath(upload.id), length: info.offset, user: upload.user,
                                                      chunk: name, prefix: upload.scope)
                } catch {
                    // Nothing moved: the upload stands where it stood before this request.
                    ftruncate(file.raw, off_t(start))
                    throw error
                }
                store.remove(upload)
                state.info = info
                if adoption == .refused {
                    throw Problem(.checksumMismatch, detail: "the bytes of chunk \(name) do not hash to its name; they were dropped")
                }
                return info
            }
            // A finished upload may become an asset: durable before the answer. A partial one is copied
            // into its final upload, which is made durable then.
            let durable = info.isFinished && info.concat != .partial
            do {
                if info.isFinished {
                    state.hasher = nil
                    // The disk flush first: the hasher catches up on its own queue meanwhile.
                    if durable { try file.sync() }
                    if let hasher { info.sha256 = Hex.encode(try hasher.finish(at: info.offset)) }
                }
                try store.persist(info, durable: durable)
            } catch {
                // The info on disk still says the old offset: so must the data file.
                ftruncate(file.raw, off_t(start))
                state.hasher = nil
                throw error
            }
            state.info = info
            return info
        }
    }

    /// Nothing of this request is kept: the data file goes back to where it stood.
    private func discard() {
        guard !ended else { return }
        ended = true
        // Before the bytes go: the hasher may still be reading them.
        let forgotten = hasher?.rollBack(to: start) ?? true
        hasher?.release()
        if createdHere {
            ftruncate(file.raw, off_t(start))
            store.remove(upload)
            return
        }
        upload.state.withLock { state in
            // Cut and let go under the upload's lock: whoever sees the file back at its offset (a client's
            // HEAD, then its PATCH) finds the upload free too, not still held for a moment.
            ftruncate(file.raw, off_t(start))
            flock(file.raw, LOCK_UN)
            state.busy = false
            state.writerSocket = nil
            state.hashedTo = start
            if !forgotten { state.hasher = nil }
        }
    }
}

/// A sweep's thread: waits for the earliest deadline, or forever while there is none, so an idle
/// server never wakes for it (uploads' expiry, tombstone retention).
final class Sweeper: Sendable {
    private let state = Mutex<(running: Bool, stop: Bool)>((false, false))
    private let signal = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)

    func start(_ sweep: @escaping @Sendable () -> Int64?) {
        let begin = state.withLock { state -> Bool in
            guard !state.running else { return false }
            state.running = true
            return true
        }
        guard begin else { return }
        let thread = Thread { [self] in
            while !state.withLock({ $0.stop }) {
                if let next = sweep() {
                    let wait = max(0, next - Clock.now())
                    _ = signal.wait(timeout: .now() + .nanoseconds(Int(min(wait, Int64(Int32.max) * 1_000_000_000))))
                } else {
                    signal.wait()
                }
            }
            finished.signal()
        }
        thread.name = "sinki-sweep"
        thread.start()
    }

    /// A new deadline may be earlier than the one waited for.
    func wake() {
        if state.withLock({ $0.running }) { signal.signal() }
    }

    func stop() {
        let wasRunning = state.withLock { state -> Bool in
            state.stop = true
            return state.running
        }
        guard wasRunning else { return }
        signal.signal()
        finished.wait()
    }
}

extension FileDescriptor {
    /// Writes all of `bytes` at `offset` (pwrite, retried until done).
    func writeAll(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(SystemError) {
        var done = 0
        while done < bytes.count {
            let wrote = try syscall("write", path: path) { pwrite(raw, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done)) }
            done += wrote
        }
    }
}
