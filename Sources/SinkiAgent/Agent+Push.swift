import SinkiLoop
import SinkiRecord
import SinkiState
import SinkiSupport
import SinkiTransfer

extension Agent {
    /// Up to this many modify requests in flight: the next batch is read and compressed while the
    /// server commits the previous one.
    static let pushDepth = 2

    /// Starts pushing queued local changes if there are any and nothing stops it.
    func pumpPush() {
        pumpUploads()
        if preparingPush {
            // The batch being read may have been read before what asked for this: ask once more.
            pushWanted = true
            return
        }
        guard caughtUp, !stopping, !control.paused, reachable == true || pushProbe, accessOpen, pushTasks.count < Self.pushDepth else { return }
        pushProbe = false
        preparingPush = true
        let id = nextPushID
        nextPushID += 1
        pushTasks[id] = Task { await self.pushOnce(id) }
    }

    private func pushOnce(_ id: Int) async {
        // An empty batch ends the round: `nextBatch` walks past whatever is held back, so it is empty
        // only when everything queued is in flight, waits for its upload, or is held behind those
        // (it says so when nothing is in flight); the next change, acknowledgement or finished upload
        // pumps again.
        var sent = true
        defer {
            pushTasks[id] = nil
            finishIfIdle()
            if sent { pumpPush() }
        }
        guard let replica, let client else { preparingPush = false; return }
        let batch: [Outgoing]
        let body: [UInt8]
        do {
            batch = try await replica.nextBatch(limit: configuration.batchRecords, maxBytes: configuration.batchBytes,
                                                excluding: inFlightPaths.union(merge.settlingPaths), excludingRoots: Set(control.safetyStops.keys))
            let records = batch.map(\.record)
            body = try await Blocking.run { ModifyRequest(records: records).jsonBytes }
        } catch {
            preparingPush = false
            logger.error("cannot prepare local changes: \(error)")
            return
        }
        preparingPush = false
        let wanted = pushWanted
        pushWanted = false
        if batch.isEmpty {
            sent = wanted
            if pushTasks.count <= 1 { trimMemory() } // the end of a burst
            return
        }
        let paths = batch.map(\.record.path)
        if pushRun == nil { pushRun = PushProgress(startedAt: Clock.monotonic()) }
        inFlightPaths.formUnion(paths)
        defer { inFlightPaths.subtract(paths) }
        // Let the next batch be prepared while this one travels.
        pumpPush()
        do {
            let sentAt = Clock.monotonic()
            let response = try await client.modify(body: body)
            connected()
            let report = try await replica.acknowledge(batch, response.results)
            if report.saved > 0 { expectEcho(pushSentAt: sentAt) }
            logger.debug("pushed \(report.saved) change(s), \(report.conflicts.count) conflict(s), \(report.refused.count) refused")
            noteSent(report.saved, bytes: batch.reduce(0) { $0 + ($1.record.deleted ? 0 : $1.record.size) }, savedTotal: report.savedTotal)
            // Deepest first: a folder whose contents' deletes follow them is empty when its turn comes.
            for move in report.movesWithoutSource.sorted(by: { $0.path.utf8.count > $1.path.utf8.count }) {
                let source = try await client.record(at: move.source)
                _ = try await replica.settleMoveWithoutSource(path: move.path, source: source)
            }
            if !report.conflicts.isEmpty {
                // A large file's version from the server is downloaded before its conflict is settled.
                let fetched = try await fetchAssets(report.conflicts.map(\.remote))
                defer { Task { await self.releaseDownloads(fetched) } }
                try await holdNotApplied(report.conflicts.map(\.remote), fetched.failed)
                try await settleConflicts(report.conflicts.filter { fetched.failed[$0.remote.path] == nil })
            }
            await sayIfUpToDate()
        } catch let error as SyncError {
            // Refused or slowed down: the batch stays queued, sent again once the server lets us.
            if noteAccess(error) { return }
            if case .transport = error {
                disconnected(error)
                schedulePushProbe()
            } else {
                logger.error("push failed: \(error)")
            }
        } catch {
            logger.error("push failed: \(error)")
        }
    }

    /// After a push lost its connection, one push is tried again after the backoff delay, for when the
    /// feed does not run to find the server again (a root stopped for safety holds it). It does not
    /// count an attempt: the feed's retries keep their own pace.
    func schedulePushProbe() {
        guard !pushProbeScheduled else { return }
        pushProbeScheduled = true
        let delay = UInt64(backoff.upcoming() * 1000)
        Task {
            _ = await sleeper?.sleep(milliseconds: delay)
            pushProbeScheduled = false
            guard !stopping, reachable != true else { return }
            pushProbe = true
            pumpPush()
        }
    }
}

extension Agent {
    /// Counts what a push sent into the current run, and tells systemd how the run goes at most once
    /// a second (`STATUS=`).
    func noteSent(_ count: Int, bytes: Int64, savedTotal: Int) {
        pushRun?.took(count, bytes: bytes, savedTotal: savedTotal)
        let now = Clock.monotonic()
        guard now - pushRunToldAt >= 1_000_000_000 else { return }
        pushRunToldAt = now
        control.notifier?.status(serviceStatus)
    }
}
