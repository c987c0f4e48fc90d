import CSystemShim
import Glibc
import SinkiConfig
import SinkiMerge
import SinkiRecord
import SinkiSupport

/// A conflict ready for the merge engine: the two versions as the engine sees them, the path's
/// policy, and the last shared version when the rule merges against it.
public struct PreparedConflict: Sendable {
    public var path: RecordPath
    /// The files row when it was prepared: carrying out checks that the path still is what it says.
    public var row: KnownFile
    public var remote: Record
    public var policy: MergePolicy
    public var local: MergeVersion
    public var remoteVersion: MergeVersion
    public var base: [UInt8]?
    /// A conflict already waits at the path for `sinkid resolve`: the new remote version joins it
    /// instead of being decided by a rule.
    public var waiting: Bool
}

/// What preparing conflicts found besides the ones ready for the engine.
public struct ConflictPreparation: Sendable {
    public var ready: [PreparedConflict] = []
    /// What was settled without a rule (same content on both sides, this machine's own save, a
    /// local change that went away), and remote records whose content must be fetched first.
    public var report = ApplyReport()
    /// Conflicts whose local file changed while it was read: prepare them again.
    public var again: [Conflict] = []
}

/// What carrying out the engine's outcomes did.
public struct ConflictSettlement: Sendable {
    public var report = ApplyReport()
    /// Conflicts whose local side changed since they were prepared: nothing was done for them.
    public var again: [Conflict] = []
}

/// Which side `sinkid resolve --keep` keeps.
public enum KeepChoice: String, Sendable {
    case local, remote, both
}

extension Replica {
    /// Inputs of `union`, `json`, `compare` and `command` up to this size are read into memory;
    /// larger ones are handed to the engine by path (and `union` and `json` then fall back).
    static let mergeInMemoryLimit: Int64 = 64 << 20

    /// Looks at each conflict again with what is on disk now, settles those that need no rule, and
    /// gathers for the others what the engine needs: both versions, the policy, the base.
    public func prepareConflicts(_ conflicts: [Conflict]) throws -> ConflictPreparation {
        var out = ConflictPreparation()
        var noLongerLocal: [Record] = []
        for conflict in conflicts {
            let remote = conflict.remote
            guard let path = try? RecordPath(validating: remote.path), let here = locate(path) else { continue }
            let (root, relative) = (here.root.index, here.relative)
            guard var row = try currentRow(root: root, relative: relative, path: remote.path) else {
                noLongerLocal.append(remote)
                continue
            }
            // A large file is named when its upload reads it; a conflict needs its name now (two
            // devices that made the same file are no conflict).
            if row.present, row.kind == .file, row.sha256.isEmpty, let named = try identify(row, root: root, relative: relative) { row = named }
            if row.holds(remote) { continue }
            guard try hasLocalChange(at: remote.path, for: remote, disk: entry(root: root, relative: relative)) else {
                // The local change went away (undone, or it was only a moment's): no conflict left.
                noLongerLocal.append(remote)
                continue
            }
            if sameContent(row, remote) {
                var agreed = row
                agreed.agree(with: remote)
                try store.transaction {
                    try store.saveFile(agreed)
                    // A version queued to go again still goes (see the adopt in `record(_:result:report:)`).
                    try store.dequeue(agreed.path, unlessResend: agreed.present)
                }
                try dropWaiting(remote.path, why: "both sides now hold the same version")
                keepBase(remote, at: here)
                continue
            }
            if try isOwnUnacknowledgedPush(remote) {
                var agreed = row
                agreed.agree(with: remote)
                try store.saveFile(agreed)
                continue
            }
            if !remote.deleted && remote.kind != .directory && !hasContent(remote) {
                out.report.needContent.append(remote)
                continue
            }
            let waiting = try store.conflict(remote.path) != nil
            // Rules compare and merge file contents; a directory or symlink on either side is kept both ways.
            let bothFiles = (!row.present || row.kind == .file) && (remote.deleted || remote.kind == .file)
            let policy = bothFiles ? rules.policy(for: path) : MergePolicy()
            let readsContent = !waiting && [.union, .json, .compare, .command].contains(policy.rule)
            let local: MergeVersion
            if !row.present {
                local = .deletion(modifiedAt: row.mtime, device: device)
            } else {
                var content = MergeVersion.Content.none
                if readsContent {
                    if row.size <= Self.mergeInMemoryLimit {
                        guard let read = try? ContentReader.read(safeRoots[root], relative, keepBytes: true), !read.unstable,
                              read.sha256 == row.sha256, let bytes = read.bytes else {
                            out.again.append(conflict)
                            continue
                        }
                        content = .bytes(bytes)
                    } else {
                        content = .file(roots[root].path + "/" + relative)
                    }
                }
                local = MergeVersion(content: content, size: row.size, modifiedAt: row.mtime, device: device, sha256: row.sha256)
            }
            let remoteVersion: MergeVersion
            if remote.deleted {
                remoteVersion = .deletion(modifiedAt: remote.modifiedAt, device: remote.device)
            } else {
                var content = MergeVersion.Content.none
                if readsContent, Self.isAssetContent(remote) {
                    // A large file's version was downloaded and checked before its conflict came here.
                    content = .file(downloadPath(of: remote))
                } else if readsContent {
                    do { content = .bytes(try Self.content(of: remote)) } catch {
                        try keepNotApplied(remote, ApplyFailure.from(error), report: &out.report)
                        continue
                    }
                }
                remoteVersion = MergeVersion(content: content, size: remote.size, modifiedAt: remote.modifiedAt, device: remote.device,
                                             sha256: remote.sha256)
            }
            var base: [UInt8]?
            if readsContent, policy.rule.needsBase, let synced = row.syncedSHA256, !row.syncedDeleted {
                base = bases?.get(synced)
            }
            out.ready.append(PreparedConflict(path: path, row: row, remote: remote, policy: policy, local: local,
                                              remoteVersion: remoteVersion, base: base, waiting: waiting))
        }
        if !noLongerLocal.isEmpty {
            let applied = try apply(noLongerLocal, token: nil)
            for record in noLongerLocal where !applied.notApplied.contains(record.path) {
                try dropWaiting(record.path, why: "the local change went away; the version from \(record.device) is taken")
            }
            out.report.applied += applied.applied
            out.report.notApplied += applied.notApplied
            out.report.needContent += applied.needContent
            out.report.conflicts += applied.conflicts
            out.report.toCheck += applied.toCheck
        }
        return out
    }

    /// Carries out the engine's outcomes, each only if the local side is still the version it was
    /// decided on (else it is recorded as the new local change and the conflict comes back in
    /// `again`). Remote versions replace local files with the same checks as any apply; versions
    /// kept aside are renamed or written under their conflict names and synced as new files;
    /// merged bytes and kept local versions are queued to go to the server based on the remote one.
    public func carryOut(_ decided: [(PreparedConflict, MergeOutcome)]) async throws -> ConflictSettlement {
        var out = ConflictSettlement()
        var plans: [PlannedWrite] = []
        var written = Set<Int>()
        // Rows recorded once what they describe is durable: after the writes and one syncfs per root.
        var rows: [KnownFile] = []
        var agreed: [(record: Record, path: LocalPath)] = []
        for (item, outcome) in decided {
            let remote = item.remote
            guard let local = locate(item.path) else { continue }
            let (root, relative) = (local.root.index, local.relative)
            guard let stat = try unchanged(item, root: root, relative: relative) else {
                out.again.append(Conflict(local: item.row, remote: remote))
                continue
            }
            let localPath = roots[root].path + "/" + relative
            let event = outcome.event(remoteDeleted: remote.deleted).flatMap { AppliedChange.Event(rawValue: $0.rawValue) }
            switch outcome.resolution {
            case let .takeRemote(keepLocalCopy):
                var row = item.row
                var expect = stat.value
                if keepLocalCopy && row.present && !(row.kind == .directory && remote.kind == .directory) {
                    guard let copy = try await keepAside(root: root, relative: relative, row: row) else {
                        try keepNotApplied(remote, ApplyFailure(.io, "this machine's version could not be kept aside (the log says why)"),
                                           report: &out.report)
                        continue
                    }
                    logger.warning("conflict on \(quoted(remote.path)): kept this machine's version as \(quoted(copy))")
                    row.present = false
                    expect = nil
                }
                let action: PlannedWrite.Action
                if remote.deleted {
                    action = row.present ? .delete : .adopt
                } else if row.present && row.kind == .directory && remote.kind == .directory {
                    action = .adopt
                } else {
                    action = remote.kind == .directory ? .mkdir : remote.kind == .symlink ? .symlink : .write
                }
                // This agent's delete lost to a version it now takes. If the delete was the old path of
                // a rename made here, devices that followed the rename moved that version away with
                // it and will never hear of the path again: it goes once more, as a new version.
                let lostDelete = !item.row.present && !remote.deleted
                plans.append(PlannedWrite(action: action, record: remote, path: local, expect: expect, row: row, event: event,
                                          resend: lostDelete))
            case let .keepLocal(keepRemoteCopy):
                if keepRemoteCopy && !remote.deleted && remote.kind == .file {
                    guard let copy = writeRemoteAside(remote, root: root, relative: relative) else {
                        try keepNotApplied(remote, ApplyFailure(.io, "the version from \(remote.device) could not be kept aside (the log says why)"),
                                           report: &out.report)
                        continue
                    }
                    written.insert(root)
                    rows.append(copy)
                    logger.warning("conflict on \(quoted(remote.path)): kept the version from \(remote.device) as \(quoted(copy.path))")
                }
                var row = item.row
                basedOn(remote, &row, path: item.path)
                rows.append(row)
                agreed.append((remote, local))
                if let event {
                    out.report.applied.append(AppliedChange(path: remote.path, event: event, localPath: localPath, type: remote.type))
                }
            case let .merged(bytes):
                let mergedStat: FileStat
                do {
                    mergedStat = try writeLocal(root: root, relative: relative, bytes: bytes, mode: item.row.mode, modifiedAt: Clock.now(),
                                              expect: stat.value)
                } catch {
                    logger.warning("cannot write the merge of \(quoted(localPath)) (\(error)); looking at it again")
                    out.again.append(Conflict(local: item.row, remote: remote))
                    continue
                }
                written.insert(root)
                var row = item.row
                row.observe(mergedStat)
                row.sha256 = ContentID.of(bytes)
                basedOn(remote, &row, path: item.path)
                rows.append(row)
                agreed.append((remote, local))
                out.report.applied.append(AppliedChange(path: remote.path, event: .merged, localPath: localPath, type: row.type))
            case .ask:
                let kept: Bool
                do { kept = try keepWaiting(item, root: root, relative: relative) } catch {
                    try keepNotApplied(remote, ApplyFailure(.io, "cannot keep the versions aside for sinkid resolve: \(error)"), report: &out.report)
                    continue
                }
                guard kept else {
                    out.again.append(Conflict(local: item.row, remote: remote))
                    continue
                }
                out.report.applied.append(AppliedChange(path: remote.path, event: .conflict, localPath: localPath, type: remote.type))
            }
        }
        for root in written {
            do { try safeRoots[root].syncFileSystem() } catch { logger.warning("\(error)") }
        }
        // Each of these is a local version to send (kept, merged, or a copy kept aside).
        try store.transaction {
            for row in rows {
                try store.saveFile(row)
                try store.enqueue(row.path)
            }
        }
        for (record, path) in agreed { keepBase(record, at: path) }
        if !plans.isEmpty { try writeRecorded(plans, report: &out.report) }
        return out
    }

    /// The local version stays and goes to the server as a new version based on `remote`.
    func basedOn(_ remote: Record, _ row: inout KnownFile, path: RecordPath) {
        let keptType = row.type
        row.agree(with: remote)
        row.movedFrom = nil
        if row.present { row.type = row.kind == .file ? typeFor(path.string) : keptType }
    }

    /// What is at `relative` now; nil when nothing is (or only something never synced: a fifo, a
    /// socket, a device), or when it cannot be looked at.
    func entry(root: Int, relative: String) -> FileStat? {
        guard let stat = (try? safeRoots[root].stat(relative)) ?? nil, stat.kind != .special else { return nil }
        return stat
    }

    /// Whether a files row (nil: none) still describes what is on disk.
    func agrees(_ row: KnownFile?, _ stat: FileStat?) -> Bool {
        guard let row, row.present else { return stat == nil }
        return stat.map { row.matches($0) } ?? false
    }

    /// The row of `path`, with any change on disk the watcher has not reported yet taken in first,
    /// so that it counts as the local edit it is.
    func currentRow(root: Int, relative: String, path: String) throws -> KnownFile? {
        let row = try store.file(path)
        let stat = entry(root: root, relative: relative)
        if agrees(row, stat) { return row }
        _ = try absorb([Observation(root: root, relative: relative, path: path, stat: stat, known: row)])
        return try store.file(path)
    }

    /// What is on disk at the path (`value` nil: nothing) when it still is the version the conflict
    /// was decided on; nil when it changed, and then the change is recorded as the local edit.
    private func unchanged(_ item: PreparedConflict, root: Int, relative: String) throws -> OnDisk? {
        let stat = entry(root: root, relative: relative)
        let row = try store.file(item.path.string)
        if row == item.row && agrees(row, stat) { return OnDisk(value: stat) }
        if !agrees(row, stat) {
            _ = try absorb([Observation(root: root, relative: relative, path: item.path.string, stat: stat, known: row)])
        }
        return nil
    }

    /// A stat that may be nothing, as a value of its own.
    private struct OnDisk {
        var value: FileStat?
    }

    /// Writes `bytes` at `relative` over `expect` (checked again right before the rename; nil: the
    /// name must be free), telling the watcher to expect it. Not durable until the root's `syncfs`.
    func writeLocal(root: Int, relative: String, bytes: [UInt8], mode: UInt32, modifiedAt: Int64,
                            expect: FileStat?) throws -> FileStat {
        let directory = SafeRoot.folderPrefix(of: relative)
        let echoes = self.echoes
        return try placing(root: root, relative: relative) { parent, name, expectIt in
            try DiskWriter.writeFile(parent: parent.raw, parentPath: parent.path, name: name, bytes: bytes, mode: mode,
                                     modifiedAt: modifiedAt, expect: expect) { inode in
                expectIt()
                if let inode { echoes?.expect(root: root, relative: directory + "#\(inode)", .anonymous) }
            }
        }
    }

    /// Copies the checked download of `remote` to `relative`, which must be free (the download stays
    /// for the apply that may still need it). Not durable until the root's `syncfs`.
    func placeDownload(_ remote: Record, root: Int, relative: String) throws -> FileStat {
        try placing(root: root, relative: relative) { parent, name, expectIt in
            try DiskWriter.placeFile(sourceDirectory: downloadsDirectory, sourceName: remote.sha256, move: false, parent: parent.raw,
                                     parentPath: parent.path, name: name, mode: remote.mode, modifiedAt: remote.modifiedAt,
                                     expect: nil, willAppear: expectIt)
        }
    }

    /// Runs `write` with the parent folder of `relative` and the entry's name; `write` calls its
    /// third argument right before the file appears, so the watcher takes it as ours, and a write
    /// that fails takes that back.
    private func placing(root: Int, relative: String,
                         _ write: (_ parent: FileDescriptor, _ name: String, _ expectIt: () -> Void) throws -> FileStat) throws -> FileStat {
        var made: [String] = []
        let parent = try safeRoots[root].openParent(of: relative, create: false, made: &made)
        let name = SafeRoot.name(of: relative)
        let echoes = self.echoes
        do {
            return try write(parent, name) { echoes?.expect(root: root, relative: relative, .fileIn) }
        } catch {
            echoes?.cancel(root: root, relative: relative, .fileIn)
            throw error
        }
    }

    /// Writes the remote version beside the path under a free conflict name (its writer's device);
    /// returns the row that records it as a new local file (saved by the caller once it is durable).
    private func writeRemoteAside(_ remote: Record, root: Int, relative: String) -> KnownFile? {
        // A large file's version is copied from its checked download, never read into memory.
        let downloaded = Self.isAssetContent(remote)
        var bytes: [UInt8] = []
        if !downloaded {
            do { bytes = try Self.content(of: remote) } catch {
                logger.error("refusing remote record \(quoted(remote.path)): \(error)")
                return nil
            }
        }
        let name = SafeRoot.name(of: relative)
        let directory = SafeRoot.folderPrefix(of: relative)
        let now = Clock.now()
        for attempt in 0..<100 {
            let copyRelative = directory + ConflictName.make(for: name, device: remote.device, time: now, attempt: attempt)
            let stat: FileStat
            do {
                stat = downloaded
                    ? try placeDownload(remote, root: root, relative: copyRelative)
                    : try writeLocal(root: root, relative: copyRelative, bytes: bytes, mode: remote.mode, modifiedAt: remote.modifiedAt,
                                     expect: nil)
            } catch let error as SystemError where error.errno == EEXIST {
                continue
            } catch {
                logger.error("cannot keep the version from \(remote.device) of \(quoted(remote.path)) aside: \(error)")
                return nil
            }
            let copyPath = recordPath(root: root, relative: copyRelative)
            var copy = KnownFile(path: copyPath, kind: .file, present: true, sha256: remote.sha256, type: typeFor(copyPath))
            copy.observe(stat)
            return copy
        }
        return nil
    }

    /// Renames the local entry at `relative` to a free conflict-copy name and records the copy as
    /// a new local file (its hash is known: it is read again only if it changed on the way). Returns
    /// the copy's path.
    func keepAside(root: Int, relative: String, row: KnownFile) async throws -> String? {
        var made: [String] = []
        let parent = try safeRoots[root].openParent(of: relative, create: false, made: &made)
        let name = SafeRoot.name(of: relative)
        let directory = SafeRoot.folderPrefix(of: relative)
        let now = Clock.now()
        for attempt in 0..<100 {
            let copyName = ConflictName.make(for: name, device: device, time: now, attempt: attempt)
            // Our own rename: the watcher must not see it as the user moving the file away.
            echoes?.expect(root: root, relative: relative, .movedAway)
            echoes?.expect(root: root, relative: directory + copyName, row.kind == .directory ? .directoryMade : .fileIn)
            if sinki_rename_noreplace(parent.raw, name, parent.raw, copyName) == 0 {
                let copyRelative = directory + copyName
                let copyPath = recordPath(root: root, relative: copyRelative)
                if row.kind == .directory {
                    // A directory's contents moved with it: walk the copy as new.
                    _ = try await reconcile(root: root, under: copyRelative)
                    _ = try await check(root: root, paths: [relative])
                } else if let stat = try safeRoots[root].stat(copyRelative) {
                    var copy = KnownFile(path: copyPath, kind: row.kind, present: true, sha256: row.sha256,
                                         type: row.kind == .file ? typeFor(copyPath) : row.type)
                    if stat.size == row.size && stat.mtime == row.mtime && stat.inode == row.inode {
                        copy.observe(stat)
                        try store.transaction {
                            try store.saveFile(copy)
                            try store.enqueue(copyPath)
                        }
                    } else {
                        // Written to between the check and the rename: hash what was kept.
                        _ = try absorb([Observation(root: root, relative: copyRelative, path: copyPath, stat: stat, known: nil)])
                    }
                }
                return copyPath
            }
            let code = errno
            echoes?.cancel(root: root, relative: relative, .movedAway)
            echoes?.cancel(root: root, relative: directory + copyName, row.kind == .directory ? .directoryMade : .fileIn)
            if code == EEXIST { continue }
            logger.error("cannot keep \(quoted(parent.path + "/" + name)) aside: \(SystemError("rename", errno: code).message)")
            return nil
        }
        return nil
    }
}

extension Replica {
    /// Reads a file not yet named (a large one waiting for its upload) and records its content
    /// identity, if it is still the file the row describes; nil when it changed or cannot be read.
    func identify(_ row: KnownFile, root: Int, relative: String) throws -> KnownFile? {
        guard let content = try? ContentReader.read(safeRoots[root], relative, keepBytes: false), !content.unstable, !content.busy,
              row.matches(content.stat) else { return nil }
        var named = row
        named.sha256 = content.sha256
        try store.transaction {
            if let chunks = content.chunks {
                try store.saveManifest(content.sha256, chunks: chunks.map { ChunkRef(sha256: Hex.encode($0.sha256), size: Int64($0.length)) })
            }
            try store.saveFile(named)
        }
        return named
    }
}
