import Glibc
import SinkiRecord
import SinkiSupport

/// A file opened below its root for a tus upload, with what the database knew of it then.
public struct UploadSource: Sendable {
    public var path: String
    /// The open file: the upload reads this inode through `/proc/self/fd`, never the path again, so a
    /// symlink swapped into the path cannot make it send something outside the root.
    public var file: HeldFile
    public var size: Int64
    public var mtime: Int64
    public var inode: UInt64
    /// The scan's hash: what the bytes sent must hash to.
    public var sha256: String
    /// Where an earlier run's upload of this same content stands (`TusUploadState.encoded`), to resume.
    public var resume: String?
    /// An earlier upload for other content of this path: the caller terminates it on the server.
    public var stale: String?
}

/// A read-only descriptor that can cross actors; closed when the last owner lets go.
public final class HeldFile: Sendable {
    public let raw: Int32

    init(duplicating fd: Int32) throws(SystemError) {
        raw = try syscall("dup", path: "fd \(fd)") { fcntl(fd, F_DUPFD_CLOEXEC, 0) }
    }

    deinit { close(raw) }

    /// A path that opens this very inode again (what libcurl's body reader is given).
    public var procPath: String { "/proc/self/fd/\(raw)" }

    /// The file as it is now.
    public func stat() throws(SystemError) -> FileStat {
        var raw = Glibc.stat()
        try syscall("fstat", path: procPath) { fstat(self.raw, &raw) }
        return FileStat(raw)
    }
}

extension Replica {
    /// `tus_uploads.state` of an upload that finished and whose bytes hashed to the row's `sha256`:
    /// `asset ID`. While in flight it holds `TusUploadState.encoded`.
    static let finishedPrefix = "asset "

    /// The tus endpoint uploads go to (rows of other endpoints are not this server's).
    public func useUploadEndpoint(_ endpoint: String) { uploadEndpoint = endpoint }

    /// Files up to `limit` bytes travel inline; larger ones through tus.
    public func setInlineLimit(_ limit: Int64) { inlineLimit = limit }

    /// Local changes whose content must be uploaded before their record can go: files above the
    /// inline limit with no finished upload of their current content. Oldest first. The walk is over
    /// large files only (`files_large`): a first sync of a million small ones made each call read the
    /// whole outbox, once per push, which was nearly all of the agent's time at a million files.
    public func uploadCandidates(limit: Int, excluding: Set<String>) throws -> [String] {
        var out: [String] = []
        try store.database.query("""
            SELECT o.path FROM files f INDEXED BY files_large JOIN outbox o ON o.path = f.path
            LEFT JOIN tus_uploads t ON t.path = o.path AND t.endpoint = ?
            WHERE f.present = 1 AND f.kind = 0 AND f.size > ? AND o.last_error IS NULL AND f.moved_from IS NULL
              AND (f.tag = 0 OR f.synced_deleted = 1 OR f.synced_sha256 IS NOT f.sha256 OR o.resend = 1)
              AND NOT coalesce(t.state LIKE 'asset %' AND t.sha256 = f.sha256 AND t.size = f.size, 0)
            ORDER BY o.queued_at, o.path LIMIT ?
            """, uploadEndpoint, inlineLimit, limit + excluding.count) { row in
            let path = row.text(0)
            if !excluding.contains(path) && out.count < limit { out.append(path) }
        }
        return out
    }

    /// Opens `path` for its upload. Nil when it is no longer a file to upload, or when the disk no
    /// longer matches the database (the path is then looked at again, and comes back once hashed).
    public func openForUpload(_ path: String) throws -> UploadSource? {
        guard let row = try store.file(path), row.present, row.kind == .file, row.size > inlineLimit,
              try row.hasLocalChange || store.outboxEntry(path)?.resend == true,
              let recordPath = try? RecordPath(validating: path), let local = locate(recordPath) else { return nil }
        let (root, relative) = (local.root.index, local.relative)
        let held: HeldFile
        let stat: FileStat
        do {
            let file = try safeRoots[root].open(relative, flags: O_RDONLY | O_NOCTTY | O_NONBLOCK)
            held = try HeldFile(duplicating: file.raw)
            stat = try held.stat()
        } catch {
            unstable.append((root, relative))
            return nil
        }
        guard stat.kind == .file, row.matches(stat), !ContentReader.beingWritten(held.raw, modifiedAt: stat.mtime) else {
            unstable.append((root, relative))
            return nil
        }
        var source = UploadSource(path: path, file: held, size: stat.size, mtime: stat.mtime, inode: stat.inode, sha256: row.sha256)
        if let entry = try store.tusUpload(path: path, endpoint: uploadEndpoint) {
            if entry.matches(size: stat.size, mtime: stat.mtime, inode: stat.inode), entry.sha256 == row.sha256,
               !entry.state.hasPrefix(Self.finishedPrefix) {
                source.resume = entry.state
            } else {
                if !entry.state.hasPrefix(Self.finishedPrefix) { source.stale = entry.state }
                try store.removeTusUpload(path: path, endpoint: uploadEndpoint)
            }
        }
        return source
    }

    /// Keeps where an upload stands (before its first byte, and after each chunk). Throws
    /// `UploadSuperseded` when the path's content is no longer the one being sent, which ends the
    /// upload at its next chunk instead of at its last.
    public func saveUpload(_ source: UploadSource, state: String) throws {
        guard let row = try store.file(source.path), row.present, row.sha256 == source.sha256 else {
            throw UploadSuperseded(path: source.path)
        }
        try store.saveTusUpload(TusUploadEntry(path: source.path, endpoint: uploadEndpoint, size: source.size, mtime: source.mtime,
                                               inode: source.inode, sha256: source.sha256, state: state))
    }

    /// The upload finished and what was sent hashed to `source.sha256`: the record may name it.
    public func uploadFinished(_ source: UploadSource, assetID: String) throws {
        try store.saveTusUpload(TusUploadEntry(path: source.path, endpoint: uploadEndpoint, size: source.size, mtime: source.mtime,
                                               inode: source.inode, sha256: source.sha256, state: Self.finishedPrefix + assetID))
    }

    /// Forgets the upload of `path` (it is of no use any more).
    public func dropUpload(_ path: String) throws {
        try store.removeTusUpload(path: path, endpoint: uploadEndpoint)
    }

    /// The asset a push of `row` may carry: a finished upload of exactly its content.
    func finishedAsset(for row: KnownFile) throws -> Asset? {
        guard let entry = try store.tusUpload(path: row.path, endpoint: uploadEndpoint), entry.state.hasPrefix(Self.finishedPrefix),
              entry.sha256 == row.sha256, entry.size == row.size else { return nil }
        return Asset(id: String(entry.state.dropFirst(Self.finishedPrefix.count)), size: entry.size, sha256: entry.sha256)
    }
}

/// An upload whose file changed (or went away) while it was being sent.
public struct UploadSuperseded: Error, Sendable, CustomStringConvertible {
    public var path: String
    public var description: String { "\(quoted(path)) changed while it was being uploaded" }
}
