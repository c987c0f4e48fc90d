import Glibc
import SinkiMerge
import SinkiPlan
import SinkiRecord
import SinkiSupport

extension Replica {
    /// One round: the next page of work is planned; what needs only this machine (writes, folders,
    /// deletes, renames, agreements, copies kept aside) is carried out and recorded now, and what
    /// needs the network or the merge engine is handed out — each of those paths planned again only
    /// once its outcome is recorded (`acknowledge`, `fetched`, `uploadEnded`, `carryOut`).
    public func step(_ options: StepOptions) throws -> Step {
        var step = Step()
        var settledElsewhere = 0
        if feed.sharedConflictsChanged {
            feed.sharedConflictsChanged = false
            let writes = store.treeWrites
            step.applied += try settleFromElsewhere()
            // What that wrote is planned again (the server may hold a newer version than the one kept).
            settledElsewhere = store.treeWrites - writes
            step.recorded += settledElsewhere
        }
        let scheduler = self.scheduler
        // A page that sends plans about what a batch takes; one that cannot send yet is planned again
        // (rewound) once it can, so it too is no longer than that.
        let limit = options.canSend ? min(options.maxRecords, scheduler.savePageLimit) : options.maxRecords
        let page = try store.reading {
            try scheduler.nextPage(limit: limit, excludingRoots: options.excludingRoots, remoteOnly: !options.canSend)
        }
        step.settled = page.settled && settledElsewhere == 0
        if page.planned.isEmpty { return step }
        var round = Round()
        var router = Router(context: context, feed: feed, options: options)
        for planned in page.planned { try router.route(planned, into: &round) }
        let writesBefore = store.treeWrites
        try localRound.carryOut(round, into: &step)
        // Saves: read and built now, noted as sent, and in flight until their answer. While no request
        // can go, the page is planned again once one can: the pass waits here rather than walking on.
        if options.canSend && !options.canPush && !round.saves.isEmpty {
            scheduler.rewind()
            step.blocked = true
        }
        if options.canSend && options.canPush && !round.saves.isEmpty {
            let started = Clock.monotonic()
            let built = try uploader.build(round.saves, maxBytes: options.maxBytes)
            step.batch = built.records
            scheduler.batchBuilt(taken: built.records.count, left: built.left.map(\.recordPath))
            if logger.isEnabled(.debug) {
                // What a batch carries: renames travel as their source's name, never as bytes again.
                let renamed = built.records.count { $0.record.movedFrom != nil }
                let bytes = built.records.reduce(0) { $0 + ($1.record.data?.count ?? 0) }
                logger.debug("batch \(built.records.count) of \(page.planned.count) planned (\(renamed) renamed, \(bytes) bytes of content): "
                             + "\((Clock.monotonic() - started) / 1_000_000) ms")
            }
            for outgoing in built.records { scheduler.inFlight.insert(outgoing.record.path) }
            if logger.isEnabled(.debug) {
                for item in built.records {
                    let record = item.record
                    let what = record.deleted ? "tombstone" : record.kind == .directory ? "dir" : record.movedFrom.map { "move from \(quoted($0))" } ?? "file"
                    logger.debug("push \(quoted(record.path)) \(what) base \(record.baseTag)")
                }
            }
        }
        for fetch in round.fetches { scheduler.inFlight.insert(fetch.path) }
        step.fetches = round.fetches
        for path in round.uploads { scheduler.inFlight.insert(path) }
        step.uploads = round.uploads
        let desk = MergeDesk(context: context)
        for (path, local, row, remote, content) in round.resolves {
            if let job = try desk.prepare(path, at: local, row: row, remote: remote, content: content) {
                scheduler.inFlight.insert(path.string)
                step.merges.append(job)
            } else {
                _ = try observer.refresh(local)
            }
        }
        step.recorded += store.treeWrites - writesBefore
        return step
    }
}
