import Glibc
import SinkiRecord
import SinkiSupport

/// A large file opened below its root for its chunked upload, with what the database knew of it then.
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

extension Replica {
    /// The tus endpoint uploads go to (rows of other endpoints are not this server's).
    public func useUploadEndpoint(_ endpoint: String) { uploadEndpoint = endpoint }

    /// Files up to `limit` bytes travel inline; larger ones as chunks.
    public func setInlineLimit(_ limit: Int64) { inlineLimit = limit }

    /// Local changes whose chunks must be on the server before their record can go: files above the
    /// inline limit with no finished upload of their current content. Oldest first. The walk is over
    /// large files only (`files_large`): a first sync of a million small ones made each call read the
    /// whole outbox, once per push, which was nearly all of the agent's time at a million files.
    public func uploadCandidates(limit: Int, excluding: Set<String>) throws -> [String] {
        var out: [String] = []
        try store.database.query("""
            SELECT o.path FROM files f INDEXED BY files_large JOIN outbox o ON o.path = f.path
            LEFT JOIN chunk_uploads c ON c.path = o.path
            WHERE f.present = 1 AND f.kind = 0 AND f.size > ? AND o.last_error IS NULL AND f.moved_from IS NULL
              AND (f.tag = 0 OR f.synced_deleted = 1 OR f.synced_sha256 IS NOT f.sha256 OR o.resend = 1)
              AND NOT coalesce(c.manifest IS NOT NULL AND c.content = f.sha256 AND c.size = f.size AND c.mtime = f.mtime
                               AND c.ctime = f.ctime AND c.inode = f.inode, 0)
            ORDER BY o.queued_at, o.path LIMIT ?
            """, inlineLimit, limit + excluding.count) { row in
            let path = row.text(0)
            if !excluding.contains(path) && out.count < limit { out.append(path) }
        }
        return out
    }

    /// Opens `path` for its upload. Nil when it is no longer a file to upload, or when the disk no
    /// longer matches the database (the path is then looked at again).
    public func openForUpload(_ path: String, repair: Bool = false) throws -> UploadSource? {
        guard let row = try store.file(path), row.present, row.kind == .file, row.size > inlineLimit,
              try repair || row.hasLocalChange || store.outboxEntry(path)?.resend == true,
              let recordPath = try? RecordPath(validating: path), let local = locate(recordPath) else { return nil }
        let (root, relative) = (local.root.index, local.relative)
        let held: HeldFile
        let stat: FileStat
        do {
            let file = try safeRoots[root].open(relative, flags: O_RDONLY | O_NOCTTY | O_NONBLOCK)
            held = try withExtendedLifetime(file) { () throws(SystemError) in try HeldFile(duplicating: file.raw) }
            stat = try held.stat()
        } catch {
            unstable.append((root, relative))
            return nil
        }
        guard stat.kind == .file, row.matches(stat), !ContentReader.beingWritten(held.raw, modifiedAt: stat.mtime) else {
            unstable.append((root, relative))
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
        guard let row = try store.file(source.path), row.present, row.matches(source.stat) else {
            throw UploadSuperseded(path: source.path)
        }
        try store.saveChunkUpload(progress)
    }

    /// Every chunk of the file is on the server and `manifest` is their list's hash; `content` is the
    /// file's identity (the manifest hash, or the SHA-256 of a file of up to 256 KiB): the row takes it
    /// and the record may carry the manifest. Returns whether there is a record to send (a file touched
    /// but not changed has none). Throws `UploadSuperseded` when the file changed meanwhile.
    @discardableResult
    public func uploadFinished(_ source: UploadSource, chunks: [ChunkRef], manifest: String, content: String? = nil) throws -> Bool {
        let content = content ?? manifest
        return try store.transaction {
            guard var row = try store.file(source.path), row.present, row.matches(source.stat) else {
                throw UploadSuperseded(path: source.path)
            }
            let progress = ChunkUploadProgress(path: source.path, stat: source.stat, offset: source.size, chunks: chunks, manifest: manifest,
                                               content: content)
            try store.saveManifest(manifest, chunks: chunks)
            if row.sha256 != content {
                row.sha256 = content
                try store.saveFile(row)
            }
            let resend = try store.outboxEntry(source.path)?.resend == true
            guard row.hasLocalChange || resend else {
                // Touched, not changed: the server holds this very content already.
                try store.dequeue(source.path)
                try store.removeChunkUpload(source.path)
                return false
            }
            try store.saveChunkUpload(progress)
            return true
        }
    }

    /// Large files here whose content is the version synced with the server and whose manifest is
    /// kept, by path after `after`, at most `limit`: what a verify asks the server's chunks of.
    public func heldManifests(after: String, limit: Int) throws -> [(path: String, chunks: [ChunkRef])] {
        var rows: [(String, String)] = []
        try store.database.query("""
            SELECT path, sha256 FROM files WHERE path > ? AND present = 1 AND kind = 0 AND size > \(ContentID.wholeFileLimit)
              AND tag > 0 AND synced_deleted = 0 AND synced_sha256 = sha256 ORDER BY path LIMIT ?
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
    public func dropUpload(_ path: String) throws {
        try store.removeChunkUpload(path)
    }

    /// The asset a push of `row` may carry: the manifest of exactly its content, every chunk on the server.
    func finishedAsset(for row: KnownFile) throws -> Asset? {
        guard !row.sha256.isEmpty, let progress = try store.chunkUpload(row.path), let manifest = progress.manifest, progress.content == row.sha256,
              progress.size == row.size, progress.mtime == row.mtime, progress.ctime == row.ctime, progress.inode == row.inode else { return nil }
        return Asset(manifestHash: manifest, chunks: progress.chunks)
    }
}

/// An upload whose file changed (or went away) while it was being sent.
public struct UploadSuperseded: Error, Sendable, CustomStringConvertible {
    public var path: String
    public init(path: String) { self.path = path }
    public var description: String { "\(quoted(path)) changed while it was being uploaded" }
}
