import Glibc
import SinkiMerge
import SinkiRecord
import SinkiSupport

/// A waiting conflict's record to save on the server, so that every device lists it: the version held
/// back here, from the copy kept aside (`content`: inline data for a small file; a large one is sent as
/// chunks by the agent first, and `record.asset` names them).
public struct ConflictShare: Sendable {
    public var path: String
    public var record: Record
    /// The copy of the local version in the state folder.
    public var copy: String
    /// Whether it travels as chunks (above the inline limit).
    public var large: Bool
}

/// A conflict as `sinkid conflicts` lists it on this device: found here (waiting, both versions kept
/// aside) or on another device (read from the server, resolvable from here by what the server holds).
public struct ListedConflict: Sendable, Equatable {
    public var path: String
    public var detectedAt: Int64
    /// This device's side: what it holds at the path.
    public var local: ConflictVersion
    /// The other side: the version it contends with.
    public var remote: ConflictVersion
    /// The device that found it.
    public var foundBy: String
    /// Its record is on the server: every device of the user lists it.
    public var shared: Bool
}

/// What a device that did not find a conflict needs to settle it through the server: the contended
/// version's record path and facts, and what this device holds at the path.
public struct SharedResolution: Sendable {
    public var path: String
    public var conflict: SharedConflictRow
    /// The path's Remote entry here: the version a save over it bases on.
    public var remoteTag: Int64
    /// Where `--keep both` puts the other device's version beside the path.
    public var copyPath: String
}

extension Replica {
    // MARK: Sharing what was found here

    /// The server is to hear: waiting conflicts not shared yet (their records to save), and records of
    /// conflicts settled here (their tombstones), at most `limit` of each.
    public func sharedConflictWork(limit: Int = 16) throws -> (share: [ConflictShare], settle: [Record]) {
        var share: [ConflictShare] = []
        for waiting in try store.conflicts() where waiting.sharedTag == 0 && share.count < limit {
            guard let copy = waiting.local.copy, !waiting.local.deleted else { continue }
            if let held = try store.sharedConflict(waiting.path), !held.settled {
                // Another device's record holds the path (or ours, whose answer was lost): see `conflictShared`.
                try conflictShared(waiting.path, sent: nil, result: ModifyResult(path: SharedConflict.recordPath(for: waiting.path), status: .conflict,
                                                                                 record: heldRecord(held)))
                continue
            }
            let row = try store.row(waiting.path)
            var record = Record(path: SharedConflict.recordPath(for: waiting.path), type: row?.local?.type ?? context.typeFor(waiting.path),
                                baseTag: try store.sharedConflict(waiting.path)?.tag ?? feed.conflictTombstones[PathKey(waiting.path)] ?? 0,
                                size: waiting.local.size, sha256: waiting.local.sha256,
                                mode: row?.local?.mode ?? 0o644, modifiedAt: waiting.local.modifiedAt, device: context.device)
            let large = waiting.local.size > context.inlineLimit
            if !large {
                // The copy is checked against the version it stands for before it goes.
                guard let bytes = try? FileDescriptor.open(copy, flags: O_RDONLY | O_NOFOLLOW).readAll(sizeHint: Int(waiting.local.size)),
                      ContentID.of(bytes) == waiting.local.sha256 else {
                    logger.warning("the copy of \(quoted(waiting.path)) kept aside no longer holds this machine's version; the conflict stays on this machine alone")
                    try store.setConflictShared(waiting.path, tag: WaitingConflict.notShared)
                    continue
                }
                record.data = Deflate.compressForSending(bytes)
            }
            share.append(ConflictShare(path: waiting.path, record: record, copy: copy, large: large))
        }
        var settle: [Record] = []
        for held in try store.sharedConflicts(includingSettled: true) where held.settled && settle.count < limit {
            settle.append(Record(path: SharedConflict.recordPath(for: held.path), type: held.type, deleted: true, baseTag: held.tag,
                                 device: context.device))
        }
        return (share, settle)
    }

    /// Conflict records the server is still to hear of: waiting conflicts not shared yet, and records of
    /// conflicts settled here (status counts them as work: other devices do not know yet).
    public func sharedConflictsToSend() throws -> Int {
        let unshared = try store.database.scalar("SELECT count(*) FROM conflicts WHERE shared_tag = 0 AND local_copy IS NOT NULL") ?? 0
        let settled = try store.database.scalar("SELECT count(*) FROM shared_conflicts WHERE settled = 1") ?? 0
        return Int(unshared + settled)
    }

    /// A conflict record as the server holds it, from what this agent read of it (for a refusal of a
    /// save that met it).
    private func heldRecord(_ held: SharedConflictRow) -> Record {
        Record(path: SharedConflict.recordPath(for: held.path), type: held.type, changeTag: held.tag, size: held.size, sha256: held.sha256,
               mode: held.mode, modifiedAt: held.modifiedAt, device: held.device)
    }

    /// The server's answer to saving the record of the conflict waiting at `path` (`sent`, nil when no
    /// request went): saved, it is shared; met by another device's record, or refused (a token narrowed
    /// to a prefix, say), the conflict stays on this device alone.
    public func conflictShared(_ path: String, sent: Record?, result: ModifyResult) throws {
        guard let waiting = try store.conflict(path), waiting.sharedTag == 0 else { return }
        switch result.status {
        case .saved:
            guard var record = result.record ?? sent else { return }
            if let sent {
                // The answer carries the tag; the facts are what went.
                record = Record(path: sent.path, type: sent.type, changeTag: record.changeTag, size: sent.size, sha256: sent.sha256,
                                mode: sent.mode, modifiedAt: sent.modifiedAt, device: sent.device)
            }
            try store.transaction {
                try store.observeSharedConflict(path, SharedConflictRow(record, seenAt: Clock.now()))
                try store.setConflictShared(path, tag: record.changeTag)
            }
            logger.info("conflict on \(quoted(path)) recorded on the server: every device of this user lists it, and sinkid resolve settles it from any")
        case .conflict:
            guard let record = result.record, !record.deleted else {
                // The path's record is a tombstone (a conflict settled before): the next try bases on it.
                try store.observeSharedConflict(path, nil)
                if let tombstone = result.record { feed.conflictTombstones[PathKey(path)] = tombstone.changeTag }
                return
            }
            if record.device == context.device && record.sha256 == waiting.local.sha256 {
                // This very record, saved before: an answer that was lost.
                try store.transaction {
                    try store.observeSharedConflict(path, SharedConflictRow(record, seenAt: Clock.now()))
                    try store.setConflictShared(path, tag: record.changeTag)
                }
                return
            }
            try store.transaction {
                try store.observeSharedConflict(path, SharedConflictRow(record, seenAt: Clock.now()))
                try store.setConflictShared(path, tag: WaitingConflict.notShared)
            }
            logger.warning("conflict on \(quoted(path)): \(record.device) recorded one there already; this one stays on this machine (sinkid resolve here)")
        case .refused:
            try store.setConflictShared(path, tag: WaitingConflict.notShared)
            logger.warning("conflict on \(quoted(path)) stays on this machine: the server did not take its record (\(result.problem.map { "\($0)" } ?? "refused"))")
        }
    }

    /// The server's answer to deleting the record of a conflict settled here.
    public func sharedConflictDeleted(_ path: String, result: ModifyResult) throws {
        switch result.status {
        case .saved:
            try store.observeSharedConflict(path, nil)
            if let tag = result.record?.changeTag { feed.conflictTombstones[PathKey(path)] = tag }
        case .conflict:
            // The record changed meanwhile (another device recorded a new conflict there): what the
            // server holds now is listed again.
            try store.observeSharedConflict(path, result.record.flatMap { SharedConflictRow($0, seenAt: Clock.now()) })
        case .refused:
            logger.warning("cannot delete the record of the conflict on \(quoted(path)) settled here: \(result.problem.map { "\($0)" } ?? "refused")")
            try store.observeSharedConflict(path, nil)
        }
    }

    // MARK: Listing

    /// Conflicts waiting for `sinkid resolve` on this device: those found here, then those other devices
    /// found in roots synced here, oldest first.
    public func conflictList() throws -> [ListedConflict] {
        let waiting = try store.conflicts()
        var out = waiting.map {
            ListedConflict(path: $0.path, detectedAt: $0.detectedAt, local: $0.local, remote: $0.remote, foundBy: context.device, shared: $0.sharedTag > 0)
        }
        let here = Set(waiting.map { PathKey($0.path) })
        for held in try store.sharedConflicts() where !here.contains(PathKey(held.path)) && held.device != context.device {
            guard let checked = try? RecordPath(validating: held.path), context.locate(checked) != nil else { continue }
            let local = try store.row(held.path)?.local
            let mine = ConflictVersion(device: context.device, deleted: local == nil, size: local?.size ?? 0, sha256: local?.hash ?? "",
                                       modifiedAt: local?.mtime ?? 0, copy: nil)
            out.append(ListedConflict(path: held.path, detectedAt: held.seenAt, local: mine, remote: held.version, foundBy: held.device, shared: true))
        }
        return out.sorted { ($0.detectedAt, $0.path) < ($1.detectedAt, $1.path) }
    }

    // MARK: Settled on another device

    /// Waiting conflicts whose record another device deleted (`sinkid resolve` there): settled. The
    /// version that device kept is what the server holds at the path: if it is this machine's, the
    /// trees agree by themselves; else the path takes the server's version (this machine's, still the
    /// one held back, was dropped there, or kept as a copy that comes down like any new file). A local
    /// file changed since is a new change, and meets the rule again.
    func settleFromElsewhere() throws -> [AppliedChange] {
        var applied: [AppliedChange] = []
        for waiting in try store.conflicts() where waiting.sharedTag > 0 {
            if let held = try store.sharedConflict(waiting.path), held.tag == waiting.sharedTag { continue }
            guard let recordPath = try? RecordPath(validating: waiting.path), let local = context.locate(recordPath) else { continue }
            let now = try observer.refresh(local)
            let remote = try store.row(waiting.path)?.remote
            if now.local?.kind == .file, now.local?.hash == waiting.local.sha256, remote?.hash != waiting.local.sha256 {
                // This machine's version is still the one held back, and the server kept the other.
                if let result = try resolveWaiting(waiting.path, keep: .remote, by: "settled on another device") { applied += result.applied }
            } else {
                try MergeDesk(context: context).forget(waiting)
                logger.info("conflict on \(quoted(waiting.path)) settled on another device")
            }
        }
        return applied
    }

    // MARK: Settling one found elsewhere

    /// What `sinkid resolve` here needs to settle the conflict another device found at `path`; nil when
    /// the server holds none there (that this agent read).
    public func sharedResolution(_ path: String) throws -> SharedResolution? {
        guard let held = try store.sharedConflict(path), !held.settled, held.device != context.device else { return nil }
        let checked = try RecordPath(validating: path)
        let name = ConflictName.make(for: checked.name, device: held.device, time: Clock.now(), attempt: 0)
        return SharedResolution(path: path, conflict: held, remoteTag: try store.row(path)?.remote?.tag ?? 0,
                                copyPath: PathText.folder(of: path) + "/" + name)
    }

    /// Marks the record of the conflict at `path` settled here: its tombstone goes to the server.
    public func settleShared(_ path: String) throws {
        try store.settleSharedConflict(path)
    }

    /// A waiting conflict settled here: its record, if it shared one, is deleted on the server.
    func settleShared(_ waiting: WaitingConflict) throws {
        guard waiting.sharedTag > 0, let held = try store.sharedConflict(waiting.path), held.tag == waiting.sharedTag else { return }
        try store.settleSharedConflict(waiting.path)
    }
}
