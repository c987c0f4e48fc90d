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
        guard let replica, client != nil, let sleeper else { return }
        // While a page is applied, the next one is already on its way: a catch-up page, or at the end of
        // the feed after a page with records (another device saving batch after batch) the long-poll,
        // which brings the next batch down while this one is written here.
        var prefetched: PageAhead?
        defer { prefetched?.cancel() }
        while !stopping && !control.paused && !Task.isCancelled {
            endFeedReadIfStopped()
            if !control.safetyStops.isEmpty {
                // Remote changes wait too: a stopped root is not what its records say it is.
                _ = await sleeper.sleep(milliseconds: 3_600_000)
                continue
            }
            if !accessOpen {
                prefetched?.cancel()
                prefetched = nil
                await waitForAccess()
                continue
            }
            if digests.checkFirst {
                digests.checkFirst = false
                await checkWithServer()
                await sayIfUpToDate()
                continue
            }
            var pending = prefetched
            prefetched = nil
            var upcoming: PageAhead?
            // The next page is kept only once the one it follows is applied.
            defer { upcoming?.cancel() }
            do {
                var token: String?
                if pending == nil {
                    token = try await replica.feedToken(server: feedKey)
                    if let stream = openFeedStream(after: token) { pending = .streamed(stream) }
                }
                let page: RecordPage
                if let pending {
                    page = try await pending.next()
                } else {
                    page = try await feedPage(after: token)
                }
                connected()
                if let news = page.inflight { takeInFlight(news) }
                recordsArrived(page.records)
                // Its own saves passed over moved the position too: the check follows as after any page.
                if !page.records.isEmpty || page.omitted > 0 { digests.matched = false }
                if case .streamed? = pending {
                    logger.debug("feed: a page of \(page.records.count) record(s) on the open answer\(page.omitted > 0 ? ", \(page.omitted) of this run's own saves passed over" : "")"
                                 + (page.inflight == nil ? "" : ", with files in flight"))
                    // Its next pages come without asking, in order, while this one is written.
                    upcoming = pending
                } else if page.more {
                    let token = page.token
                    upcoming = .asked(Task { try await self.page(after: token) }, waits: false)
                } else if caughtUp && !page.records.isEmpty {
                    // Only asked, not read: the page goes in after this one is written, as any page would.
                    let token = page.token
                    if let stream = openFeedStream(after: token) {
                        upcoming = .streamed(stream)
                    } else {
                        upcoming = .asked(Task { try await self.feedPage(after: token) }, waits: true)
                    }
                }
                // The page into the Remote tree (with its position), then the rounds that write it here. Pages
                // that follow at once are read first while their content fits in memory: a rename's new path
                // and its old path's delete may be a page apart, and the rename is done here only once the
                // delete is read. Held from before the page goes in: a round started by an event while it
                // does would plan it without what the next page says.
                if page.more { feedMidRead = true }
                try await replica.ingest(page.records, token: page.token)
                if !page.records.isEmpty && pullRun == nil { pullRun = PullProgress(startedAt: Clock.monotonic()) }
                let ahead = await replica.inlineBytes
                // Mid-read, no round runs (a watcher event, an answer): one would plan the page before its
                // renames' deletes are read, and write each renamed file again instead of moving it.
                feedMidRead = page.more && ahead <= Self.inlineAhead
                if !feedMidRead { await syncUntilSettled() }
                prefetched = upcoming
                upcoming = nil
                if !page.more && page.records.count > 100 { trimMemory() }
                if !page.more && !caughtUp {
                    caughtUp = true
                    // "Up to date" only once nothing waits either way (`sayIfUpToDate`).
                    let pendingNow = await replica.pendingCount
                    if pendingNow > 0 { logger.info("read \(serverURL)'s changes to the end; \(pendingNow) local change(s) to send") }
                    await sayIfUpToDate()
                    if uncleanStart {
                        uncleanStart = false
                        Task { await self.verifyNow("the last run did not stop cleanly") }
                    } else if verify.last?.result == "differing" || verify.last?.result == "failed" {
                        Task { await self.verifyNow("the last comparison found differences") }
                    }
                }
                // Read to its end: this agent's copy of the server's records is checked against the server's
                // digests before anything says "up to date" (an empty long-poll after a match needs no new look).
                pumpSync()
                if !page.more && caughtUp && !(page.records.isEmpty && digests.matched && !digests.recheck),
                   await !nextPageComes(prefetched) {
                    digests.recheck = false
                    let started = Clock.monotonic()
                    await checkWithServer()
                    feed.checkMilliseconds = UInt64(max(0, Clock.monotonic() - started) / 1_000_000)
                }
                // A check to try again, or a wake, asks without waiting: a long-poll asked for before either
                // would hold it until the next change.
                if prefetched?.waits == true && (digests.recheck || feed.askNow) {
                    prefetched?.cancel()
                    prefetched = nil
                }
                if caughtUp { await sayIfUpToDate() }
            } catch let error as SyncError {
                endFeedRead()
                if stopping { return }
                if case .transport(.cancelled) = error { return }
                if noteAccess(error) { continue }
                if error.isStaleToken {
                    // The history between our position and now may have lost tombstones: a full
                    // comparison stands in for it, and the feed goes on from where the server stood.
                    logger.warning("the server does not know our change token (\(error)); comparing everything with it instead")
                    try? await replica.resetFeed()
                    // Another store altogether (a server made afresh): the versions agreed with the old one mean nothing there.
                    let replaced: Bool
                    if case let .problem(problem) = error { replaced = problem.code == ProblemKind.badToken.code } else { replaced = false }
                    let outcome = await verifyNow("the server no longer knows our change token", adoptHead: true, storeReplaced: replaced)
                    if outcome.result == "failed" { await waitToRetry() }
                    continue
                }
                if case .transport = error { disconnected(error) } else { logger.error("\(error)") }
                await waitToRetry()
            } catch {
                endFeedRead()
                if stopping || Task.isCancelled { return }
                logger.error("cannot apply remote changes: \(error)")
                await waitToRetry()
            }
        }
    }

    /// Whether a streamed feed brings its next page before a check against the server's digests is
    /// worth its round trip: while another device saves batch after batch, a check after each page only
    /// finds the feed behind, and holds the next page for that round trip. So the check waits for about
    /// what it would take, or half as long again as the last pages came apart when they came in a run
    /// (at most 250 ms), and follows the burst's last page.
    private func nextPageComes(_ ahead: PageAhead?) async -> Bool {
        guard case let .streamed(stream)? = ahead, !digests.recheck else { return false }
        let gap = stream.burstGapMilliseconds.map { $0 * 3 / 2 } ?? 0
        return await stream.waitForPage(milliseconds: min(250, max(5, feed.checkMilliseconds, gap)), loop: loop)
    }

    /// A read of the feed cut short: the rounds held for it run now.
    private func endFeedRead() {
        guard feedMidRead else { return }
        feedMidRead = false
        pumpSync()
    }

    /// The read goes no further this time round (a safety stop, a refused token): it ends here.
    private func endFeedReadIfStopped() {
        if !control.safetyStops.isEmpty || !accessOpen { endFeedRead() }
    }

    /// Says "up to date with SERVER" once the agent gets there after a start or a lost connection:
    /// the feed read to its end, the three trees equal everywhere (nothing to send, fetch or write,
    /// nothing handed out), no file moving, and the digests matched. Not per change after that: a busy
    /// folder would log a line each time.
    func sayIfUpToDate() async {
        guard caughtUp, !stopping, !saidUpToDate, digests.matched, transfers.moving.isEmpty, let replica else { return }
        if await replica.isSettled {
            // Another call may have said it while this one waited for the replica.
            guard !saidUpToDate else { return }
            dropEndedPrefetches()
            saidUpToDate = true
            if let run = pushRun, run.sent > 0 {
                let seconds = Double(Clock.monotonic() - run.startedAt) / 1e9
                logger.info("sent \(HumanUnits.grouped(run.sent)) local change(s) (\(HumanUnits.bytes(run.bytes))) in \(String(format: "%.1f", seconds)) s")
            }
            pushRun = nil
            if let run = pullRun, run.applied > 0 { logger.info(run.endWords(now: Clock.monotonic())) }
            pullRun = nil
            logger.info("up to date with \(serverURL)")
            control.notifier?.status(serviceStatus)
        }
    }

    /// Inline content read ahead of the rounds that write it, at most (pages are read on while below).
    static let inlineAhead = 16 << 20

    /// The catch-up page after `token`, asked for without waiting.
    private func page(after token: String) async throws -> RecordPage {
        guard let client else { throw CancellationError() }
        return try await client.changes(since: token, wait: 0, limit: 1000, inflight: prefetch.position)
    }
}
