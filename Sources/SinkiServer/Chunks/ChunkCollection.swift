import Glibc
import SinkiRecord
import SinkiSupport

/// Garbage collection of chunks, and repacking (docs/server.md, "Garbage collection"): chunks no
/// current record or kept version names go once their grace has passed; packs left mostly dead, small
/// packs, and chunks still in files of their own are copied into new packs, and what they were goes.
extension ChunkStore {
    /// What the record store says a user's live records name: every chunk of their manifests, and the
    /// highest change tag it looked at (records changed later come through a second look from there).
    typealias References = @Sendable (_ user: String, _ after: Int64) throws -> ChunkReferences

    /// Live bytes copied by one repacking of one user, at most (the rest waits for the next pass):
    /// a server upgraded from files of their own copies its users' chunks over several passes.
    static let repackBytesPerPass: Int64 = 1 << 30
    /// A pack changed this recently is left alone (on NFS a new pack is named a moment before its lock).
    static let packSettleNanoseconds: Int64 = 60_000_000_000

    /// Removes the chunks no live record names last touched `grace` ago or more, and markers as old,
    /// for every user, then repacks what that left; returns how many chunks went. Safe against uploads
    /// and modifies at the same time (see the type comment of `ChunkStore`): the candidates are listed
    /// against what the records named, then, under the user's exclusive lock, checked once more against
    /// the records committed since and the time they were last touched.
    func collect(references: References, now: Int64, grace: Int64) -> Int {
        guard let users = try? FileDescriptor.open(directory, flags: O_RDONLY | O_DIRECTORY).listDirectory().names else { return 0 }
        var removed = 0
        for key in users where Self.isName(key) {
            let folder = directory + "/" + key
            guard let bytes = try? FileDescriptor.open(folder + "/user", flags: O_RDONLY).readAll(),
                  let user = String(validating: bytes, as: UTF8.self), Self.key(user) == key else { continue }
            do {
                removed += try collect(user: user, references: references, now: now, grace: grace)
                let repacked = try repack(user: user, now: now)
                if repacked != Repacked() { logger.info("chunks of \(quoted(user)): \(repacked)") }
            } catch {
                logger.warning("chunk collection of \(quoted(user)): \(error)")
            }
        }
        return removed
    }

    private func collect(user: String, references: References, now: Int64, grace: Int64) throws -> Int {
        guard let index = try index(user) else { return 0 }
        let cutoff = now - grace
        var referenced = try references(user, 0)
        let candidates = try index.untouched(since: cutoff).filter { !referenced.names.contains(Hex.encode($0)) }
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
            // Touched (uploaded again, found present) since it was listed: kept, by the removal's own look.
            let gone = try index.remove(batch.filter { !referenced.names.contains(Hex.encode($0)) }, touchedBy: cutoff)
            for (name, entry) in gone where entry.isFile { unlink(LegacyLayout.path(folder: userFolder(user), name: Hex.encode(name))) }
            removed += gone.count
        }
        try removeDamagedMarkers(index, referenced: referenced.names)
        try index.removeMarkers(before: cutoff)
        return removed
    }

    /// What one repacking did.
    struct Repacked: Sendable, Equatable, CustomStringConvertible {
        /// Packs removed: those no chunk lives in any more, and those whose chunks were copied.
        var packsRemoved = 0
        /// Chunks copied into new packs from packs and from files of their own.
        var chunksCopied = 0
        var bytesCopied: Int64 = 0
        /// Chunks that were files of their own and are in a pack now.
        var filesMoved = 0
        /// Bytes of pack files removed.
        var bytesFreed: Int64 = 0

        var description: String {
            "repacked: \(packsRemoved) pack(s) removed (\(HumanUnits.bytes(bytesFreed))), \(chunksCopied) chunk(s) copied "
                + "(\(HumanUnits.bytes(bytesCopied))), \(filesMoved) of them from files of their own"
        }
    }

    /// A pack (or, with an empty id, the chunks in files of their own) whose live chunks are copied.
    private struct Source {
        var id: String
        /// Locked exclusively while held (nil for files of their own).
        var file: FileDescriptor?
        var size: Int64
    }

    /// Repacks the user's chunks: every pack not being written (its exclusive lock free) and not changed
    /// within the last minute is looked at once its lock is held. One with no live chunk is removed;
    /// one whose live bytes are half its size or less, every small one (under half `packBytes`) when
    /// there are two or more, and chunks in files of their own, have their live chunks copied into new
    /// packs (up to `repackBytesPerPass`), which are synced before the index points at them; the index
    /// is synced before the old packs and files go. Readers that opened an old pack keep reading it;
    /// those that look a chunk up meanwhile find its new place (`open`).
    func repack(user: String, now: Int64) throws -> Repacked {
        guard let index = try index(user) else { return Repacked() }
        let folder = packsFolder(user)
        var held: [String: (file: FileDescriptor, size: Int64)] = [:]
        for id in LegacyLayout.names(in: folder) where id.utf8.count == 16 && Self.isHex(id) {
            guard let file = try? FileDescriptor.open(folder + "/" + id, flags: O_RDWR) else { continue }
            guard flock(file.raw, LOCK_EX | LOCK_NB) == 0 else { continue }
            guard let stat = try? file.stat(), stat.mtime + Self.packSettleNanoseconds <= now else { continue }
            held[id] = (file, stat.size)
        }
        // Read once the locks are held: a writer commits its chunks' entries before it lets go of its pack.
        let usage = try index.packUsage()
        var done = Repacked()
        var dead: [String] = []
        var sources: [Source] = []
        var small: [Source] = []
        for (id, pack) in held.sorted(by: { $0.key < $1.key }) {
            let live = usage[id]?.bytes ?? 0
            if live == 0 {
                dead.append(id)
            } else if live * 2 <= pack.size {
                sources.append(Source(id: id, file: pack.file, size: pack.size))
            } else if pack.size < Self.packBytes / 2 {
                small.append(Source(id: id, file: pack.file, size: pack.size))
            }
        }
        if small.count >= 2 { sources += small }
        if usage[""] != nil { sources.append(Source(id: "", file: nil, size: 0)) }
        var moves: [ChunkIndex.Move] = []
        var complete = Set<String>()
        if !sources.isEmpty {
            // A folder of the layout before packs has no packs folder yet.
            try prepare(user)
            let output = PackAppender(folder: folder, target: Self.packBytes)
            var budget = Self.repackBytesPerPass
            var written: [OpenPack] = []
            copying: for source in sources {
                let rows = try index.contents(of: source.id)
                var whole = true
                for row in rows {
                    guard budget > 0 else {
                        whole = false
                        break copying
                    }
                    let name = Hex.encode(row.name)
                    guard let file = sourceFile(user: user, name: name, source: source) else {
                        // Gone here: left where it is, and its pack with it.
                        whole = false
                        continue
                    }
                    let slot = try output.reserve(row.size)
                    let copy = ChunkIntake(name: name, raw: row.name, slot: slot, hashed: false)
                    _ = try? Self.forEachPiece(of: file, at: row.offset, length: row.size) { piece in try copy.write(piece) }
                    guard copy.isWhole else {
                        // Unreadable here (short): left where it is, and its pack with it; the slot stays unused.
                        whole = false
                        continue
                    }
                    if written.last !== slot.pack { written.append(slot.pack) }
                    moves.append(ChunkIndex.Move(name: row.name, from: (source.id, row.offset), to: (slot.pack.id, slot.offset)))
                    budget -= row.size
                    done.bytesCopied += row.size
                }
                if whole { complete.insert(source.id) }
            }
            output.seal()
            // The copies reach the disk before the index points at them.
            for pack in written where fdatasync(pack.fd) != 0 { throw SystemError("fdatasync", errno: errno, path: pack.path) }
        }
        let moved = try index.apply(moves)
        done.chunksCopied = moved.count
        done.filesMoved = moves.indices.filter { moved.contains($0) && moves[$0].from.pack.isEmpty }.count
        guard !dead.isEmpty || !moved.isEmpty else { return done }
        // The index is durable before what it no longer points at goes.
        try syncNow()
        let remaining = try index.packUsage()
        for id in dead + complete.filter({ !$0.isEmpty }) where remaining[id] == nil {
            if unlink(folder + "/" + id) == 0 {
                done.packsRemoved += 1
                done.bytesFreed += held[id]?.size ?? 0
            }
        }
        for position in moved where moves[position].from.pack.isEmpty {
            unlink(LegacyLayout.path(folder: userFolder(user), name: Hex.encode(moves[position].name)))
        }
        // A fan-out folder of the layout before packs that is empty now goes too.
        if usage[""] != nil { for fanOut in LegacyLayout.names(in: userFolder(user)) where fanOut.utf8.count == 2 { rmdir(userFolder(user) + "/" + fanOut) } }
        return done
    }

    /// The file holding a chunk of the source being repacked: the pack, or the chunk's own file; nil
    /// when that is gone.
    private func sourceFile(user: String, name: String, source: Source) -> FileDescriptor? {
        if let pack = source.file { return pack }
        return try? FileDescriptor.open(LegacyLayout.path(folder: userFolder(user), name: name), flags: O_RDONLY)
    }
}
