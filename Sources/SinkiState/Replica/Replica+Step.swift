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
        let page = try scheduler.nextPage(limit: options.maxRecords, excludingRoots: options.excludingRoots, remoteOnly: !options.canSend)
        step.settled = page.settled
        if page.planned.isEmpty { return step }
        var round = Round()
        var fetchSlots = options.fetchSlots, uploadSlots = options.uploadSlots
        for planned in page.planned {
            try route(planned, into: &round, options: options, fetchSlots: &fetchSlots, uploadSlots: &uploadSlots)
        }
        let writesBefore = store.treeWrites
        try record(&round, into: &step)
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

    /// Sorts one planned operation into the round: by who carries it out, with its content when it
    /// writes, or a fetch of that content first.
    private func route(_ planned: PlannedOperation, into round: inout Round, options: StepOptions, fetchSlots: inout Int,
                       uploadSlots: inout Int) throws {
        let row = planned.row, path = row.path, local = planned.path
        switch planned.operation {
        case .nothing, .wait:
            return
        case .advanceSynced:
            round.advance.append((path, row.remote.map(SyncedFacts.init) ?? SyncedFacts(tag: 0, kind: nil)))
        case let .upload(upload), let .conflict(.overwriteRemote(upload)):
            guard options.canSend, let facts = row.local else { return }
            if facts.kind == .file, upload.movedFrom == nil, facts.size > context.inlineLimit || facts.hash.isEmpty {
                if let asset = try finishedAsset(path, facts) {
                    round.saves.append(SaveItem(path: local, recordPath: path, node: upload.node, base: upload.base.value, local: facts, asset: asset))
                } else if uploadSlots > 0 {
                    uploadSlots -= 1
                    round.uploads.append(path)
                }
                return
            }
            round.saves.append(SaveItem(path: local, recordPath: path, node: upload.node, base: upload.base.value, movedFrom: upload.movedFrom?.string,
                                        local: facts))
            if let remote = row.remote, remote.kind == nil, row.synced?.kind != nil, !context.keptAside.contains(path) {
                logger.info("\(quoted(path)): deleted on \(remote.device) but edited here: the edit is kept")
            }
        case let .makeRemoteFolder(_, base):
            guard options.canSend else { return }
            // A folder the watcher saw renamed goes as the rename it is (peers then know where it came from).
            var movedFrom: String?
            if let from = context.moveHints[path], let source = try store.row(from), source.local == nil, source.synced?.kind == .directory {
                movedFrom = from
            }
            round.saves.append(SaveItem(path: local, recordPath: path, node: .folder, base: base.value, movedFrom: movedFrom, local: row.local))
        case let .sendDelete(_, base):
            guard options.canSend else { return }
            round.saves.append(SaveItem(path: local, recordPath: path, node: nil, base: base.value))
        case .download, .conflict(.overwriteLocal):
            guard let remote = row.remote, let kind = remote.kind else { return }
            switch try content(path, remote, fetchSlots: &fetchSlots) {
            case let .ready(content):
                if row.local == nil, row.synced?.kind != nil, !context.keptAside.contains(path) {
                    logger.info("\(quoted(path)): deleted here but edited on \(remote.device): the edit is kept")
                }
                let action: DiskOp.Action
                if kind == .symlink, case let .bytes(target) = content { action = .symlink(target) } else { action = .write(content) }
                round.disk.append(DiskOp(action: action, path: local, recordPath: path, expect: row.local, remote: remote,
                                         agree: SyncedFacts(remote), hash: remote.hash, event: .changed))
            case let .fetch(fetch): round.fetches.append(fetch)
            case let .refused(failure): round.refusedContent.append((path, failure))
            case nil: return
            }
        case let .makeLocalFolder(_, agree):
            round.disk.append(DiskOp(action: .mkdir, path: local, recordPath: path, expect: row.local, remote: row.remote,
                                     agree: agree == nil ? nil : row.remote.map(SyncedFacts.init), event: agree == nil ? nil : .changed))
        case let .deleteLocal(_, _, agree):
            round.disk.append(DiskOp(action: .remove, path: local, recordPath: path, expect: row.local, remote: nil,
                                     agree: agree == nil ? nil : row.remote.map(SyncedFacts.init) ?? SyncedFacts(tag: 0, kind: nil),
                                     event: agree == nil ? nil : .deleted))
        case let .renameLocal(from, _, _):
            guard let remote = row.remote, let source = context.locate(from), let expect = try store.row(from.string)?.local else { return }
            round.disk.append(DiskOp(action: .rename(from: source, expect: expect), path: local, recordPath: path, expect: nil, remote: remote,
                                     agree: SyncedFacts(remote), hash: remote.hash, event: .changed))
        case .conflict(.keepLocalAside):
            guard let facts = row.local else { return }
            round.keepLocal.append((local, facts))
        case .conflict(.keepRemoteAside):
            guard let remote = row.remote, remote.kind == .file || remote.kind == .symlink else { return }
            switch try content(path, remote, fetchSlots: &fetchSlots) {
            case let .ready(content): round.keepRemote.append((local, remote, content))
            case let .fetch(fetch): round.fetches.append(fetch)
            case let .refused(failure): round.refusedContent.append((path, failure))
            case nil: return
            }
        case let .conflict(.resolve(recordPath, _, _)):
            guard let remote = row.remote, remote.kind == .file else { return }
            if let waiting = try store.conflict(path), waiting.remoteTag == remote.tag { return } // still waits for sinkid resolve
            switch try content(path, remote, fetchSlots: &fetchSlots) {
            case let .ready(content): round.resolves.append((recordPath, local, row, remote, content))
            case let .fetch(fetch): round.fetches.append(fetch)
            case let .refused(failure): round.refusedContent.append((path, failure))
            case nil: return
            }
        }
    }

    /// Where the content of `remote` at `path` comes from: inline bytes read with the feed (checked),
    /// a checked download in the state folder, or a fetch to make first (nil: no fetch slot is free).
    private func content(_ path: String, _ remote: RemoteFacts, fetchSlots: inout Int) throws -> Round.ContentState? {
        if remote.assetID != nil {
            if let asset = try context.asset(of: remote) {
                if context.hasDownload(asset) { return .ready(.download(asset)) }
                guard fetchSlots > 0 else { return nil }
                fetchSlots -= 1
                if mkdir(context.downloadsDirectory, 0o700) != 0 && errno != EEXIST {
                    throw SystemError("mkdir", errno: errno, path: context.downloadsDirectory)
                }
                return .fetch(ContentFetch(path: path, tag: remote.tag, size: remote.size, hash: remote.hash, asset: asset,
                                            partialPath: context.downloadPath(asset.sha256) + ".part"))
            }
        } else if remote.size == 0 || feed.inline.data(path, tag: remote.tag) != nil {
            do {
                let data = remote.size == 0 ? nil : feed.inline.data(path, tag: remote.tag)
                return .ready(.bytes(try RemoteContent.inflate(data, size: remote.size, hash: remote.hash, path: path)))
            } catch {
                feed.inline.drop(path)
                return .refused(ApplyFailure.from(error))
            }
        }
        guard fetchSlots > 0 else { return nil }
        fetchSlots -= 1
        return .fetch(ContentFetch(path: path, tag: remote.tag, size: remote.size, hash: remote.hash))
    }

    /// Carries out what needs only this machine, and records it: agreements, then the disk batch (each
    /// op only if the disk still holds what was planned: a change the watcher has not reported yet is
    /// taken in first, and the op waits for the next round), then copies kept aside.
    private func record(_ round: inout Round, into step: inout Step) throws {
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
            var effects = DiskExecutor.Effects()
            let results = DiskExecutor(context: context).run(ops, effects: &effects)
            let report = try Outcomes(context: context).record(ops, results, failures: &scheduler.failures, inline: &feed.inline)
            step.applied += report.applied
            step.toCheck += effects.toCheck + report.toCheck
        }
        let asides = Asides(context: context)
        for (path, expect) in round.keepLocal {
            guard try observer.refresh(path).local == expect else { continue }
            do {
                if try asides.keepLocal(path, expect: expect) != nil {
                    step.applied.append(AppliedChange(path: context.recordPath(path), event: .conflict, localPath: context.diskPath(path),
                                                      type: expect.type))
                }
            } catch {
                scheduler.failures.fail(context.recordPath(path), .down, ApplyFailure.from(error), row: try store.row(context.recordPath(path)))
            }
        }
        for (path, remote, content) in round.keepRemote {
            do {
                _ = try asides.keepRemote(path, remote: remote, content: content)
                feed.inline.drop(context.recordPath(path))
            } catch {
                scheduler.failures.fail(context.recordPath(path), .down, ApplyFailure.from(error), row: try store.row(context.recordPath(path)))
            }
        }
    }

    /// The asset a save of the large file at `path` may carry: the manifest of exactly its content as it
    /// is now, every chunk on the server (nil: its chunks are to upload first).
    private func finishedAsset(_ path: String, _ local: LocalFacts) throws -> Asset? {
        guard !local.hash.isEmpty, let progress = try store.chunkUpload(path), let manifest = progress.manifest, progress.content == local.hash,
              progress.size == local.size, progress.mtime == local.mtime, progress.ctime == local.ctime, progress.inode == local.inode else { return nil }
        return Asset(manifestHash: manifest, chunks: progress.chunks)
    }

    // MARK: Answers

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
        var effects = DiskExecutor.Effects()
        let results = DiskExecutor(context: context).run([op], effects: &effects)
        let report = try Outcomes(context: context).record([op], results, failures: &scheduler.failures, inline: &feed.inline)
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
        guard let remote = try store.row(fetch.path)?.remote, remote.kind != nil, remote.assetID == nil, remote.size > 0,
              feed.inline.data(fetch.path, tag: remote.tag) == nil else { return }
        scheduler.failures.fail(fetch.path, .down, ApplyFailure(.contentMissing, "the server's answer for \(quoted(fetch.path)) held no content"),
                                row: try store.row(fetch.path))
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
        guard let asset = fetch.asset, let partial = fetch.partialPath else { return }
        let done = context.downloadPath(asset.sha256)
        // A manifest's assembler finishes its file under the final name itself; a whole download waits
        // in its partial file.
        let file = access(partial, F_OK) == 0 ? partial : done
        if let problem = try RemoteContent.problem(path: fetch.path, size: fetch.size, hash: fetch.hash, asset: asset, file: file) {
            unlink(file)
            if current { scheduler.failures.fail(fetch.path, .down, ApplyFailure(.invalid, problem), row: row) }
            return
        }
        if file == partial { try syscall("rename", path: partial) { rename(partial, done) } }
        if !context.hasDownload(asset), current {
            scheduler.failures.fail(fetch.path, .down, ApplyFailure(.contentMissing, "the download of \(quoted(fetch.path)) is not its content"),
                                    row: row)
        }
    }

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
            var effects = DiskExecutor.Effects()
            let results = DiskExecutor(context: context).run([op], effects: &effects)
            applied += try Outcomes(context: context).record([op], results, failures: &scheduler.failures, inline: &feed.inline).applied
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
            if try desk.keepWaiting(job, at: local) {
                applied.append(AppliedChange(path: job.path.string, event: .conflict, localPath: context.diskPath(local), type: type))
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
