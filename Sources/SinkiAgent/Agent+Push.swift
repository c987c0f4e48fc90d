import SinkiLoop
import SinkiRecord
import SinkiState
import SinkiSupport

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
        guard caughtUp, !stopping, !control.paused, reachable == true, pushTasks.count < Self.pushDepth else { return }
        preparingPush = true
        let id = nextPushID
        nextPushID += 1
        pushTasks[id] = Task { await self.pushOnce(id) }
    }

    private func pushOnce(_ id: Int) async {
        // An empty batch (everything queued is in flight, or waits for its upload) ends the round;
        // the next change, acknowledgement or finished upload pumps again.
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
        inFlightPaths.formUnion(paths)
        defer { inFlightPaths.subtract(paths) }
        // Let the next batch be prepared while this one travels.
        pumpPush()
        do {
            let response = try await client.modify(body: body)
            connected()
            let report = try await replica.acknowledge(batch, response.results)
            logger.debug("pushed \(report.saved) change(s), \(report.conflicts.count) conflict(s), \(report.refused.count) refused")
            if !report.conflicts.isEmpty {
                // A large file's version from the server is downloaded before its conflict is settled.
                let fetched = try await fetchAssets(report.conflicts.map(\.remote))
                try await settleConflicts(report.conflicts)
                if !fetched.isEmpty { await replica.discardDownloads(fetched) }
            }
        } catch let error as SyncError {
            if case .transport = error { disconnected(error) } else { logger.error("push failed: \(error)") }
        } catch {
            logger.error("push failed: \(error)")
        }
    }
}
