import Glibc
import SinkiMerge
import SinkiPlan
import SinkiRecord
import SinkiSupport

/// The outcomes of what a round handed out, recorded as they come back: the server's answers to a
/// batch, fetched content, the merge engine's decisions. Each path handed out is in flight until its
/// outcome is recorded here, and is planned again from the trees after.
extension Replica {
    /// Records the server's answers to a batch `step` handed out.
    public func acknowledge(_ batch: [Outgoing], _ results: [ModifyResult]) throws -> AcknowledgeReport {
        let report: AcknowledgeReport
        do {
            report = try uploader.acknowledge(batch, results, failures: &scheduler.failures)
        } catch {
            for outgoing in batch { scheduler.inFlight.remove(outgoing.record.path) }
            throw error
        }
        for outgoing in batch { scheduler.inFlight.remove(outgoing.record.path) }
        for move in report.movesWithoutSource {
            scheduler.noMoveFrom[move.path] = move.source
            // Held until the source's record says what became of it (`settleMoveWithoutSource`).
            scheduler.inFlight.insert(move.path)
        }
        return report
    }

    /// A rename the server refused because its source no longer holds the content there; `source` is
    /// the server's record at the source now. If another device deleted the version renamed here, and
    /// this path is that very file (the watcher saw the rename) unchanged since, the delete follows the
    /// rename: it goes here too. Otherwise the file goes with its bytes, as a new one.
    public func settleMoveWithoutSource(_ path: String, source: Record?, agreed: Node?) throws -> [AppliedChange] {
        defer { scheduler.inFlight.remove(path) }
        if let source { try feed.ingest([source], token: nil) }
        guard let source, source.deleted, source.device != context.device, context.moveHints[path] == source.path,
              let row = try store.row(path), let local = row.local, row.synced == nil, let here = context.locate(path),
              agreed == local.node, let synced = try store.row(source.path)?.synced, source.changeTag > synced.tag || synced.node == nil,
              try observer.refresh(here).local == local else { return [] }
        let op = DiskOp(action: .remove, path: here, recordPath: path, expect: local, remote: nil, agree: nil, event: .deleted)
        let report = try localRound.apply([op])
        guard report.done.contains(path) else { return [] }
        context.moveHints[path] = nil
        logger.info("\(quoted(path)) was renamed here from \(quoted(source.path)), which \(source.device) deleted meanwhile: the delete follows the rename")
        return report.applied
    }

    /// A batch that got no answer (the connection failed): its paths are planned again. Their `sent`
    /// notes stay: the server may have saved them, and the feed will say.
    public func sendFailed(_ batch: [Outgoing]) {
        for outgoing in batch { scheduler.inFlight.remove(outgoing.record.path) }
    }

    /// The record of a small file looked up again with its content (nil: the server has none there):
    /// taken into Remote, its content kept for the write.
    public func fetched(_ fetch: ContentFetch, record: Record?) throws {
        defer { scheduler.inFlight.remove(fetch.path) }
        if let record { try feed.ingest([record], token: nil) }
        // The answer must make the write possible, or the path waits (a fetch never repeats at once).
        let row = try store.row(fetch.path)
        guard let remote = row?.remote, remote.kind != nil, remote.assetID == nil, remote.size > 0,
              feed.inline.data(fetch.path, tag: remote.tag) == nil else { return }
        scheduler.failures.fail(fetch.path, .down, ApplyFailure(.contentMissing, "the server's answer for \(quoted(fetch.path)) held no content"),
                                row: row)
    }

    /// An asset fetched into the state folder (`failure` nil), or why it could not be.
    public func fetched(_ fetch: ContentFetch, failure: ApplyFailure?) throws {
        defer { scheduler.inFlight.remove(fetch.path) }
        let row = try store.row(fetch.path)
        // The feed may have brought a newer version while this one came: the newer one is planned afresh,
        // and this fetch's outcome (a failure, or a download checked against its own version) is not
        // charged to it. Checked against the new record, a good download was taken for a bad one and the
        // new version held back as invalid.
        let current = row?.remote?.tag == fetch.tag
        if let failure {
            if current { scheduler.failures.fail(fetch.path, .down, failure, row: row) }
            return
        }
        guard let asset = fetch.asset else { return }
        // The download put its file under the final name before it ended. A partial file there now is
        // another download's of the same content (another path with these bytes), half-built: taken for
        // this one's, it failed a good download as invalid for a day and was removed from under its own.
        let done = context.downloadPath(asset.sha256)
        if let problem = try RemoteContent.problem(path: fetch.path, size: fetch.size, hash: fetch.hash, asset: asset, file: done) {
            unlink(done)
            if current { scheduler.failures.fail(fetch.path, .down, ApplyFailure(.invalid, problem), row: row) }
            return
        }
        if !context.hasDownload(asset), current {
            scheduler.failures.fail(fetch.path, .down, ApplyFailure(.contentMissing, "the download of \(quoted(fetch.path)) is not its content"),
                                    row: row)
        }
    }

    /// Whether the checked download of `asset` waits already (one of another path with the same bytes):
    /// then nothing is fetched for it.
    public func hasDownload(_ asset: Asset) -> Bool { context.hasDownload(asset) }

    /// A fetch that could not be made now (the server out of reach): planned again later.
    public func fetchAbandoned(_ fetch: ContentFetch) { scheduler.inFlight.remove(fetch.path) }

    /// The engine's answer for a conflict `step` handed out, carried out (only if the local file is still
    /// the version it was decided on; else the planner looks again with the new one).
    public func carryOut(_ job: MergeJob, _ outcome: MergeOutcome) throws -> [AppliedChange] {
        defer { scheduler.inFlight.remove(job.path.string) }
        guard let local = context.locate(job.path) else { return [] }
        let now = try observer.refresh(local)
        let remoteNow = try store.row(job.path.string)?.remote
        guard now.local == job.local, remoteNow == job.remoteFacts else {
            logger.debug("the conflict on \(quoted(job.path.string)) is looked at again: \(now.local == job.local ? "its remote version" : "the local file") changed")
            return []
        }
        let desk = MergeDesk(context: context)
        let asides = Asides(context: context)
        var applied: [AppliedChange] = []
        let type = job.remoteFacts.type
        switch desk.carry(job, outcome, at: local) {
        case let .disk(op):
            applied += try localRound.apply([op]).applied
        case .keepLocalAside:
            if try asides.keepLocal(local, expect: job.local) != nil {
                applied.append(AppliedChange(path: job.path.string, event: .conflict, localPath: context.diskPath(local), type: type))
            }
        case .keepRemoteAside:
            if try asides.keepRemote(local, remote: job.remoteFacts, content: job.remoteContent) != nil {
                applied.append(AppliedChange(path: job.path.string, event: .conflict, localPath: context.diskPath(local), type: type))
            }
        case .baseOnRemote:
            // The local version stays and goes to the server based on the remote one.
            try store.setSynced(job.path.string, SyncedFacts(job.remoteFacts))
        case .ask:
            switch try desk.keepWaiting(job, at: local) {
            case .recorded:
                applied.append(AppliedChange(path: job.path.string, event: .conflict, localPath: context.diskPath(local), type: type))
            case .same:
                // Both hold the same bytes: agreed on the remote version (the local file's name comes with its next read).
                logger.info("\(quoted(job.path.string)) holds the version from \(job.remoteFacts.device) already: no conflict")
                try store.setSynced(job.path.string, SyncedFacts(job.remoteFacts))
            case .changed:
                break
            }
        }
        return applied
    }

    /// A conflict handed out and not decided (the agent stopped): planned again later.
    public func mergeAbandoned(_ job: MergeJob) { scheduler.inFlight.remove(job.path.string) }

    /// Makes the failures at or below `path` (all when nil) due now (`sinkid retry`, a local event
    /// that may have removed their cause); returns their paths.
    @discardableResult
    public func retryFailures(under path: String?, direction: FailureDirection? = nil) -> [String] {
        scheduler.restart()
        return scheduler.failures.makeDue(under: path, direction: direction)
    }

    /// When the soonest failure is due to be planned again (nanoseconds since the epoch), if any.
    public var nextFailureDue: Int64? { scheduler.failures.nextDue }

    /// The next round starts a pass from the beginning (`sinkid sync`, a reconnect).
    public func restartPass() { scheduler.restart() }
}
