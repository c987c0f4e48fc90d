import Glibc
import SinkiRecord
import SinkiSupport

/// A file's content as read for hashing or sending, with the stat taken around the read.
public struct FileContent: Sendable {
    public var stat: FileStat
    /// The content identity (`ContentID`): the SHA-256 of the bytes, or of the manifest above 256 KiB.
    public var sha256: String
    /// For a file named by its manifest: its chunks (kept by the agent to rebuild later versions).
    public var chunks: [Chunk]?
    /// The bytes, when the caller asked for them (inline sends).
    public var bytes: [UInt8]?
    /// The file changed while it was read: the hash may mix two versions; read it again later.
    public var unstable: Bool
    /// Another process has it open for writing and wrote to it lately: not read (no hash, no
    /// bytes); looked at again when it is closed or quiet.
    public var busy = false
    /// The covered extended attributes, read on the same descriptor after the bytes, when asked for.
    var xattrs: XattrDisk.Reading?
}

/// Reads files below a root without following symlinks, naming their content (`ContentID`) as the bytes stream.
public enum ContentReader {
    static let chunk = 1 << 20

    /// Hashes (and with `keepBytes` returns) the file at `relative`. Symlinks hash their target text.
    public static func read(_ root: SafeRoot, _ relative: String, keepBytes: Bool) throws(SafeRootError) -> FileContent {
        try read(root, relative, keepBytes: keepBytes, xattrs: nil)
    }

    /// As `read(_:_:keepBytes:)`; with a policy, a regular file's covered extended attributes too, read
    /// after its bytes on the descriptor that read them (a file is opened once for both).
    static func read(_ root: SafeRoot, _ relative: String, keepBytes: Bool, xattrs policy: XattrPolicy?) throws(SafeRootError) -> FileContent {
        if let stat = try root.stat(relative), stat.kind == .symlink {
            let target = try readLink(root, relative)
            return FileContent(stat: stat, sha256: ContentID.of(target), bytes: keepBytes ? target : nil, unstable: false)
        }
        let file = try root.open(relative, flags: O_RDONLY | O_NOCTTY | O_NONBLOCK)
        let before: FileStat
        do { before = try file.stat() } catch { throw .system(error) }
        guard before.kind == .file else {
            throw .system(SystemError("read", errno: before.kind == .directory ? EISDIR : EINVAL, path: file.path))
        }
        if beingWritten(file.raw, modifiedAt: before.mtime) {
            return FileContent(stat: before, sha256: "", bytes: nil, unstable: true, busy: true)
        }
        var hasher = ContentHasher(expectedSize: before.size)
        var bytes: [UInt8]?
        do {
            if keepBytes || before.size <= chunk {
                let all = try file.readAll(sizeHint: Int(before.size))
                all.withUnsafeBytes { hasher.feed($0) }
                if keepBytes { bytes = all }
            } else {
                let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
                defer { buffer.deallocate() }
                var offset: Int64 = 0
                while true {
                    let got = try file.read(into: buffer, at: offset)
                    if got == 0 { break }
                    hasher.feed(UnsafeRawBufferPointer(rebasing: buffer[0..<got]))
                    offset += Int64(got)
                }
            }
        } catch {
            throw .system(error)
        }
        let after: FileStat
        var xattrs: XattrDisk.Reading?
        do {
            after = try file.stat()
            // After the bytes: an attribute changed after this read moves the ctime past the stat
            // recorded, so the next look sees it.
            if let policy { xattrs = try XattrDisk.read(file, policy: policy) }
        } catch {
            throw .system(error)
        }
        let named = hasher.finish()
        let unstable = after.size != before.size || after.mtime != before.mtime || after.ctime != before.ctime || !named.complete
        return FileContent(stat: after, sha256: named.id, chunks: named.chunks, bytes: bytes, unstable: unstable, xattrs: xattrs)
    }

    /// How recently a file open for writing must have changed to count as still being written. A
    /// file an application keeps open but leaves alone (a database, a log) is read after this long.
    static let busyWindowNanoseconds: Int64 = 2_000_000_000

    /// A lease break signals its holder with SIGIO, whose default action ends the process. The lease
    /// lives for two system calls, but a writer opening the file in between must not kill us.
    private static let ignoreLeaseBreaks: Void = { signal(SIGIO, SIG_IGN) }()

    /// `F_SETLEASE` (fcntl.h hides it behind _GNU_SOURCE, which Swift's Glibc module does not set).
    private static let setLease: Int32 = 1024

    /// Whether another process has `fd`'s file open for writing and wrote to it lately, so that a
    /// quiet moment is only a pause. The kernel grants a read lease only while no one has the file
    /// open for writing; it is dropped at once. Where leases are not offered (not the owner, a file
    /// system without them) the answer is no, and the quiet delay alone decides.
    public static func beingWritten(_ fd: Int32, modifiedAt: Int64) -> Bool {
        guard Clock.now() - modifiedAt < busyWindowNanoseconds else { return false }
        return hasWriters(fd)
    }

    /// Whether any process has `fd`'s file open for writing (this one included), by asking for a read
    /// lease and dropping it at once.
    public static func hasWriters(_ fd: Int32) -> Bool {
        _ = ignoreLeaseBreaks
        if fcntl(fd, setLease, F_RDLCK) == 0 {
            _ = fcntl(fd, setLease, F_UNLCK)
            return false
        }
        return errno == EAGAIN
    }

    /// The target text of the symlink at `relative`.
    public static func readLink(_ root: SafeRoot, _ relative: String) throws(SafeRootError) -> [UInt8] {
        var made: [String] = []
        let parent = try root.openParent(of: relative, create: false, made: &made)
        let name = SafeRoot.name(of: relative)
        var buffer = [UInt8](repeating: 0, count: 4097)
        let count = buffer.withUnsafeMutableBufferPointer { readlinkat(parent.raw, name, UnsafeMutableRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), 4097) }
        if count < 0 { throw .system(SystemError("readlink", errno: errno, path: parent.path + "/" + name)) }
        return Array(buffer[0..<count])
    }
}
