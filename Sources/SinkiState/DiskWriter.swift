import Dispatch
import CSystemShim
import Glibc
import SinkiMerge
import SinkiSupport

/// Writes below a root the way remote changes must land: a temporary file beside the target, then
/// a rename, so a reader sees the old file or the new one, never half of one. No fsync here: the
/// caller makes a whole batch durable with one `syncfs`.
enum DiskWriter {
    /// Writes `bytes` as `name` in the directory `parent`; returns the new file's stat.
    /// `expect` is what must still be at `name` (nil: nothing) right before it is replaced, so a
    /// local edit that lands meanwhile is not overwritten. `prepare` runs on the filled file before its
    /// mode is set (its extended attributes go on there). `willAppear` runs just before the name
    /// appears, with the anonymous file's inode when there is one (its inotify events name it `#INO`).
    /// `exchanged` runs right after a new version traded places with the old one (tests act there).
    static func writeFile(parent: Int32, parentPath: String, name: String, bytes: [UInt8], mode: UInt32, modifiedAt: Int64,
                          expect: FileStat?, prepare: ((FileDescriptor) -> Void)? = nil,
                          willAppear: (UInt64?) -> Void = { _ in }, exchanged: () -> Void = {}) throws(SystemError) -> FileStat {
        let wanted = allowed(mode)
        if expect == nil {
            // A new file: an anonymous inode, filled, then linked under its name. The name appears
            // whole in one directory operation (no temporary name, no rename), and linkat refuses
            // if something took the name meanwhile.
            let fd = sinki_open_anonymous(parent, O_WRONLY | O_CLOEXEC, wanted)
            if fd >= 0 {
                let file = FileDescriptor(raw: fd, path: parentPath + "/" + name)
                try fill(file, bytes: bytes, mode: wanted, modifiedAt: modifiedAt, prepare: prepare)
                let written = try file.stat()
                willAppear(written.inode)
                try syscall("link", path: file.path) { linkat(AT_FDCWD, "/proc/self/fd/\(fd)", parent, name, AT_SYMLINK_FOLLOW) }
                // After the link: it changed the ctime the database keeps.
                return try placed(file, written: written)
            }
            // File systems without O_TMPFILE take the temporary-name path below.
            guard errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL || errno == ENOENT else {
                throw SystemError("open", errno: errno, path: parentPath + "/" + name)
            }
        }
        let temp = TempNames.make(for: name)
        let fd = try syscall("open", path: parentPath + "/" + temp) {
            openat(parent, temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, wanted)
        }
        let file = FileDescriptor(raw: fd, path: parentPath + "/" + temp)
        do {
            try fill(file, bytes: bytes, mode: wanted, modifiedAt: modifiedAt, prepare: prepare)
            let written = try file.stat()
            willAppear(nil)
            try replace(parent: parent, parentPath: parentPath, temp: temp, name: name, expect: expect, exchanged: exchanged)
            // Still open: the stat after the rename (which changed its ctime) without a lookup.
            return try placed(file, written: written)
        } catch {
            unlinkat(parent, temp, 0)
            throw error
        }
    }

    /// A mode from a record as it may be on this machine: its permission bits, never more than the
    /// local umask allows (a peer's 0777 is 0755 under umask 022), as a file made here would be; a
    /// record with none is a plain file.
    static func allowed(_ mode: UInt32) -> mode_t { mode_t(KeptMode.ofRecord(mode)) }

    /// The process's umask, read once (reading it means setting it, so never again later).
    static let umaskBits: mode_t = {
        let old = umask(0o022)
        umask(old)
        return old
    }()

    private static func fill(_ file: FileDescriptor, bytes: [UInt8], mode: mode_t, modifiedAt: Int64,
                             prepare: ((FileDescriptor) -> Void)?) throws(SystemError) {
        try file.write(bytes)
        let unwritable = try prepared(file, mode: mode, prepare)
        // open() applied the umask; only when that changed the mode is a fchmod needed.
        if mode & ~umaskBits != mode || unwritable {
            try syscall("fchmod", path: file.path) { fchmod(file.raw, mode) }
        }
        try file.setModified(modifiedAt)
    }

    /// Runs `prepare` on a new file (its extended attributes go on), which its owner may write for the
    /// moment: only then does the kernel let the owner set them. Returns whether the file's mode must
    /// be set again afterwards.
    private static func prepared(_ file: FileDescriptor, mode: mode_t, _ prepare: ((FileDescriptor) -> Void)?) throws(SystemError) -> Bool {
        guard let prepare else { return false }
        let unwritable = mode & S_IWUSR == 0
        if unwritable { try syscall("fchmod", path: file.path) { fchmod(file.raw, mode | S_IWUSR) } }
        prepare(file)
        return unwritable
    }

    /// Makes `name` a symlink to `target`, replacing what is there.
    static func writeSymlink(parent: Int32, parentPath: String, name: String, target: [UInt8], expect: FileStat?) throws(SystemError) -> FileStat {
        let temp = TempNames.make(for: name)
        var text = target
        text.append(0)
        let status = text.withUnsafeBufferPointer { symlinkat(UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), parent, temp) }
        if status != 0 { throw SystemError("symlink", errno: errno, path: parentPath + "/" + name) }
        do {
            try replace(parent: parent, parentPath: parentPath, temp: temp, name: name, expect: expect)
        } catch {
            unlinkat(parent, temp, 0)
            throw error
        }
        return try statEntry(parent: parent, parentPath: parentPath, name: name)
    }

    /// Puts the checked download `sourceName` (in the directory `sourceDirectory`) at `name`, as
    /// `writeFile` does with bytes: mode and mtime set first, `expect` checked right before. With
    /// `move` the download itself is renamed into place (no byte is copied); otherwise, or when it lies
    /// on another file system, it is copied to a temporary file beside the target first.
    static func placeFile(sourceDirectory: String, sourceName: String, move: Bool, parent: Int32, parentPath: String, name: String,
                          mode: UInt32, modifiedAt: Int64, expect: FileStat?, prepare: ((FileDescriptor) -> Void)? = nil,
                          willAppear: () -> Void) throws(SystemError) -> FileStat {
        let wanted = allowed(mode)
        let source = try FileDescriptor.open(sourceDirectory + "/" + sourceName, flags: O_RDONLY | O_NOFOLLOW)
        var parentStat = Glibc.stat()
        try syscall("fstat", path: parentPath) { fstat(parent, &parentStat) }
        if move, try source.stat().device == UInt64(parentStat.st_dev) {
            let directory = try FileDescriptor.open(sourceDirectory, flags: O_RDONLY | O_DIRECTORY)
            // Claimed under a name of its own first: another fetch of the same content may finish now
            // and rename its file over `sourceName`, and what goes into place must be the file given
            // its mode and mtime here (the fault suite's seed 4008 placed a fresh 0600 download).
            let claimed = TempNames.make(for: sourceName)
            try syscall("rename", path: sourceDirectory + "/" + sourceName) { renameat(directory.raw, sourceName, directory.raw, claimed) }
            do {
                let mine = try FileDescriptor.open(sourceDirectory + "/" + claimed, flags: O_RDONLY | O_NOFOLLOW)
                if let prepare {
                    // The download is its owner's to write: its attributes go on before its mode.
                    try syscall("fchmod", path: mine.path) { fchmod(mine.raw, wanted | S_IWUSR) }
                    prepare(mine)
                }
                try syscall("fchmod", path: mine.path) { fchmod(mine.raw, wanted) }
                try mine.setModified(modifiedAt)
                let written = try mine.stat()
                willAppear()
                let replaced = holdLargeVersion(parent: parent, name: name, expect: expect)
                defer { releaseLater(replaced) }
                try replace(parent: parent, parentPath: parentPath, temp: claimed, name: name, expect: expect, from: directory.raw)
                return try placed(mine, written: written)
            } catch {
                // Back under its name for the next attempt, unless another fetch put one there meanwhile.
                if linkat(directory.raw, claimed, directory.raw, sourceName, 0) == 0 || errno == EEXIST { unlinkat(directory.raw, claimed, 0) }
                throw error
            }
        }
        let temp = TempNames.make(for: name)
        let fd = try syscall("open", path: parentPath + "/" + temp) {
            openat(parent, temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, wanted)
        }
        let file = FileDescriptor(raw: fd, path: parentPath + "/" + temp)
        do {
            try source.copyAll(to: file)
            let unwritable = try prepared(file, mode: wanted, prepare)
            if wanted & ~umaskBits != wanted || unwritable {
                try syscall("fchmod", path: file.path) { fchmod(file.raw, wanted) }
            }
            try file.setModified(modifiedAt)
            let written = try file.stat()
            willAppear()
            try replace(parent: parent, parentPath: parentPath, temp: temp, name: name, expect: expect)
            return try placed(file, written: written)
        } catch {
            unlinkat(parent, temp, 0)
            throw error
        }
    }

    /// The stat to record for a file just put in place: taken after the rename or link (which moved
    /// its ctime), unless a program wrote the file in the moment since it appeared. Then the stat of
    /// what was written is kept, so the row does not take that edit for the version applied: the next
    /// look at the disk finds it changed and sends it, and a remote delete does not remove it (the
    /// fault suite's seed 5: an append right after a download was deleted by the next tombstone).
    static func placed(_ file: FileDescriptor, written: FileStat) throws(SystemError) -> FileStat {
        let now = try file.stat()
        guard now.size == written.size, now.mtime == written.mtime, now.inode == written.inode, now.mode == written.mode else { return written }
        return now
    }

    /// Files at least this large are let go off the apply's thread when a new version replaces them.
    static let lazilyFreed: Int64 = 64 << 20

    /// An open descriptor of the large file a rename is about to replace, so that the rename does not
    /// free its blocks (ext4 frees a gibibyte's in some 0.4 s, inside the rename): the last close does,
    /// later, on another thread (`releaseLater`). -1 when there is no such file.
    private static func holdLargeVersion(parent: Int32, name: String, expect: FileStat?) -> Int32 {
        guard let expect, expect.kind == .file, expect.size >= lazilyFreed else { return -1 }
        return openat(parent, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
    }

    private static func releaseLater(_ fd: Int32) {
        guard fd >= 0 else { return }
        DispatchQueue.global(qos: .utility).async { close(fd) }
    }

    private static func replace(parent: Int32, parentPath: String, temp: String, name: String, expect: FileStat?,
                                from sourceDirectory: Int32? = nil, exchanged: () -> Void = {}) throws(SystemError) {
        let now = try? FileDescriptor.statEntry(parent: parent, parentPath: parentPath, name: name)
        if let now, now.kind == .directory {
            // A directory the server says is now a file: only an empty one gives way.
            if unlinkat(parent, name, AT_REMOVEDIR) != 0 { throw SystemError("rename", errno: EISDIR, path: parentPath + "/" + name) }
        } else if !sameEntry(now, expect) {
            // Changed here since it was looked at: the caller decides again (a local edit is a conflict).
            throw SystemError("rename", errno: EAGAIN, path: parentPath + "/" + name)
        } else if let now, now.kind == .file {
            // Unchanged so far, but a program has it open to write: replacing it now would lose what it
            // writes next. It waits until the file is closed.
            if openForWriting(parent: parent, name: name) { throw SystemError("rename", errno: ETXTBSY, path: parentPath + "/" + name) }
            return try exchange(parent: parent, parentPath: parentPath, temp: temp, name: name, expect: expect, from: sourceDirectory ?? parent,
                                exchanged: exchanged)
        }
        try syscall("rename", path: parentPath + "/" + name) { renameat(sourceDirectory ?? parent, temp, parent, name) }
    }

    /// Puts the new version `temp` at `name` by trading places with the old one, then checks the old
    /// one where it went: a program that opened it to write in the moment after the check above would
    /// write into a file with no name once it is unlinked (what `remove` guards against too). Unchanged
    /// and open to no writer, it goes; otherwise the two trade back, and the caller decides again.
    private static func exchange(parent: Int32, parentPath: String, temp: String, name: String, expect: FileStat?,
                                 from source: Int32, exchanged: () -> Void) throws(SystemError) {
        if sinki_rename_exchange(source, temp, parent, name) != 0 {
            // File systems without RENAME_EXCHANGE: the plain rename, its moment of risk left open.
            guard errno == EINVAL || errno == ENOSYS else { throw SystemError("rename", errno: errno, path: parentPath + "/" + name) }
            try syscall("rename", path: parentPath + "/" + name) { renameat(source, temp, parent, name) }
            return
        }
        exchanged()
        let old = try? FileDescriptor.statEntry(parent: source, parentPath: parentPath, name: temp)
        let unchanged = sameEntry(old, expect)
        if unchanged && !openForWriting(parent: source, name: temp) {
            unlinkat(source, temp, 0)
            return
        }
        // Written or opened to write in between: back under its name, where the edit wins.
        try syscall("rename", path: parentPath + "/" + name) { sinki_rename_exchange(source, temp, parent, name) }
        throw SystemError("rename", errno: unchanged ? ETXTBSY : EAGAIN, path: parentPath + "/" + name)
    }

    /// Whether another process has the file `name` open for writing: the kernel grants a read lease
    /// only while nobody does (dropped at once). Where leases are not offered, the answer is no.
    static func openForWriting(parent: Int32, name: String) -> Bool {
        let fd = openat(parent, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return ContentReader.hasWriters(fd)
    }

    /// Whether what is on disk is still what was planned against (content identity, not ctime).
    static func sameEntry(_ now: FileStat?, _ expect: FileStat?) -> Bool {
        switch (now, expect) {
        case (nil, nil): return true
        case let (now?, expect?): return now.kind == expect.kind && (now.kind == .directory || now.sameIdentity(as: expect))
        default: return false
        }
    }

    static func statEntry(parent: Int32, parentPath: String, name: String) throws(SystemError) -> FileStat {
        guard let stat = try FileDescriptor.statEntry(parent: parent, parentPath: parentPath, name: name) else {
            throw SystemError("stat", errno: ENOENT, path: parentPath + "/" + name)
        }
        return stat
    }

    /// Creates directory `name` (or keeps the one there); returns its stat. A file or symlink there is
    /// replaced only when it still is `replacing` (the synced version the server's folder replaces);
    /// `willRemove` runs right before it goes.
    static func makeDirectory(parent: Int32, parentPath: String, name: String, mode: UInt32, replacing: FileStat? = nil,
                              made: inout Bool, willRemove: () -> Void = {}) throws(SystemError) -> FileStat {
        made = true
        if mkdirat(parent, name, mode == 0 ? 0o755 : allowed(mode)) != 0 {
            made = false
            let code = errno
            guard code == EEXIST else { throw SystemError("mkdir", errno: code, path: parentPath + "/" + name) }
            let existing = try statEntry(parent: parent, parentPath: parentPath, name: name)
            if existing.kind != .directory {
                guard let replacing, replacing.kind != .directory, sameEntry(existing, replacing) else {
                    throw SystemError("mkdir", errno: EAGAIN, path: parentPath + "/" + name)
                }
                willRemove()
                try syscall("unlink", path: parentPath + "/" + name) { unlinkat(parent, name, 0) }
                try syscall("mkdir", path: parentPath + "/" + name) { mkdirat(parent, name, mode == 0 ? 0o755 : allowed(mode)) }
                made = true
            }
        }
        if mode != 0 {
            let fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if fd >= 0 {
                fchmod(fd, allowed(mode))
                close(fd)
            }
        }
        return try statEntry(parent: parent, parentPath: parentPath, name: name)
    }

    /// Removes `name` if it is still what was planned against. A directory goes only when empty:
    /// returns false when it holds something (an edit made here, which wins over the delete).
    static func remove(parent: Int32, parentPath: String, name: String, expect: FileStat?) throws(SystemError) -> Bool {
        guard let now = try FileDescriptor.statEntry(parent: parent, parentPath: parentPath, name: name) else { return true }
        if now.kind == .directory {
            if unlinkat(parent, name, AT_REMOVEDIR) == 0 { return true }
            let code = errno
            if code == ENOTEMPTY || code == EEXIST { return false }
            throw SystemError("rmdir", errno: code, path: parentPath + "/" + name)
        }
        guard sameEntry(now, expect) else { return false }
        guard now.kind == .file else {
            try syscall("unlink", path: parentPath + "/" + name) { unlinkat(parent, name, 0) }
            return true
        }
        // Moved aside first, then checked, then unlinked: a program that opened the file before the
        // move still writes into it, and what it writes would be lost with an unlinked file (the fault
        // suite's seeds 30003 and 30012: an append between the check and the unlink). After the move
        // no one can open it by its name, so a file unchanged and open to no writer is safe to drop.
        let aside = TempNames.make(for: name)
        try syscall("rename", path: parentPath + "/" + name) { sinki_rename_noreplace(parent, name, parent, aside) }
        let moved = try? FileDescriptor.statEntry(parent: parent, parentPath: parentPath, name: aside)
        if sameEntry(moved, expect) && !openForWriting(parent: parent, name: aside) {
            unlinkat(parent, aside, 0)
            return true
        }
        // Written meanwhile, or open to write: back under its name, where the edit wins over the delete.
        try putBack(parent: parent, parentPath: parentPath, aside: aside, name: name)
        return false
    }

    /// Puts the file moved aside to `aside` back at `name`; when a new file took the name in the
    /// moment between, the one put back takes a conflict copy's name beside it, so neither is lost.
    private static func putBack(parent: Int32, parentPath: String, aside: String, name: String) throws(SystemError) {
        if sinki_rename_noreplace(parent, aside, parent, name) == 0 { return }
        guard errno == EEXIST else { throw SystemError("rename", errno: errno, path: parentPath + "/" + name) }
        let time = Clock.now()
        for attempt in 0..<100 {
            if sinki_rename_noreplace(parent, aside, parent, ConflictName.make(for: name, device: "kept", time: time, attempt: attempt)) == 0 { return }
            guard errno == EEXIST else { break }
        }
        throw SystemError("rename", errno: errno, path: parentPath + "/" + aside)
    }
}

extension FileDescriptor {
    /// `lstat` of `name` in the directory descriptor `parent`; nil when absent.
    static func statEntry(parent: Int32, parentPath: String, name: String) throws(SystemError) -> FileStat? {
        var raw = Glibc.stat()
        if fstatat(parent, name, &raw, AT_SYMLINK_NOFOLLOW) == 0 { return FileStat(raw) }
        let code = errno
        if code == ENOENT || code == ENOTDIR { return nil }
        throw SystemError("stat", errno: code, path: parentPath + "/" + name)
    }
}
