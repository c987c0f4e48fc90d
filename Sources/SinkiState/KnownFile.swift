import SinkiRecord
import SinkiSupport

/// One row of the files table: a path as last seen on disk, and as last agreed with the server.
public struct KnownFile: Sendable, Equatable {
    public var path: String
    public var kind: RecordKind
    /// On disk when last looked at.
    public var present: Bool
    public var size: Int64
    public var mtime: Int64
    public var ctime: Int64
    public var inode: UInt64
    public var mode: UInt32
    /// Hash of the content last seen on disk; empty for directories and absent paths.
    public var sha256: String
    /// The merge type stamped on the record.
    public var type: String
    /// changeTag of the last version both sides shared; 0 when never synced.
    public var tag: Int64
    /// Content hash of that shared version (nil: never synced). For a shared tombstone: the content
    /// the delete removed, as known here (nil when unknown), so that a rename of that very content
    /// elsewhere can be recognised as a rename of what was deleted.
    public var syncedSHA256: String?
    public var syncedDeleted: Bool
    /// This content was renamed here from that path and the server has not taken it yet: the push
    /// names the source instead of sending the bytes again.
    public var movedFrom: String?

    public init(path: String, kind: RecordKind, present: Bool, size: Int64 = 0, mtime: Int64 = 0, ctime: Int64 = 0,
                inode: UInt64 = 0, mode: UInt32 = 0, sha256: String = "", type: String = "", tag: Int64 = 0,
                syncedSHA256: String? = nil, syncedDeleted: Bool = false, movedFrom: String? = nil) {
        self.path = path
        self.kind = kind
        self.present = present
        self.size = size
        self.mtime = mtime
        self.ctime = ctime
        self.inode = inode
        self.mode = mode
        self.sha256 = sha256
        self.type = type
        self.tag = tag
        self.syncedSHA256 = syncedSHA256
        self.syncedDeleted = syncedDeleted
        self.movedFrom = movedFrom
    }

    /// Whether `stat` shows the same thing this row last saw (content need not be read again).
    /// Directories compare kind and mode only: their mtime moves with every entry added.
    public func matches(_ stat: FileStat) -> Bool {
        guard present, kind == KnownFile.kind(of: stat.kind) else { return false }
        switch kind {
        case .directory: return mode == stat.mode
        case .file, .symlink:
            // ctime too: content rewritten with its old mtime restored (tar, rsync -t) shows only there.
            return size == stat.size && mtime == stat.mtime && inode == stat.inode && mode == stat.mode && ctime == stat.ctime
        }
    }

    /// Whether what is on disk differs from the version last agreed with the server.
    public var hasLocalChange: Bool {
        if tag == 0 { return present }
        if !present { return !syncedDeleted }
        if syncedDeleted { return true }
        return syncedSHA256 != sha256
    }

    /// Takes in what `stat` says (not the hash, which the caller sets when it read the content).
    public mutating func observe(_ stat: FileStat) {
        present = true
        kind = KnownFile.kind(of: stat.kind)
        size = stat.kind == .directory ? 0 : stat.size
        mtime = stat.mtime
        ctime = stat.ctime
        inode = stat.inode
        mode = stat.mode
    }

    public static func kind(of kind: FileStat.Kind) -> RecordKind {
        switch kind {
        case .directory: return .directory
        case .symlink: return .symlink
        case .file, .special: return .file
        }
    }

    /// Records that the server now holds `record` as the shared version.
    public mutating func agree(with record: Record) {
        // A tombstone keeps the hash of the version it deleted (see `syncedSHA256`).
        syncedSHA256 = record.deleted ? (syncedDeleted || tag == 0 ? nil : syncedSHA256) : record.sha256
        tag = record.changeTag
        syncedDeleted = record.deleted
        if !record.deleted { type = record.type }
    }
}

/// What a walk compares of a present row with the disk (`KnownFile.matches`), without the row's text.
public struct KnownStat: Sendable, Equatable {
    public var kind: RecordKind
    public var size: Int64
    public var mtime: Int64
    public var ctime: Int64
    public var inode: UInt64
    public var mode: UInt32

    /// The same answer as `KnownFile.matches` for the present row this was read from.
    public func matches(_ stat: FileStat) -> Bool {
        guard kind == KnownFile.kind(of: stat.kind) else { return false }
        switch kind {
        case .directory: return mode == stat.mode
        case .file, .symlink: return size == stat.size && mtime == stat.mtime && inode == stat.inode && mode == stat.mode && ctime == stat.ctime
        }
    }
}

extension RecordKind {
    var code: Int64 {
        switch self {
        case .file: return 0
        case .directory: return 1
        case .symlink: return 2
        }
    }

    init(code: Int64) {
        switch code {
        case 1: self = .directory
        case 2: self = .symlink
        default: self = .file
        }
    }
}
