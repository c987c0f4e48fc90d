import Glibc
import SinkiConfig
import SinkiMerge
import SinkiRecord
import SinkiSupport

/// A conflict ready for the merge engine: both changed files as the engine sees them, the path's
/// policy, and the merge base when the rule merges three ways.
public struct MergeJob: Sendable {
    public var path: RecordPath
    /// The versions it was prepared against: carrying it out checks they still are.
    public var local: LocalFacts
    public var remoteFacts: RemoteFacts
    public var policy: MergePolicy
    public var localVersion: MergeVersion
    public var remoteVersion: MergeVersion
    public var base: [UInt8]?
    /// A conflict already waits here for `sinkid resolve`: the newer remote version joins it.
    public var waiting: Bool
    /// Where the remote version's bytes are (kept for carrying the outcome out).
    var remoteContent: WriteContent
}

/// Which side `sinkid resolve --keep` keeps.
public enum KeepChoice: String, Sendable {
    case local, remote, both
}

/// `sinkid resolve` could not settle a conflict; the message says why, for people.
public struct ResolveError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// The merge desk: prepares the conflicts whose rule reads the files for the merge engine, and carries
/// the engine's answers out as the planner's outcomes (`docs/planner.md`, "Rules that read content");
/// keeps `ask` conflicts for `sinkid resolve`.
struct MergeDesk {
    let context: ReplicaContext
    var store: StateStore { context.store }
    /// Inputs of `union`, `json`, `compare` and `command` up to this size are read into memory;
    /// larger ones are handed to the engine by path (and `union` and `json` then fall back).
    static let inMemoryLimit: Int64 = 64 << 20

    /// The job for two changed files at `path`, the remote content being `content`; nil when the local
    /// file changed while it was read (the observer records it, and the planner looks again).
    func prepare(_ path: RecordPath, at local: LocalPath, row: TreeRow, remote: RemoteFacts, content: WriteContent) throws -> MergeJob? {
        guard let localFacts = row.local else { return nil }
        let waiting = try store.conflict(path.string) != nil
        let policy = context.rules.policy(for: path)
        let readsContent = !waiting && [.union, .json, .compare, .command].contains(policy.rule)
        var localContent = MergeVersion.Content.none
        var localHash = localFacts.hash
        if readsContent {
            if localFacts.size <= Self.inMemoryLimit {
                // A large file not hashed yet (it is hashed as it is chunked for upload) is named by this read.
                guard let read = try? ContentReader.read(context.safeRoots[local.root.index], local.relative, keepBytes: true), !read.unstable,
                      read.sha256 == localFacts.hash || localFacts.hash.isEmpty && Int64(read.bytes?.count ?? -1) == localFacts.size,
                      let bytes = read.bytes else { return nil }
                localContent = .bytes(bytes)
                localHash = read.sha256
            } else {
                localContent = .file(context.diskPath(local))
            }
        }
        var remoteContent = MergeVersion.Content.none
        if readsContent {
            switch content {
            case let .bytes(bytes): remoteContent = .bytes(bytes)
            case let .download(asset): remoteContent = .file(context.downloadPath(asset.sha256))
            }
        }
        var base: [UInt8]?
        if readsContent, policy.rule.needsBase, let synced = row.synced, synced.kind == .file { base = context.bases?.get(synced.hash) }
        return MergeJob(path: path, local: localFacts, remoteFacts: remote, policy: policy,
                        localVersion: MergeVersion(content: localContent, size: localFacts.size, modifiedAt: localFacts.mtime,
                                                   device: context.device, sha256: localHash),
                        remoteVersion: MergeVersion(content: remoteContent, size: remote.size, modifiedAt: remote.mtime, device: remote.device,
                                                    sha256: remote.hash),
                        base: base, waiting: waiting, remoteContent: content)
    }

    /// What the engine's answer becomes: a disk operation, a copy kept aside, an agreement on the
    /// remote version as the base of the local one, or a conflict kept for `sinkid resolve`.
    enum Carried {
        case disk(DiskOp)
        case keepLocalAside
        case keepRemoteAside
        case baseOnRemote
        case ask
    }

    func carry(_ job: MergeJob, _ outcome: MergeOutcome, at local: LocalPath) -> Carried {
        let agree = SyncedFacts(job.remoteFacts)
        switch outcome.resolution {
        case .takeRemote(keepLocalCopy: true):
            return .keepLocalAside
        case .takeRemote(keepLocalCopy: false):
            return .disk(DiskOp(action: .write(job.remoteContent), path: local, recordPath: job.path.string, expect: job.local,
                                remote: job.remoteFacts, agree: agree, hash: job.remoteFacts.hash, event: .changed))
        case .keepLocal(keepRemoteCopy: true):
            return .keepRemoteAside
        case .keepLocal(keepRemoteCopy: false):
            return .baseOnRemote
        case let .merged(bytes):
            var op = DiskOp(action: .write(.bytes(bytes)), path: local, recordPath: job.path.string, expect: job.local, remote: nil, agree: agree,
                            hash: ContentID.of(bytes), event: .merged)
            op.mode = job.local.mode
            op.modifiedAt = Clock.now()
            op.xattrs = localXattrs(job, at: local)
            return .disk(op)
        case .ask:
            return .ask
        }
    }

    /// The extended attributes of the local file a merge's result replaces, as the record it would send
    /// (`XattrSet.effective`): the result keeps them, as it keeps its mode. The remote version's when the
    /// file cannot be read.
    private func localXattrs(_ job: MergeJob, at local: LocalPath) -> ExtendedAttributes {
        guard let reading = try? XattrDisk.read(context.safeRoots[local.root.index], local.relative, policy: context.xattrs),
              let unkept = try? store.unkeptXattrs(job.path.string) else { return job.remoteFacts.xattrs }
        return XattrSet.effective(own: reading.own, remote: job.remoteFacts.xattrs, unkept: unkept, policy: context.xattrs).set
    }

    /// The `ask` rule: both versions are copied aside into the state folder (`STATE/conflicts/ROOT/…`,
    /// named like conflict copies) and the conflict is recorded; the path is not touched, and it waits
    /// for `sinkid resolve`. A newer remote version replaces the remote side of a conflict already
    /// waiting. `.changed` when the local file changed while it was copied (nothing is recorded then),
    /// `.same` when the copy shows it holds the remote version already (a large file not hashed yet: the
    /// planner could not tell).
    func keepWaiting(_ job: MergeJob, at local: LocalPath) throws -> Waiting {
        let existing = try store.conflict(job.path.string)
        let now = Clock.now()
        var localSide: ConflictVersion
        if let existing {
            localSide = existing.local
        } else {
            localSide = ConflictVersion(device: context.device, deleted: false, size: job.local.size, sha256: job.local.hash,
                                        modifiedAt: job.local.mtime, copy: nil)
            if job.local.kind == .file {
                guard let (copy, id) = try copyLocalAside(job.path, at: local, sha256: job.local.hash, time: now) else { return .changed }
                if job.remoteFacts.kind == .file, id == job.remoteFacts.hash {
                    unlink(copy)
                    return .same
                }
                localSide.copy = copy
                localSide.sha256 = id
            }
        }
        let remote = job.remoteFacts
        var remoteSide = ConflictVersion(device: remote.device, deleted: false, size: remote.size, sha256: remote.hash, modifiedAt: remote.mtime,
                                         copy: nil)
        if remote.kind == .file {
            switch job.remoteContent {
            case let .download(asset):
                // A large file's version is copied from its checked download, never read into memory.
                let source = try FileDescriptor.open(context.downloadPath(asset.sha256), flags: O_RDONLY | O_NOFOLLOW)
                remoteSide.copy = try createAside(job.path, device: remote.device, time: now) { try source.copyAll(to: $0) }
            case let .bytes(bytes):
                remoteSide.copy = try createAside(job.path, device: remote.device, time: now) { try $0.write(bytes) }
            }
        }
        let waiting = WaitingConflict(path: job.path.string, detectedAt: existing?.detectedAt ?? now, local: localSide, remote: remoteSide,
                                      remoteTag: remote.tag, remoteType: remote.type, remoteMode: remote.mode, sharedTag: existing?.sharedTag ?? 0)
        try store.saveConflict(waiting)
        if let old = existing?.remote.copy, old != remoteSide.copy { unlink(old) }
        let copies = [localSide.copy, remoteSide.copy].compactMap { $0 }.map(quoted).joined(separator: " and ")
        context.logger.warning("conflict on \(quoted(job.path.string)) with \(remote.device) left for sinkid resolve"
            + (copies.isEmpty ? "" : "; both versions kept aside as \(copies)"))
        return .recorded
    }

    /// What `keepWaiting` did.
    enum Waiting { case recorded, changed, same }

    /// Forgets a waiting conflict that settled itself (the local change went away, or both sides came
    /// to hold the same version); its record on the server goes too.
    func dropWaiting(_ path: String, why: String) throws {
        guard let waiting = try store.conflict(path) else { return }
        try forget(waiting)
        context.logger.info("conflict on \(quoted(path)) settled: \(why)")
    }

    /// Removes a waiting conflict and its copies; the record it shared is to be deleted on the server
    /// (every other device then stops listing it).
    func forget(_ waiting: WaitingConflict) throws {
        try store.transaction {
            try store.removeConflict(waiting.path)
            if waiting.sharedTag > 0, let shared = try store.sharedConflict(waiting.path), shared.tag == waiting.sharedTag {
                try store.settleSharedConflict(waiting.path)
            }
        }
        removeCopies(waiting)
    }

    func removeCopies(_ waiting: WaitingConflict) {
        for copy in [waiting.local.copy, waiting.remote.copy].compactMap({ $0 }) { unlink(copy) }
    }

    /// A kept-aside version's bytes, checked against the hash recorded with it.
    func readAside(_ side: ConflictVersion) throws -> [UInt8] {
        guard let copy = side.copy else { throw ResolveError("the version from \(side.device) was not kept aside") }
        let bytes = try FileDescriptor.open(copy, flags: O_RDONLY | O_NOFOLLOW).readAll(sizeHint: Int(clamping: side.size))
        guard ContentID.of(bytes) == side.sha256 else {
            throw ResolveError("\(quoted(copy)) no longer holds the version from \(side.device) (it was changed)")
        }
        return bytes
    }

    /// Copies the local file into the conflicts folder, hashing as it goes; nil (and no copy) when what
    /// was read is not the version `sha256` names. A large file not hashed yet (its hash is taken when
    /// it is chunked for upload) has an empty `sha256`: the copy's own hash names it then.
    private func copyLocalAside(_ path: RecordPath, at local: LocalPath, sha256: String, time: Int64) throws -> (copy: String, id: String)? {
        let source = try context.safeRoots[local.root.index].open(local.relative, flags: O_RDONLY | O_NOCTTY | O_NONBLOCK)
        var hasher = ContentHasher(expectedSize: try source.stat().size)
        let copy = try createAside(path, device: context.device, time: time) { target in try source.copyAll(to: target) { hasher.feed($0) } }
        let named = hasher.finish()
        guard named.complete, named.id == sha256 || sha256.isEmpty else {
            unlink(copy)
            return nil
        }
        return (copy, named.id)
    }

    /// Makes a new file for a version of `path` kept aside, under `STATE/conflicts/` and the path's
    /// folders, named like a conflict copy of `device`'s version; fills and fsyncs it before the
    /// conflict is recorded. Returns its absolute path.
    private func createAside(_ path: RecordPath, device: String, time: Int64, _ fill: (FileDescriptor) throws -> Void) throws -> String {
        guard let top = context.conflictsDirectory else { throw ResolveError("bug: the conflicts folder is not open") }
        var folder = top
        let components = PathText.components(path.string)
        for component in [""] + components.dropLast() {
            if !component.isEmpty { folder += "/" + component }
            if mkdir(folder, 0o700) != 0 && errno != EEXIST { throw SystemError("mkdir", errno: errno, path: folder) }
        }
        for attempt in 0..<100 {
            let name = folder + "/" + ConflictName.make(for: path.name, device: device, time: time, attempt: attempt)
            let file: FileDescriptor
            do {
                file = try FileDescriptor.open(name, flags: O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o600)
            } catch {
                if error.errno == EEXIST { continue }
                throw error
            }
            do {
                try fill(file)
                try file.sync()
            } catch {
                unlink(name)
                throw error
            }
            return name
        }
        throw ResolveError("no free name for a copy of \(quoted(path.string)) in \(folder)")
    }
}
