import SinkiRecord
import SinkiSupport

/// A remote change that reached the disk (for observers and `sinkid watch`).
public struct AppliedChange: Sendable, Equatable {
    /// What happened to the path, in observer terms.
    public enum Event: String, Sendable {
        case changed, deleted, merged, conflict
    }
    public var path: String
    public var event: Event
    /// Where it is on this machine.
    public var localPath: String
    public var type: String
    /// The content written, in bytes (0 for a delete, a folder, a chmod): what a download's totals count.
    public var bytes: Int64

    public init(path: String, event: Event, localPath: String, type: String, bytes: Int64 = 0) {
        self.path = path
        self.event = event
        self.localPath = localPath
        self.type = type
        self.bytes = bytes
    }
}

/// Where a file's bytes come from when it is written.
enum WriteContent: Sendable {
    /// Inline bytes (inflated and checked), or a merge's result.
    case bytes([UInt8])
    /// The checked download in the state folder, named by its asset.
    case download(Asset)
}

/// One disk operation the executor carries out, and what it records when it succeeds
/// (docs/planner.md, "Outcomes"). Nothing is recorded when it fails: the path is planned again.
struct DiskOp: Sendable {
    enum Action: Sendable {
        case write(WriteContent)
        case symlink([UInt8])
        case mkdir
        case remove
        /// Renames `from` (below the same root) to the op's path, never replacing anything.
        case rename(from: LocalPath, expect: LocalFacts)
        /// Gives the file at the path the remote version's mode and extended attributes: it holds that
        /// version's bytes already.
        case attributes
    }

    var action: Action
    var path: LocalPath
    var recordPath: String
    /// What the Local tree says is at the path (nil: nothing), checked again right before replacing it.
    var expect: LocalFacts?
    /// The remote version written (its mode, mtime, type); nil for a remove that only makes way, a
    /// folder made for what must come below it, and a merge's result.
    var remote: RemoteFacts?
    /// The Synced entry to record with the outcome (nil: Synced is left as it is).
    var agree: SyncedFacts?
    /// Mode and mtime when there is no remote version to take them from (a merge's result).
    var mode: UInt32 = 0o644
    var modifiedAt: Int64 = 0
    /// The extended attributes the file is to stand for when they are not the remote version's (a
    /// merge's result keeps the local file's).
    var xattrs: ExtendedAttributes?
    /// The content id the written file has (for Local).
    var hash: String = ""
    /// The observer event to report; nil: none (a delete that only makes way, a folder made here).
    var event: AppliedChange.Event?

    /// The stat `DiskWriter` compares with what is there right before it replaces or removes it.
    var expectStat: FileStat? { expect.map(Self.stat) }

    static func stat(_ facts: LocalFacts) -> FileStat {
        FileStat(kind: facts.kind == .directory ? .directory : facts.kind == .symlink ? .symlink : .file, size: facts.size, mtime: facts.mtime,
                 ctime: facts.ctime, inode: facts.inode, device: 0, mode: facts.mode)
    }

    var isMkdir: Bool { if case .mkdir = action { return true } else { return false } }

    /// The whole set of extended attributes the file is to stand for (a record's): the policy's part of
    /// it goes onto the disk, the rest is carried (`XattrSet.effective`).
    var wantedXattrs: ExtendedAttributes { xattrs ?? remote?.xattrs ?? .none }
}

/// The outcome of one disk operation.
enum DiskResult: Sendable {
    /// Done; `unkept`: extended attributes the file system did not keep (the bytes are written).
    case done(FileStat?, unkept: XattrShortfall? = nil)
    /// A folder kept because it still holds something.
    case kept
    case failed(ApplyFailure)
}
