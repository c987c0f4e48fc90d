import SinkiPlan
import SinkiRecord

/// Where an injected failure strikes an operation.
enum Fault {
    case none
    /// Before any I/O: nothing happens.
    case before
    /// After the I/O, before its outcome is recorded (a kill between the write and the transaction).
    case afterIO
}

/// How an operation ended.
enum Outcome: Equatable {
    case done
    /// The disk or the server was not as planned, or a fault struck: the trees are as they were.
    case failed(String)
}

/// The test's executor: carries one operation out against the simulated disk and server and, when it
/// completes, records its outcome in the three trees in one step, as the agent's transaction will.
extension World {
    func execute(_ operation: Operation, fault: Fault) -> Outcome {
        let outcome = carryOut(operation, fault: fault)
        if outcome == .done, let kind = OperationKind(operation) { completed[kind.rawValue] += 1 }
        return outcome
    }

    private func carryOut(_ operation: Operation, fault: Fault) -> Outcome {
        if case .before = fault { return .failed("fault before I/O") }
        let recording = fault == .none
        switch operation {
        case .nothing, .wait:
            return .done

        case let .advanceSynced(path, to: remote):
            if recording { synced[id(path)] = SyncedEntry(remote) }
            return recording ? .done : .failed("fault")

        case let .upload(upload):
            return push(upload, dropping: false, recording: recording)

        case let .makeRemoteFolder(path, base):
            return push(Upload(path: path, node: .folder, base: base), dropping: false, recording: recording)

        case let .sendDelete(path, base):
            let target = id(path)
            guard disk[target] == nil else { return .failed("changed here: the path is back") }
            return record(save(target, node: nil, base: base, modifiedAt: tick()), at: target, recording: recording)

        case let .download(download):
            return pull(download, dropping: false, recording: recording)

        case let .makeLocalFolder(path, agree):
            let target = id(path)
            guard disk[target] == nil || disk[target]?.node == .folder else { return .failed("changed here") }
            guard diskParentIsFolder(target) else { return .failed("folder gone") }
            disk[target] = DiskItem(node: .folder, modifiedAt: tick())
            guard recording else { return .failed("fault after I/O") }
            local[target] = LocalEntry(.folder, modifiedAt: disk[target]!.modifiedAt)
            if let agree { synced[target] = SyncedEntry(agree) }
            return .done

        case let .deleteLocal(path, expecting, agree):
            let target = id(path)
            guard disk[target]?.node == expecting else { return .failed("changed here") }
            if expecting == .folder, paths.indices.contains(where: { disk[$0] != nil && isBelow($0, target) }) {
                return .failed("folder not empty")
            }
            disk[target] = nil
            guard recording else { return .failed("fault after I/O") }
            local[target] = nil
            if let agree { synced[target] = SyncedEntry(agree) }
            return .done

        case let .renameLocal(from, to, remote):
            let source = id(from), target = id(to)
            guard let item = disk[source], item.node == remote.node else { return .failed("source changed") }
            guard disk[target] == nil else { return .failed("changed here") }
            guard diskParentIsFolder(target) else { return .failed("folder gone") }
            disk[source] = nil
            disk[target] = item
            guard recording else { return unrecordedWrite(item.node, at: target) }
            local[source] = nil
            local[target] = LocalEntry(item.node, modifiedAt: item.modifiedAt)
            synced[target] = SyncedEntry(remote)
            return .done

        case let .conflict(.keepLocalAside(path, expecting)):
            let target = id(path)
            guard let item = disk[target], item.node == expecting else { return .failed("changed here") }
            let copy = freeCopy(of: target, modifiedAt: item.modifiedAt)
            let pairs = moveOnDisk(target, to: copy)
            for (old, new) in pairs { owed.move(from: old, to: new) }
            guard recording else { return .failed("fault after I/O") }
            // What Local had observed moves with the disk; what it had not is found by the next look.
            let moved = pairs.map { local[$0.0] }
            for (old, _) in pairs { local[old] = nil }
            for ((_, new), entry) in zip(pairs, moved) { local[new] = entry }
            return .done

        case let .conflict(.keepRemoteAside(path, remote, expecting)):
            let target = id(path)
            guard disk[target]?.node == expecting else { return .failed("changed here") }
            guard let node = remote.node, !node.isFolder else { return .failed("bug: a folder kept aside from the server") }
            guard diskParentIsFolder(target) else { return .failed("folder gone") }
            let copy = freeCopy(of: target, modifiedAt: remote.modifiedAt)
            disk[copy] = DiskItem(node: node, modifiedAt: remote.modifiedAt)
            owed.move(from: target, to: copy)
            guard recording else { return unrecordedWrite(node, at: copy) }
            local[copy] = LocalEntry(node, modifiedAt: remote.modifiedAt)
            synced[target] = SyncedEntry(remote)
            return .done

        case let .conflict(.overwriteLocal(download)):
            return pull(download, dropping: true, recording: recording)

        case let .conflict(.overwriteRemote(upload)):
            return push(upload, dropping: true, recording: recording)

        case let .conflict(.resolve(path, remote, expecting)):
            // The merge engine's answer, as the agent maps it: one side takes the path and the other is
            // kept as a copy (the rules that merge make a new local version over the remote one, which
            // keeps both as well). Which side, the content decides, so each seed picks alike.
            guard let remoteNode = remote.node else { return .failed("bug: a tombstone handed to the engine") }
            let localFirst = (World.content(of: expecting)?.hex ?? "") < (World.content(of: remoteNode)?.hex ?? "")
            return carryOut(localFirst ? .conflict(.keepLocalAside(path, expecting: expecting))
                                       : .conflict(.keepRemoteAside(path, remote: remote, expecting: expecting)), fault: fault)
        }
    }

    /// A write to disk done and not recorded: the agent takes the file it does not know it wrote for
    /// a local edit. If the version is replaced at the server in two saves (a delete, then a create;
    /// the feed shows only the second) before or after this stale write, it may come back.
    private func unrecordedWrite(_ node: Node, at place: Int) -> Outcome {
        owed.allow(World.content(of: node), at: place)
        owed.unacknowledged(World.content(of: node), at: place, tag: .none)
        return .failed("fault after I/O")
    }

    /// Whether the path's rule lets a conflict's loser go: only then is a dropped version not owed,
    /// so a planner that drops one under any other rule is caught as losing it.
    private func ruleDropsLosers(_ target: Int) -> Bool {
        switch rule(of: target) {
        case .keepBoth, .engine: return false
        case let .newest(keep), let .local(keep), let .remote(keep): return !keep
        }
    }

    /// The first conflict-copy name free everywhere, in the path's own folder (the agent names it with
    /// `SinkiMerge.ConflictName`; any free name beside the path will do here).
    private func freeCopy(of target: Int, modifiedAt: Int64) -> Int {
        let path = paths[target]
        let folder = path.parent?.string ?? path.root
        var attempt = 0
        while true {
            let name = "\(path.name).sync-conflict-\(modifiedAt / 1_000_000_000)-here" + (attempt > 0 ? "-\(attempt)" : "")
            let candidate = id(try! RecordPath(validating: folder + "/" + name))
            if isFree(candidate) { return candidate }
            attempt += 1
        }
    }

    /// Reads the file as it is now (it must still be what Local says) and saves it at the server.
    /// `dropping`: the rule drops the server's version this replaces.
    private func push(_ upload: Upload, dropping: Bool, recording: Bool) -> Outcome {
        let target = id(upload.path)
        guard disk[target]?.node == upload.node else { return .failed("changed here") }
        let replaced = server[target]?.node
        sent[target].append(upload.node)
        let answer = save(target, node: upload.node, base: upload.base, modifiedAt: disk[target]!.modifiedAt, movedFrom: upload.movedFrom)
        if dropping, ruleDropsLosers(target), case .saved = answer { owed.release(World.content(of: replaced), at: target) }
        return record(answer, at: target, recording: recording)
    }

    private func record(_ answer: SaveAnswer, at target: Int, recording: Bool) -> Outcome {
        switch answer {
        case let .saved(stored):
            // `sent` lets the agent know its own save when Remote next shows it; replaced again
            // before that (the feed keeps only the latest version), it cannot, and sends it again.
            guard recording else {
                owed.unacknowledged(World.content(of: stored.node), at: target, tag: ChangeTag(stored.tag))
                return .failed("fault after I/O")
            }
            remote[target] = stored.remoteEntry
            synced[target] = SyncedEntry(stored.remoteEntry)
            // The newest send is answered: older ones have older tags, and Remote only moves forward.
            sent[target] = []
            return .done
        case let .conflict(current):
            // The answer carries the server's record: Remote learns it, as from the feed.
            if recording {
                // Our own save may be what answers (its first answer was lost): ingest knows it by `sent`.
                ingest(current, at: target)
                sent[target] = []
            }
            return .failed("conflict at the server")
        case .refused:
            if recording { sent[target] = [] }
            return .failed("move refused")
        }
    }

    /// Writes a remote version if the disk still holds what was planned and its folder is there.
    /// `dropping`: the rule drops the local version this replaces.
    private func pull(_ download: Download, dropping: Bool, recording: Bool) -> Outcome {
        let target = id(download.path)
        guard disk[target]?.node == download.expecting else { return .failed("changed here") }
        guard diskParentIsFolder(target) else { return .failed("folder gone") }
        guard let node = download.remote.node, !node.isFolder else { return .failed("bug: not a file") }
        if dropping, ruleDropsLosers(target) { owed.release(World.content(of: disk[target]?.node), at: target) }
        disk[target] = DiskItem(node: node, modifiedAt: download.remote.modifiedAt)
        guard recording else { return unrecordedWrite(node, at: target) }
        local[target] = LocalEntry(node, modifiedAt: download.remote.modifiedAt)
        synced[target] = SyncedEntry(download.remote)
        return .done
    }
}
