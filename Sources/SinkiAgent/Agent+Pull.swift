import SinkiLoop
import SinkiRecord
import SinkiState
import SinkiSupport
import SinkiTransfer
import SinkiWatch

extension Agent {
    /// Follows the change feed: catch-up pages at once, then long-polls that hold no thread here
    /// or on the server. On failure: one log line, then growing jittered retries.
    func pullLoop() async {
        guard let replica, let client, let sleeper else { return }
        // While a catch-up page is applied, the next one is already on its way.
        var prefetched: Task<RecordPage, any Error>?
        defer { prefetched?.cancel() }
        while !stopping && !control.paused {
            if !control.safetyStops.isEmpty {
                // Remote changes wait too: a stopped root is not what its records say it is.
                _ = await sleeper.sleep(milliseconds: 3_600_000)
                continue
            }
            let pending = prefetched
            prefetched = nil
            var upcoming: Task<RecordPage, any Error>?
            // The next page is kept only once the one it follows is applied.
            defer { upcoming?.cancel() }
            do {
                let page: RecordPage
                if let pending {
                    page = try await pending.value
                } else {
                    let token = try await replica.feedToken(server: feedKey)
                    page = try await client.changes(since: token, wait: caughtUp ? configuration.pollWaitSeconds : 0, limit: 1000)
                }
                connected()
                if page.more {
                    let token = page.token
                    upcoming = Task { try await self.page(after: token) }
                }
                try await absorb(page)
                prefetched = upcoming
                upcoming = nil
                if !page.more && page.records.count > 100 { trimMemory() }
                if !page.more && !caughtUp {
                    caughtUp = true
                    logger.info("up to date with \(serverURL)")
                }
                pumpPush()
            } catch let error as SyncError {
                if stopping { return }
                if case .transport(.cancelled) = error { return }
                if error.isStaleToken {
                    logger.warning("the server does not know our change token (\(error)); reading its feed from the start")
                    try? await replica.resetFeed()
                    continue
                }
                if case .transport = error { disconnected(error) } else { logger.error("\(error)") }
                _ = await sleeper.sleep(milliseconds: UInt64(backoff.next() * 1000))
            } catch let error as TransferStalled {
                // Nothing past the failed download is applied; `sinkid retry` wakes this.
                if stopping { return }
                logger.warning("\(error)")
                _ = await sleeper.sleep(milliseconds: 3_600_000)
            } catch {
                if stopping || Task.isCancelled { return }
                logger.error("cannot apply remote changes: \(error)")
                _ = await sleeper.sleep(milliseconds: UInt64(backoff.next() * 1000))
            }
        }
    }

    /// The catch-up page after `token`, asked for without waiting.
    private func page(after token: String) async throws -> RecordPage {
        guard let client else { throw CancellationError() }
        return try await client.changes(since: token, wait: 0, limit: 1000)
    }

    /// Applies one feed page. Content that is not inline is fetched first, so the stored token
    /// never moves past a record that did not reach the disk.
    func absorb(_ page: RecordPage) async throws {
        guard let replica, let client else { return }
        var records = page.records
        let missing = try await replica.missingContent(records)
        for index in missing {
            if let full = try await client.record(at: records[index].path), full.changeTag == records[index].changeTag {
                records[index] = full
            }
        }
        // Large files are downloaded and checked first, for the same reason.
        let fetched = try await fetchAssets(records)
        let report = try await replica.apply(records, token: page.token)
        try await noteApplied(report)
        if !fetched.isEmpty { await replica.discardDownloads(fetched) }
    }
}
