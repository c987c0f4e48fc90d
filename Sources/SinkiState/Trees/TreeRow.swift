import SinkiPlan
import SinkiRecord
import SinkiSupport

/// The Local tree's entry for a path: what the disk held when last observed (docs/architecture.md,
/// "The three trees"). Kept with the stat it was seen with, so a look that finds the same stat reads
/// nothing again.
public struct LocalFacts: Sendable, Equatable {
    public var kind: RecordKind
    /// The content id (`ContentID`); empty for a folder, and for a file above the inline limit that no
    /// upload has read yet (its name is known once its chunks are cut).
    public var hash: String
    public var size: Int64
    public var mtime: Int64
    public var ctime: Int64
    public var inode: UInt64
    public var mode: UInt32
    /// The permission bits that count for syncing (`KeptMode`); 0 for what is no file.
    public var perm: UInt32
    /// The digest of the extended attributes the file would send (`XattrSet`): its own within
    /// `[transfer] xattrs` and what it carries of the server's; empty for none and for what is no file.
    public var xattrs: String
    /// The merge type its record carries (`dir`, `symlink`, or the rule chosen by its name).
    public var type: String

    /// `perm` as stored; nil: taken from `mode` through this machine's umask.
    public init(kind: RecordKind, hash: String = "", size: Int64 = 0, mtime: Int64 = 0, ctime: Int64 = 0, inode: UInt64 = 0,
                mode: UInt32 = 0, type: String = "", perm: UInt32? = nil, xattrs: String = "") {
        self.kind = kind
        self.hash = kind == .directory ? "" : hash
        self.size = kind == .directory ? 0 : size
        self.mtime = mtime
        self.ctime = ctime
        self.inode = inode
        self.mode = mode
        self.perm = kind == .file ? perm ?? KeptMode.ofDisk(mode) : 0
        self.xattrs = kind == .file ? xattrs : ""
        self.type = type
    }

    /// The facts of what `stat` shows, content not read (`hash` empty).
    public init(_ stat: FileStat, type: String) {
        self.init(kind: KnownKind.of(stat.kind), size: stat.size, mtime: stat.mtime, ctime: stat.ctime, inode: stat.inode,
                  mode: stat.mode, type: type)
    }

    /// Whether `stat` shows the same thing these facts were taken from (content need not be read
    /// again). Folders compare kind and mode only: their mtime moves with every entry added.
    public func matches(_ stat: FileStat) -> Bool {
        guard kind == KnownKind.of(stat.kind) else { return false }
        switch kind {
        case .directory: return mode == stat.mode
        case .file, .symlink:
            // ctime too: content rewritten with its old mtime restored (tar, rsync -t) shows only there.
            return size == stat.size && mtime == stat.mtime && inode == stat.inode && mode == stat.mode && ctime == stat.ctime
        }
    }

    /// Whether `stat`, taken right after a rename, is still this file: a rename keeps size, mtime,
    /// inode and mode (it moves ctime).
    public func sameFile(_ stat: FileStat) -> Bool {
        kind == KnownKind.of(stat.kind) && size == stat.size && mtime == stat.mtime && inode == stat.inode && mode == stat.mode
    }

    /// Takes in what `stat` says, keeping the hash and the attributes' digest (the caller sets them when
    /// it read them).
    public mutating func observe(_ stat: FileStat) {
        kind = KnownKind.of(stat.kind)
        size = kind == .directory ? 0 : stat.size
        mtime = stat.mtime
        ctime = stat.ctime
        inode = stat.inode
        mode = stat.mode
        perm = kind == .file ? KeptMode.ofDisk(stat.mode) : 0
        if kind != .file { xattrs = "" }
        if kind == .directory { hash = "" }
    }

    /// A file above the inline limit whose content no upload has named yet.
    public var isUnread: Bool { kind != .directory && hash.isEmpty }

    public var node: Node { Node(kind: kind, hash: hash, perm: perm, xattrs: xattrs) }
}

/// The Synced tree's entry: the last version both sides agreed on, the merge base.
public struct SyncedFacts: Sendable, Equatable {
    /// The record's changeTag then.
    public var tag: Int64
    /// nil: both sides agreed the path is deleted.
    public var kind: RecordKind?
    public var hash: String
    /// The permission bits agreed on (`KeptMode`); 0 for what is no file.
    public var perm: UInt32
    /// The digest of the extended attributes agreed on (`XattrSet`); empty for none.
    public var xattrs: String

    public init(tag: Int64, kind: RecordKind?, hash: String = "", perm: UInt32 = KeptMode.ofRecord(0), xattrs: String = "") {
        self.tag = tag
        self.kind = kind
        self.hash = kind == nil || kind == .directory ? "" : hash
        self.perm = kind == .file ? perm : 0
        self.xattrs = kind == .file ? xattrs : ""
    }

    /// The agreement recording `remote` as shared makes.
    public init(_ remote: RemoteFacts) {
        self.init(tag: remote.tag, kind: remote.kind, hash: remote.hash, perm: remote.perm, xattrs: remote.xattrDigest)
    }

    public var node: Node? { kind.map { Node(kind: $0, hash: hash, perm: perm, xattrs: xattrs) } }
}

/// The Remote tree's entry: the server's record as last read (feed, a save's answer, a listing),
/// without its inline content (kept apart, `InlineContent`).
public struct RemoteFacts: Sendable, Equatable {
    public var tag: Int64
    /// nil: a tombstone.
    public var kind: RecordKind?
    /// The record's content id (`sha256`); empty for a folder and a tombstone.
    public var hash: String
    public var size: Int64
    public var type: String
    public var mode: UInt32
    /// `mode` as it counts here (`KeptMode`); 0 for what is no file.
    public var perm: UInt32
    public var mtime: Int64
    public var device: String
    public var movedFrom: String?
    /// A large file's asset: a manifest's hash (its chunks in the `manifests` table), or a tus upload's id.
    public var assetID: String?
    public var assetIsManifest: Bool
    /// The server lacked chunks of this version when it said it (`Record.incomplete`).
    public var incomplete: Bool
    /// The record's extended attributes, every one of them (a device's `[transfer] xattrs` chooses
    /// which it writes to disk; the others it carries along in what it sends).
    public var xattrs: ExtendedAttributes
    /// Their digest (`XattrSet`); empty for none.
    public var xattrDigest: String

    /// `xattrDigest` as stored; nil: computed from `xattrs`.
    public init(tag: Int64, kind: RecordKind?, hash: String = "", size: Int64 = 0, type: String = "", mode: UInt32 = 0, mtime: Int64 = 0,
                device: String = "", movedFrom: String? = nil, assetID: String? = nil, assetIsManifest: Bool = false, perm: UInt32? = nil,
                incomplete: Bool = false, xattrs: ExtendedAttributes = .none, xattrDigest: String? = nil) {
        self.tag = tag
        self.kind = kind
        self.hash = kind == nil || kind == .directory ? "" : hash
        self.size = kind == nil || kind == .directory ? 0 : size
        self.type = type
        self.mode = mode
        self.perm = kind == .file ? perm ?? KeptMode.ofRecord(mode) : 0
        self.mtime = mtime
        self.device = device
        self.movedFrom = kind == nil ? nil : movedFrom
        self.assetID = kind == nil ? nil : assetID
        self.assetIsManifest = assetIsManifest && assetID != nil
        self.incomplete = kind == nil ? false : incomplete
        self.xattrs = kind == .file ? xattrs : .none
        self.xattrDigest = kind == .file ? xattrDigest ?? XattrSet.digest(xattrs) : ""
    }

    public init(_ record: Record) {
        self.init(tag: record.changeTag, kind: record.deleted ? nil : record.kind, hash: record.sha256, size: record.size,
                  type: record.type, mode: record.mode, mtime: record.modifiedAt, device: record.device, movedFrom: record.movedFrom,
                  assetID: record.asset?.id, assetIsManifest: record.asset?.isManifest ?? false, incomplete: record.incomplete,
                  xattrs: record.xattrs)
    }

    public var isTombstone: Bool { kind == nil }

    /// The content id the record counts with in the folder digests; nil for a tombstone.
    var liveContent: String? { kind == nil ? nil : hash }

    public var node: Node? { kind.map { Node(kind: $0, hash: hash, perm: perm, xattrs: xattrDigest) } }

    /// The record, without content: what a write, a merge or a conflict needs to know of it. A large
    /// file's manifest is `chunks`, read from the `manifests` table by the caller.
    public func record(path: String, chunks: [ChunkRef]? = nil) -> Record {
        var record = Record(path: path, type: type, deleted: kind == nil, changeTag: tag, size: size, sha256: hash, mode: mode,
                            modifiedAt: mtime, device: device, movedFrom: movedFrom)
        record.xattrs = xattrs
        if let assetID {
            record.asset = assetIsManifest ? Asset(manifestHash: assetID, chunks: chunks ?? []) : Asset(id: assetID, size: size, sha256: hash)
        }
        return record
    }
}

/// One path's entries in the three trees: one row of the `tree` table.
public struct TreeRow: Sendable, Equatable {
    public var path: String
    public var local: LocalFacts?
    public var synced: SyncedFacts?
    public var remote: RemoteFacts?

    public init(path: String, local: LocalFacts? = nil, synced: SyncedFacts? = nil, remote: RemoteFacts? = nil) {
        self.path = path
        self.local = local
        self.synced = synced
        self.remote = remote
    }

    /// Whether no tree holds anything for the path (the row can go).
    var isEmpty: Bool { local == nil && (synced == nil || synced == SyncedFacts(tag: 0, kind: nil)) && remote == nil }

    /// The three trees agree: the planner's goal (`PathEntries.isSynced`).
    public var isSynced: Bool {
        let remoteTag = remote?.tag ?? 0, syncedTag = synced?.tag ?? 0
        return remoteTag == syncedTag && remote?.node == synced?.node && local?.node == synced?.node
    }

    /// Local differs from Synced: a change here the server has not taken.
    public var hasLocalChange: Bool { local?.node != synced?.node }

    /// Remote differs from Synced: a change there not written here.
    public var hasRemoteChange: Bool { (remote?.tag ?? 0) != (synced?.tag ?? 0) || remote?.node != synced?.node }
}

extension Node {
    /// The planner's node for a record kind, content id (a folder has none), kept mode (`KeptMode`) and
    /// extended attributes' digest (`XattrSet`).
    public init(kind: RecordKind, hash: String, perm: UInt32, xattrs: String = "") {
        switch kind {
        case .file: self = .file(ContentHash(hash), FileMode(perm), XattrDigest(xattrs))
        case .directory: self = .folder
        case .symlink: self = .symlink(ContentHash(hash))
        }
    }

    public var recordKind: RecordKind {
        switch self {
        case .file: return .file
        case .folder: return .directory
        case .symlink: return .symlink
        }
    }

    /// The kept mode of a file (`KeptMode`); 0 for a folder or a symlink.
    public var perm: UInt32 {
        if case let .file(_, mode, _) = self { return mode.bits }
        return 0
    }

    /// The digest of a file's extended attributes (`XattrSet`); empty for none, a folder or a symlink.
    public var xattrs: String {
        if case let .file(_, _, xattrs) = self { return xattrs.hex }
        return ""
    }

    /// The content id (empty for a folder).
    public var hash: String {
        switch self {
        case let .file(hash, _, _), let .symlink(hash): return hash.hex
        case .folder: return ""
        }
    }
}

/// The record kind of what `lstat` saw (fifos and devices count as files; they are skipped before).
enum KnownKind {
    static func of(_ kind: FileStat.Kind) -> RecordKind {
        switch kind {
        case .directory: return .directory
        case .symlink: return .symlink
        case .file, .special: return .file
        }
    }
}

extension RecordKind {
    /// The kind's number in the state database.
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

/// The permission bits that count when a file's mode is compared: its `rwx` bits within this
/// machine's umask, on every side alike, so that a peer's mode this machine cannot keep (0664 under
/// umask 022) is not a difference sent back, and a chmod within it is a change of its own.
public enum KeptMode {
    /// The bits the umask lets a file have.
    static let mask: UInt32 = 0o777 & ~UInt32(DiskWriter.umaskBits)

    /// A mode on this disk.
    public static func ofDisk(_ mode: UInt32) -> UInt32 { mode & mask }

    /// A mode in a record; 0 (a writer that sent none) is a plain file's 0644.
    public static func ofRecord(_ mode: UInt32) -> UInt32 { (mode & 0o777 == 0 ? 0o644 : mode) & mask }
}
