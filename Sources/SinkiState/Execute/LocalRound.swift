import SinkiRecord
import SinkiSupport

/// The part of a round that needs only this machine, carried out and recorded in the trees:
/// agreements, the disk batch (each operation only if the disk still holds what it was planned on),
/// copies kept aside. Failures go to the scheduler's book, so their paths are planned again.
struct LocalRound {
    let context: ReplicaContext
    let observer: LocalObserver
    let scheduler: Scheduler
    let feed: FeedReader
    private var store: StateStore { context.store }

    /// Carries out what needs only this machine, and records it: agreements, then the disk batch (each
    /// op only if the disk still holds what was planned: a change the watcher has not reported yet is
    /// taken in first, and the op waits for the next round), then copies kept aside.
    func carryOut(_ round: Round, into step: inout Step) throws {
        if !round.advance.isEmpty {
            try store.transaction {
                for (path, synced) in round.advance {
                    try store.setSynced(path, synced)
                    if let node = synced.node, try store.sent(path).contains(node) { try store.dropSent(path) }
                    scheduler.failures.succeeded(path)
                }
            }
        }
        for (path, failure) in round.refusedContent {
            scheduler.failures.fail(path, .down, failure, row: try store.row(path))
            context.logFailure(path, failure, attempts: scheduler.failures.entries[PathKey(path)]?.attempts ?? 1)
        }
        var ops: [DiskOp] = []
        for op in round.disk {
            let now = try observer.refresh(op.path)
            if now.busy {
                scheduler.failures.fail(op.recordPath, .down,
                                        ApplyFailure(.busy, "\(quoted(context.diskPath(op.path))) is open for writing in another program; applied once it is closed"),
                                        row: try store.row(op.recordPath))
                continue
            }
            if now.local != op.expect { continue } // changed here meanwhile: planned again with it
            if case let .rename(from, expect) = op.action, try observer.refresh(from).local != expect { continue }
            ops.append(op)
        }
        if !ops.isEmpty {
            let report = try apply(ops)
            step.applied += report.applied
            step.toCheck += report.toCheck
        }
        let asides = Asides(context: context)
        for (path, expect) in round.keepLocal {
            guard try observer.refresh(path).local == expect else { continue }
            let recordPath = context.recordPath(path)
            do {
                if try asides.keepLocal(path, expect: expect) != nil {
                    step.applied.append(AppliedChange(path: recordPath, event: .conflict, localPath: context.diskPath(path), type: expect.type))
                }
            } catch {
                scheduler.failures.fail(recordPath, .down, ApplyFailure.from(error), row: try store.row(recordPath))
            }
        }
        for (path, remote, content) in round.keepRemote {
            let recordPath = context.recordPath(path)
            do {
                _ = try asides.keepRemote(path, remote: remote, content: content)
                feed.inline.drop(recordPath)
            } catch {
                scheduler.failures.fail(recordPath, .down, ApplyFailure.from(error), row: try store.row(recordPath))
            }
        }
    }

    /// Runs `ops` on the disk and records their outcomes in one transaction; the report's paths to
    /// look at include those the executor found.
    func apply(_ ops: [DiskOp]) throws -> Outcomes.Report {
        var effects = DiskExecutor.Effects()
        let results = DiskExecutor(context: context).run(ops, effects: &effects)
        var report = try Outcomes(context: context).record(ops, results, failures: &scheduler.failures, inline: &feed.inline)
        report.toCheck = effects.toCheck + report.toCheck
        return report
    }
}
