import CSystemShim
import Glibc
import SinkiMerge
import SinkiRecord
import SinkiSupport

extension Replica {
    /// Settles conflicts by the default rule, keep-both: the remote version takes the path and the
    /// local one stays beside it as a conflict copy, which syncs too. A local edit against a remote
    /// delete keeps the edit; a local delete against a remote edit takes the edit. Nothing written
    /// on either side is lost.
    public func resolveKeepingBoth(_ conflicts: [Conflict]) async throws -> ApplyReport {
        var report = ApplyReport()
        var plans: [PlannedWrite] = []
        for conflict in conflicts {
            let remote = conflict.remote
            guard let path = try? RecordPath(validating: remote.path), let (root, relative) = locate(path),
                  var local = try store.file(remote.path) else { continue }
            if local.tag >= remote.changeTag && remote.changeTag > 0 { continue }
            if sameContent(local, remote) {
                plans.append(PlannedWrite(action: .adopt, record: remote, root: root, relative: relative, expect: nil, row: local))
                continue
            }
            if try isOwnUnacknowledgedPush(remote) {
                local.agree(with: remote)
                try store.saveFile(local)
                continue
            }
            if remote.deleted {
                // The edit made here wins over the delete: push it again, based on the tombstone.
                local.tag = remote.changeTag
                local.syncedDeleted = true
                local.syncedSHA256 = nil
                try store.saveFile(local)
                try store.enqueue(local.path)
                logger.info("kept \(quoted(roots[root].path + "/" + relative)), edited here, over its delete on \(remote.device)")
                continue
            }
            if remote.kind != .directory && !hasContent(remote) {
                report.needContent.append(remote)
                continue
            }
            var event = AppliedChange.Event.changed
            if local.present && !(local.kind == .directory && remote.kind == .directory) {
                // Move the local version aside under its conflict name, then take the remote one.
                guard let copy = try await keepAside(root: root, relative: relative, row: local) else {
                    report.refused.append(remote.path)
                    continue
                }
                logger.warning("conflict on \(quoted(remote.path)): kept this machine's version as \(quoted(copy))")
                event = .conflict
            }
            local.present = false
            plans.append(PlannedWrite(action: remote.kind == .directory ? .mkdir : remote.kind == .symlink ? .symlink : .write,
                                      record: remote, root: root, relative: relative, expect: nil, row: local, event: event))
        }
        let journaled = plans.filter { $0.action != .adopt }.map(\.record)
        try journal(journaled)
        let results = try execute(plans, report: &report)
        try store.transaction {
            for (plan, result) in zip(plans, results) { try record(plan, result: result, report: &report) }
            try store.clearJournal(journaled.map(\.path))
        }
        return report
    }

    /// Renames the local entry at `relative` to a free conflict-copy name and records the copy as
    /// a new local file (its hash is already known: nothing is read again). Returns the copy's path.
    private func keepAside(root: Int, relative: String, row: KnownFile) async throws -> String? {
        var made: [String] = []
        let parent = try safeRoots[root].openParent(of: relative, create: false, made: &made)
        let name = relative.split(separator: "/").last.map(String.init) ?? relative
        let directory = relative.lastIndex(of: "/").map { String(relative[..<$0]) + "/" } ?? ""
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
                    var copy = KnownFile(path: copyPath, kind: row.kind, present: true, sha256: row.sha256, type: row.type)
                    copy.observe(stat)
                    try store.transaction {
                        try store.saveFile(copy)
                        try store.enqueue(copyPath)
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
