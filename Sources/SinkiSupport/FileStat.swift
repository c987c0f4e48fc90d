import Glibc

/// What `lstat` says about a path, reduced to what sync compares.
public struct FileStat: Sendable, Equatable {
    /// The kinds of directory entries sinki tells apart.
    public enum Kind: Sendable, Equatable {
        case file, directory, symlink
        /// fifos, sockets and devices: never synced.
        case special
    }

    public var kind: Kind
    public var size: Int64
    public var mtime: Int64
    public var ctime: Int64
    public var inode: UInt64
    public var device: UInt64
    /// Permission bits (`st_mode & 0o7777`).
    public var mode: UInt32

    public init(kind: Kind, size: Int64, mtime: Int64, ctime: Int64, inode: UInt64, device: UInt64, mode: UInt32) {
        self.kind = kind
        self.size = size
        self.mtime = mtime
        self.ctime = ctime
        self.inode = inode
        self.device = device
        self.mode = mode
    }

    public init(_ raw: stat) {
        switch raw.st_mode & S_IFMT {
        case S_IFREG: kind = .file
        case S_IFDIR: kind = .directory
        case S_IFLNK: kind = .symlink
        default: kind = .special
        }
        size = Int64(raw.st_size)
        mtime = Int64(raw.st_mtim.tv_sec) * 1_000_000_000 + Int64(raw.st_mtim.tv_nsec)
        ctime = Int64(raw.st_ctim.tv_sec) * 1_000_000_000 + Int64(raw.st_ctim.tv_nsec)
        inode = UInt64(raw.st_ino)
        device = UInt64(raw.st_dev)
        mode = UInt32(raw.st_mode & 0o7777)
    }

    /// Whether the content is certainly unchanged if this still holds (size, mtime, inode).
    public func sameIdentity(as other: FileStat) -> Bool {
        kind == other.kind && size == other.size && mtime == other.mtime && inode == other.inode
    }
}
