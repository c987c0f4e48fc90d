import Glibc
import SinkiRecord
import SinkiSupport

extension Replica {
    /// Conflicts waiting for `sinkid resolve`, oldest first, and how many local changes they hold back.
    public func waitingConflicts() throws -> (conflicts: [WaitingConflict], held: Int) {
        let conflicts = try store.conflicts()
        if conflicts.isEmpty { return ([], 0) }
        let held = try store.database.scalar("""
            SELECT count(*) FROM tree INDEXED BY tree_local_work WHERE \(StateStore.localDiffers) AND path IN (SELECT path FROM conflicts)
            """) ?? 0
        return (conflicts, Int(held))
    }

    /// `sinkid resolve PATH --keep local|remote|both` for a conflict the `ask` rule left: `local` sends
    /// the file as it is now over the remote version; `remote` writes the remote version over it
    /// (checked, like any write, to still be what the Local tree says); `both` keeps the local file as a
    /// conflict copy and writes the remote version at the path. Returns what was written and a line for
    /// people; nil when no conflict waits at `path`.
    public func resolveWaiting(_ path: String, keep: KeepChoice, by who: String? = nil) throws -> (applied: [AppliedChange], message: String)? {
        guard let waiting = try store.conflict(path) else { return nil }
        guard let local = context.locate(path) else { throw ResolveError("\(quoted(path)) is not below a root synced here") }
        let desk = MergeDesk(context: context)
        let now = try observer.refresh(local)
        var remote = RemoteFacts(waiting.remoteRecord)
        if let current = try store.row(path)?.remote, current.tag == waiting.remoteTag { remote = current }
        var choice = keep
        // With a delete on one side, keeping both is keeping the side that is not a delete.
        if choice == .both && remote.isTombstone { choice = .local }
        if choice == .both && now.local == nil { choice = .remote }
        var applied: [AppliedChange] = []
        let message: String
        switch choice {
        case .local:
            try store.transaction {
                try store.setSynced(path, SyncedFacts(remote))
                try store.removeConflict(path)
                try settleShared(waiting)
            }
            message = "kept this machine's version of \(quoted(path)); it goes to the server over the one from \(remote.device)"
        case .remote, .both:
            var expect = now.local
            var copy: String?
            if choice == .both, let facts = now.local {
                guard let kept = try Asides(context: context).keepLocal(local, expect: facts) else {
                    throw ResolveError("cannot keep \(quoted(context.diskPath(local))) aside (see the agent's log)")
                }
                copy = kept
                expect = nil
            }
            let op: DiskOp
            if remote.isTombstone {
                op = DiskOp(action: .remove, path: local, recordPath: path, expect: expect, remote: nil, agree: SyncedFacts(remote), event: .deleted)
            } else {
                op = DiskOp(action: .write(.bytes(try desk.readAside(waiting.remote))), path: local, recordPath: path, expect: expect, remote: remote,
                            agree: SyncedFacts(remote), hash: remote.hash, event: choice == .both ? .conflict : .changed)
            }
            var effects = DiskExecutor.Effects()
            let results = DiskExecutor(context: context).run([op], effects: &effects)
            if case let .failed(failure) = results[0] { throw ResolveError("cannot write \(quoted(context.diskPath(local))): \(failure.message)") }
            if case .kept = results[0] { throw ResolveError("\(quoted(context.diskPath(local))) still holds files; nothing was removed") }
            applied = try Outcomes(context: context).record([op], results, failures: &scheduler.failures, inline: &feed.inline).applied
            try store.transaction {
                try store.removeConflict(path)
                try settleShared(waiting)
            }
            message = copy.map { "took the version from \(remote.device) for \(quoted(path)); this machine's is kept as \(quoted($0))" }
                ?? "took the version from \(remote.device) for \(quoted(path))"
        }
        desk.removeCopies(waiting)
        logger.info("\(who ?? "sinkid resolve --keep \(keep.rawValue)"): \(message)")
        return (applied, message)
    }
}
