import Glibc
import SinkiRecord
import SinkiSupport

/// A large file opened below its root for its chunked upload, with what the Local tree knew of it then.
public struct UploadSource: Sendable {
    public var path: String
    /// The open file: the upload reads this inode, never the path again, so a symlink swapped into
    /// the path cannot make it send something outside the root.
    public var file: HeldFile
    /// The file when it was opened: its identity for resuming (size, mtime, ctime, inode).
    public var stat: FileStat
    public var size: Int64 { stat.size }
    /// Where an earlier run's upload of this same file stands: the chunks already on the server and
    /// where the next one starts.
    public var resume: ChunkUploadProgress?
}

/// A read-only descriptor that can cross actors; closed when the last owner lets go.
public final class HeldFile: Sendable {
    public let raw: Int32

    init(duplicating fd: Int32) throws(SystemError) {
        raw = try syscall("dup", path: "fd \(fd)") { fcntl(fd, F_DUPFD_CLOEXEC, 0) }
    }

    deinit { close(raw) }

    /// Opens `path` (not below a root: the state folder's own files).
    public static func open(_ path: String, flags: Int32, mode: mode_t = 0o600) throws(SystemError) -> HeldFile {
        let file = try FileDescriptor.open(path, flags: flags, mode: mode)
        return try withExtendedLifetime(file) { () throws(SystemError) in try HeldFile(duplicating: file.raw) }
    }

    /// A path that opens this very inode again (what libcurl's body reader is given).
    public var procPath: String { "/proc/self/fd/\(raw)" }

    /// Reads up to `buffer.count` bytes at `offset`; fewer only at the end of the file.
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(SystemError) -> Int {
        var done = 0
        while done < buffer.count {
            let got = try syscall("read", path: procPath) { pread(raw, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done)) }
            if got == 0 { break }
            done += got
        }
        return done
    }

    /// The file as it is now.
    public func stat() throws(SystemError) -> FileStat {
        var raw = Glibc.stat()
        try syscall("fstat", path: procPath) { fstat(self.raw, &raw) }
        return FileStat(raw)
    }
}

/// An upload whose file changed (or went away) while it was being sent.
public struct UploadSuperseded: Error, Sendable, CustomStringConvertible {
    public var path: String
    public init(path: String) { self.path = path }
    public var description: String { "\(quoted(path)) changed while it was being uploaded" }
}

extension Replica {
    /// Opens `path` for its chunked upload, which `step` handed out. Nil when it is no longer a large
    /// file on disk as the Local tree says (it is then looked at again, and planned with what is there).
    /// `repair`: a file in sync whose chunks the server lacks (a verify found some missing).
    public func openForUpload(_ path: String, repair: Bool = false) throws -> UploadSource? {
        guard let local = try store.row(path)?.local, local.kind == .file, local.size > context.inlineLimit || local.hash.isEmpty,
              let here = context.locate(path) else { return nil }
        let held: HeldFile
        let stat: FileStat
        do {
            let file = try context.safeRoots[here.root.index].open(here.relative, flags: O_RDONLY | O_NOCTTY | O_NONBLOCK)
            held = try withExtendedLifetime(file) { () throws(SystemError) in try HeldFile(duplicating: file.raw) }
            stat = try held.stat()
        } catch {
            observer.unstable.append(here)
            return nil
        }
        guard stat.kind == .file, local.matches(stat), !ContentReader.beingWritten(held.raw, modifiedAt: stat.mtime) else {
            observer.unstable.append(here)
            return nil
        }
        var source = UploadSource(path: path, file: held, stat: stat)
        if let progress = try store.chunkUpload(path) {
            // A file of up to 256 KiB is read whole to be named (`ChunkSender`): it never goes on part-way.
            if progress.matches(stat), progress.manifest == nil, ContentID.isManifest(size: stat.size) {
                source.resume = progress
            } else {
                try store.removeChunkUpload(path)
            }
        }
        return source
    }

    /// Keeps how far an upload has come (every chunk in `progress` is on the server). Throws
    /// `UploadSuperseded` when the path is no longer the file being sent, which ends the upload at
    /// its next step instead of at its last.
    public func saveUpload(_ source: UploadSource, progress: ChunkUploadProgress) throws {
        guard let local = try store.row(source.path)?.local, local.matches(source.stat) else { throw UploadSuperseded(path: source.path) }
        try store.saveChunkUpload(progress)
    }

    /// Every chunk of the file is on the server and `manifest` is their list's hash; `content` is the
    /// file's identity (the manifest hash, or the SHA-256 of a file of up to 256 KiB): Local takes it,
    /// and the record may carry the manifest. Returns whether the file differs from what both sides
    /// agreed on (a file touched but not changed has nothing to send). Throws `UploadSuperseded` when
    /// the file changed meanwhile.
    @discardableResult
    public func uploadFinished(_ source: UploadSource, chunks: [ChunkRef], manifest: String, content: String? = nil) throws -> Bool {
        let content = content ?? manifest
        return try store.transaction {
            guard let row = try store.row(source.path), var local = row.local, local.matches(source.stat) else {
                throw UploadSuperseded(path: source.path)
            }
            try store.saveManifest(manifest, chunks: chunks)
            if local.hash != content {
                local.hash = content
                try store.setLocal(source.path, local)
            }
            guard local.node != row.synced?.node else {
                // Touched, not changed: the server holds this very content already.
                try store.removeChunkUpload(source.path)
                return false
            }
            try store.saveChunkUpload(ChunkUploadProgress(path: source.path, stat: source.stat, offset: source.size, chunks: chunks,
                                                          manifest: manifest, content: content))
            return true
        }
    }

    /// A chunked upload `step` handed out ended (done, failed or cut off): the path is planned again.
    public func uploadEnded(_ path: String, failure: ApplyFailure? = nil) throws {
        scheduler.inFlight.remove(path)
        if let failure { scheduler.failures.fail(path, .up, failure, row: try store.row(path)) }
    }

    /// Large files here whose content is the version agreed with the server and whose manifest is kept,
    /// by path after `after`, at most `limit`: what a verify asks the server's chunks of.
    public func heldManifests(after: String, limit: Int) throws -> [(path: String, chunks: [ChunkRef])] {
        var rows: [(String, String)] = []
        try store.database.query("""
            SELECT path, l_hash FROM tree WHERE path > ? AND l_kind = 0 AND l_size > \(ContentID.wholeFileLimit)
              AND s_tag > 0 AND s_kind = 0 AND s_hash = l_hash ORDER BY path LIMIT ?
            """, after, limit) { rows.append(($0.text(0), $0.text(1))) }
        var out: [(path: String, chunks: [ChunkRef])] = []
        for (path, id) in rows {
            if let chunks = try store.manifest(id) { out.append((path, chunks)) }
        }
        // A page whose files all lack a kept manifest still moves the walk on.
        if out.isEmpty, let last = rows.last { out.append((last.0, [])) }
        return out
    }

    /// Forgets the upload of `path` (it is of no use any more: the server lacks chunks it named, say).
    public func dropUpload(_ path: String) throws { try store.removeChunkUpload(path) }

    // MARK: Downloads of large files

    /// The local files holding chunks of `chunks`, opened below their roots, and for each chunk name
    /// found the source and offset to copy it from: a new version is built from these first, and only
    /// the rest is downloaded. Files that no longer match the Local tree are not offered.
    public func chunkSources(for chunks: [ChunkRef]) throws -> (sources: [ChunkSource], places: [String: (source: Int, offset: Int64)]) {
        let found = try store.places(of: chunks.map(\.sha256))
        var sources: [ChunkSource] = []
        var byManifest: [String: Int?] = [:]
        var places: [String: (source: Int, offset: Int64)] = [:]
        for (name, place) in found {
            if byManifest[place.manifest] == nil { byManifest[place.manifest] = try openHolder(of: place.manifest, into: &sources) }
            if let index = byManifest[place.manifest] ?? nil { places[name] = (index, place.offset) }
        }
        return (sources, places)
    }

    /// Opens a file whose content is manifest `id` and which is still what the Local tree says.
    private func openHolder(of id: String, into sources: inout [ChunkSource]) throws -> Int? {
        for row in try store.holders(of: id) {
            guard let local = row.local, let here = context.locate(row.path),
                  let file = try? context.safeRoots[here.root.index].open(here.relative, flags: O_RDONLY | O_NOCTTY | O_NONBLOCK),
                  let held = try? withExtendedLifetime(file, { () throws(SystemError) in try HeldFile(duplicating: file.raw) }),
                  let stat = try? held.stat(), local.matches(stat) else { continue }
            sources.append(ChunkSource(file: held, expect: stat))
            return sources.count - 1
        }
        return nil
    }

    /// Which of the chunks named some file here holds (from the manifests this agent keeps): those are
    /// copied when a download needs them, not fetched.
    public func chunksHeldHere(_ names: [String]) throws -> Set<String> {
        Set(try store.places(of: names).keys)
    }

    /// The assembler of a manifest asset's download (going on from what an earlier run placed).
    public func assembler(for asset: Asset) throws -> ChunkAssembler {
        if mkdir(context.downloadsDirectory, 0o700) != 0 && errno != EEXIST {
            throw SystemError("mkdir", errno: errno, path: context.downloadsDirectory)
        }
        return try ChunkAssembler(id: asset.sha256, chunks: asset.chunks ?? [], directory: context.downloadsDirectory)
    }
}
