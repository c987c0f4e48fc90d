import CSystemShim
import Glibc

/// An open file descriptor, closed when the owner lets go of it.
public final class FileDescriptor {
    public let raw: Int32
    /// The path it was opened by, for error messages.
    public let path: String

    public init(raw: Int32, path: String) {
        self.raw = raw
        self.path = path
    }

    deinit { close(raw) }

    /// Opens `path` (relative to `directory` when given) with `O_CLOEXEC` added.
    public static func open(_ path: String, flags: Int32, mode: mode_t = 0o644, relativeTo directory: FileDescriptor? = nil,
                            displayPath: String? = nil) throws(SystemError) -> FileDescriptor {
        let shown = displayPath ?? path
        let fd = try syscall("open", path: shown) { openat(directory?.raw ?? AT_FDCWD, path, flags | O_CLOEXEC, mode) }
        return FileDescriptor(raw: fd, path: shown)
    }

    /// Allocates blocks for the bytes about to be written at `offset`, leaving the size alone. Best
    /// effort: on ext4, writing 1 GiB into allocated blocks costs the kernel 0.16 s, against 0.2 to 2.5 s
    /// with delayed allocation (its extent bookkeeping per page); a file system without it just skips it.
    public func reserve(_ offset: Int64, _ length: Int64) {
        guard length > 0 else { return }
        _ = sinki_reserve_blocks(raw, offset, length)
    }

    /// Starts writing `length` bytes at `offset` to disk without waiting: the `fsync` that must come
    /// before an answer then finds little left to write. Best effort, like the page cache it hurries.
    public func startWriteback(_ offset: Int64, _ length: Int64) {
        guard length > 0 else { return }
        _ = sinki_start_writeback(raw, offset, length)
    }

    public func stat() throws(SystemError) -> FileStat {
        var raw = Glibc.stat()
        try syscall("fstat", path: path) { fstat(self.raw, &raw) }
        return FileStat(raw)
    }

    /// `lstat` of a name inside this directory; nil when it does not exist.
    public func statEntry(_ name: String, followSymlinks: Bool = false) throws(SystemError) -> FileStat? {
        var raw = Glibc.stat()
        let status = fstatat(self.raw, name, &raw, followSymlinks ? 0 : AT_SYMLINK_NOFOLLOW)
        if status == 0 { return FileStat(raw) }
        let code = errno
        if code == ENOENT || code == ENOTDIR { return nil }
        throw SystemError("stat", errno: code, path: path + "/" + name)
    }

    /// Reads up to `count` bytes at `offset`; fewer only at end of file.
    public func read(count: Int, at offset: Int64) throws(SystemError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        var done = 0
        let status: Result<Int, SystemError> = out.withUnsafeMutableBytes { buffer in
            Result { () throws(SystemError) in try read(into: buffer, at: offset) }
        }
        done = try status.get()
        out.removeLast(count - done)
        return out
    }

    /// Reads `buffer.count` bytes at `offset` into `buffer`; returns how many (fewer at end of file).
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(SystemError) -> Int {
        var done = 0
        while done < buffer.count {
            let got = try syscall("read", path: path) { pread(raw, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done)) }
            if got == 0 { break }
            done += got
        }
        return done
    }

    /// Reads the whole file.
    public func readAll(sizeHint: Int = 0) throws(SystemError) -> [UInt8] {
        var out = [UInt8]()
        var chunk = max(sizeHint + 1, 64 * 1024)
        var offset: Int64 = 0
        while true {
            let part = try read(count: chunk, at: offset)
            out.append(contentsOf: part)
            offset += Int64(part.count)
            if part.count < chunk { return out }
            chunk = min(chunk * 2, 8 << 20)
        }
    }

    /// Reads from the current position to the end, by `read(2)`: a pipe or FIFO too (a config given as
    /// `--config <(...)`), where `pread` fails. Stops after `limit` bytes, so the caller can tell a
    /// stream longer than it takes.
    public func readStream(limit: Int) throws(SystemError) -> [UInt8] {
        var out = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while out.count < limit {
            let want = min(buffer.count, limit - out.count)
            let status: Result<Int, SystemError> = buffer.withUnsafeMutableBytes { bytes in
                Result { () throws(SystemError) in try syscall("read", path: path) { Glibc.read(raw, bytes.baseAddress!, want) } }
            }
            let got = try status.get()
            if got == 0 { break }
            out.append(contentsOf: buffer[0..<got])
        }
        return out
    }

    /// Writes all of `bytes` at the current position.
    public func write(_ bytes: UnsafeRawBufferPointer) throws(SystemError) {
        var done = 0
        while done < bytes.count {
            let wrote = try syscall("write", path: path) { Glibc.write(raw, bytes.baseAddress! + done, bytes.count - done) }
            done += wrote
        }
    }

    public func write(_ bytes: [UInt8]) throws(SystemError) {
        let status: Result<Void, SystemError> = bytes.withUnsafeBytes { buffer in
            Result { () throws(SystemError) in try write(buffer) }
        }
        try status.get()
    }

    /// Copies this file from its start to `output` (written at its current position), a megabyte at a
    /// time, each piece also to `each` when there is one (to name the content as it passes); returns
    /// the bytes copied.
    @discardableResult
    public func copyAll(to output: FileDescriptor, each: ((UnsafeRawBufferPointer) -> Void)? = nil) throws(SystemError) -> Int64 {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        var offset: Int64 = 0
        while true {
            let got = try read(into: buffer, at: offset)
            if got == 0 { return offset }
            let piece = UnsafeRawBufferPointer(rebasing: buffer[0..<got])
            each?(piece)
            try output.write(piece)
            offset += Int64(got)
        }
    }

    public func sync() throws(SystemError) { try syscall("fsync", path: path) { fsync(raw) } }

    /// Flushes every dirty page of the file system holding this file: one call for a whole batch.
    public func syncFileSystem() throws(SystemError) { try syscall("syncfs", path: path) { sinki_syncfs(raw) } }

    /// Sets access and modification time (nanoseconds since the epoch).
    public func setModified(_ nanoseconds: Int64) throws(SystemError) {
        var times = [timespec(tv_sec: time_t(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000)),
                     timespec(tv_sec: time_t(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))]
        try syscall("futimens", path: path) { futimens(raw, &times) }
    }

    /// The names in this directory (not `.` or `..`), in no particular order; the descriptor must be a
    /// directory. Names that are not valid UTF-8 come back in `invalid`.
    public func listDirectory() throws(SystemError) -> (names: [String], invalid: [[UInt8]]) {
        let copy = try syscall("dup", path: path) { dup(raw) }
        guard let stream = fdopendir(copy) else {
            let code = errno
            close(copy)
            throw SystemError("opendir", errno: code, path: path)
        }
        defer { closedir(stream) }
        rewinddir(stream)
        var names: [String] = []
        var invalid: [[UInt8]] = []
        while true {
            errno = 0
            guard let entry = readdir(stream) else {
                if errno != 0 { throw SystemError("readdir", errno: errno, path: path) }
                break
            }
            let name: [UInt8] = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                let bytes = raw.bindMemory(to: UInt8.self)
                let length = bytes.firstIndex(of: 0) ?? bytes.count
                return Array(bytes[0..<length])
            }
            if name == [46] || name == [46, 46] { continue }
            if let text = String(validating: name, as: UTF8.self) { names.append(text) } else { invalid.append(name) }
        }
        return (names, invalid)
    }
}
