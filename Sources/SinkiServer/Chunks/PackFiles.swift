import CSystemShim
import Dispatch
import Glibc
import SinkiSupport
import Synchronization

/// A pack being written (`KEY/packs/ID`): chunks' bytes back to back, appended at the places handed
/// out by its `PackAppender`. While a pack is open here, its descriptor holds a shared `flock` on it,
/// so that garbage collection (which takes an exclusive one, without waiting, before it copies a pack
/// or removes it) leaves it alone: bytes may be on their way into it whose entries are not committed
/// yet. The lock goes with the descriptor, when the last slot written into the pack is let go.
final class OpenPack: Sendable {
    let id: String
    let path: String
    let fd: Int32

    /// A new pack in `folder`, made unnamed (`O_TMPFILE`), locked, then linked under its name, so that
    /// no collection ever sees it unlocked; on a file system without unnamed files (NFS), made under
    /// its name and locked at once (collection also leaves packs changed within the last minute).
    init(in folder: String) throws(SystemError) {
        id = RandomID.hex(bytes: 8)
        path = folder + "/" + id
        let directory = try FileDescriptor.open(folder, flags: O_RDONLY | O_DIRECTORY)
        var fd = sinki_open_anonymous(directory.raw, O_RDWR | O_CLOEXEC, 0o600)
        if fd >= 0 {
            guard flock(fd, LOCK_SH) == 0 else {
                let failure = SystemError("flock", errno: errno, path: path)
                close(fd)
                throw failure
            }
            if linkat(AT_FDCWD, "/proc/self/fd/\(fd)", AT_FDCWD, path, AT_SYMLINK_FOLLOW) != 0 {
                let failure = SystemError("link", errno: errno, path: path)
                close(fd)
                throw failure
            }
        } else {
            guard errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL else { throw SystemError("open", errno: errno, path: folder + " (O_TMPFILE)") }
            fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw SystemError("open", errno: errno, path: path) }
            guard flock(fd, LOCK_SH) == 0 else {
                let failure = SystemError("flock", errno: errno, path: path)
                close(fd)
                throw failure
            }
        }
        self.fd = fd
    }

    deinit { close(fd) }

    /// Writes all of `bytes` at `offset`.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(SystemError) {
        var done = 0
        while done < bytes.count {
            let wrote = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            if wrote < 0 {
                if errno == EINTR { continue }
                throw SystemError("write", errno: errno, path: path)
            }
            done += wrote
        }
    }

    /// Where write-back is started, one range after another, off the threads that answer requests:
    /// starting it waits for the device's queue, which made every chunk's answer wait milliseconds.
    private static let writeback = DispatchQueue(label: "sinki-pack-writeback", qos: .utility)

    /// Starts writing `length` bytes at `offset` to disk, later (a record naming them is committed only
    /// after a `syncfs`, which then finds little left).
    func startWriteback(_ offset: Int64, _ length: Int64) {
        Self.writeback.async { [self] in _ = sinki_start_writeback(fd, offset, length) }
    }
}

/// A place in a pack reserved for one chunk's bytes.
struct PackSlot: Sendable {
    let pack: OpenPack
    let offset: Int64
    let length: Int64

    /// Writes `bytes` at `at` bytes into the slot.
    func write(_ bytes: UnsafeRawBufferPointer, at: Int64) throws(SystemError) {
        precondition(at >= 0 && at + Int64(bytes.count) <= length, "bug: a write past its chunk's slot")
        try pack.write(bytes, at: offset + at)
    }
}

/// Hands out places in a user's current pack to the chunks arriving for that user, here, at once
/// (several requests write into one pack, each into its own slot); a pack past `target` bytes is left
/// for a new one. Each server process writes packs of its own.
final class PackAppender: Sendable {
    let folder: String
    private let target: Int64
    private let current = Mutex<(pack: OpenPack, end: Int64)?>(nil)

    init(folder: String, target: Int64) {
        self.folder = folder
        self.target = target
    }

    /// A slot of `length` bytes, its blocks allocated.
    func reserve(_ length: Int64) throws(SystemError) -> PackSlot {
        let reserved = current.withLock { current -> Result<PackSlot, SystemError> in
            var open: (pack: OpenPack, end: Int64)
            if let held = current, held.end == 0 || held.end + length <= target {
                open = held
            } else {
                do throws(SystemError) { open = (try OpenPack(in: folder), 0) } catch { return .failure(error) }
            }
            let slot = PackSlot(pack: open.pack, offset: open.end, length: length)
            open.end += length
            current = open
            return .success(slot)
        }
        let slot = try reserved.get()
        _ = sinki_reserve_blocks(slot.pack.fd, slot.offset, length)
        return slot
    }

    /// Ends the current pack here: the next chunk starts another (collection, which fills packs of
    /// its own one after another).
    func seal() {
        current.withLock { $0 = nil }
    }
}
