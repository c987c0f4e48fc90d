import SinkiLoop
import SinkiRecord
import SinkiSupport
import SinkiTransfer

extension Agent {
    /// How long a parked long-poll may stay silent after the server acknowledged a push that saved
    /// something: the server wakes every long-poll of the user when it commits, so a healthy one
    /// returns within a round trip.
    static let echoWaitMilliseconds: UInt64 = 1500

    /// One page of the change feed after `token`. It long-polls only while the server is known to
    /// answer: at start, after a failure and after a wake it asks without waiting, so the answer says
    /// at once that the server is there (and what waited is sent then), where a long-poll to a server
    /// just restarted would say nothing for minutes.
    func feedPage(after token: String?) async throws(SyncError) -> RecordPage {
        guard let client else { throw .transport(.cancelled) }
        // A check against the server that could not finish is tried again after the next page: asked for
        // without waiting, that page comes at once.
        let wait = caughtUp && reachable == true && !feed.askNow && !digests.recheck ? configuration.pollWaitSeconds : 0
        feed.askNow = false
        guard wait > 0 else { return try await client.changes(since: token, wait: 0, limit: 1000, inflight: prefetch.position) }
        let id = feed.nextID
        feed.nextID += 1
        feed.parked = (id, Clock.monotonic())
        defer {
            if feed.parked?.id == id { feed.parked = nil }
            feed.echoTimer?.stop()
            feed.echoTimer = nil
        }
        return try await client.changes(since: token, wait: wait, limit: 1000, inflight: prefetch.position)
    }

    /// The change feed after `token` as streamed answers, when the agent would long-poll and the server
    /// answers in frames: its pages come as they commit, without a round trip between them. Nil when a
    /// page must be asked for (`feedPage`).
    func openFeedStream(after token: String?) -> FeedPages? {
        guard let client = self.client, client.sendsFrames, caughtUp, reachable == true, !feed.askNow, !digests.recheck else { return nil }
        let id = feed.nextID
        feed.nextID += 1
        feed.parked = (id, Clock.monotonic())
        let pages = FeedPages(since: token, inflight: prefetch.position), wait = configuration.pollWaitSeconds
        feed.stream = (id, pages)
        pages.onEnd = { [unowned self] in
            self.assumeIsolated { agent in
                if agent.feed.parked?.id == id { agent.feed.parked = nil }
                if agent.feed.stream?.id == id { agent.feed.stream = nil }
                agent.feed.echoTimer?.stop()
                agent.feed.echoTimer = nil
            }
        }
        pages.onArrival = { [unowned self] in self.assumeIsolated { $0.feedStreamHeard() } }
        pages.transfer = Task { await self.streamFeed(into: pages, wait: wait) }
        return pages
    }

    private func streamFeed(into pages: FeedPages, wait: Int) async {
        guard let client else { return pages.cancel() }
        await client.streamFeed(wait: wait, limit: 1000, into: pages)
    }

    /// A page arrived on the streamed answer (whether or not the pull loop, busy with a round, has taken
    /// it): the answer is alive, and a push whose answer comes after this may have come back in it
    /// already (the feed can be quicker than the modify answer), so the echo is awaited only for pushes
    /// sent from now on. Counted when taken instead, an agent sending a burst, whose pull loop waits for
    /// its own rounds, took its streamed feed for dead 1.5 s into the burst and read it all again.
    func feedStreamHeard() {
        if let parked = feed.parked { feed.parked = (parked.id, Clock.monotonic()) }
        feed.echoTimer?.stop()
        feed.echoTimer = nil
    }

    /// Sleeps the next backoff delay before the feed tries the server again. Ends early when another
    /// request gets an answer, on `sinkid sync`, and when the pull loop is cancelled (pause, stop):
    /// whoever cancels it calls `endRetryWaits()` (the sleep does not see cancellation).
    func waitToRetry() async {
        let sleeper = feed.retrySleeper ?? LoopSleeper(loop: loop)
        feed.retrySleeper = sleeper
        if Task.isCancelled { return }
        _ = await sleeper.sleep(milliseconds: UInt64(backoff.next() * 1000))
    }

    /// Ends the feed's backoff sleep: the next try goes now, or a cancelled pull loop ends.
    func endRetryWaits() {
        feed.retrySleeper?.wakeAll()
    }

    /// Gives up the parked long-poll and asks the server again at once. Called when another request
    /// failed, or when the feed kept silent after a change the server took: its connection may be dead
    /// without a word (a server killed behind a proxy, a middlebox that forgot the connection), and a
    /// long-poll on it would wait out its whole timeout.
    func wakeFeed(_ why: String, level: LogLevel = .info) {
        guard let parked = feed.parked, !stopping, !control.paused else { return }
        // One wake per parked request: the failures of one outage come in bursts.
        feed.parked = nil
        feed.askNow = true
        logger.log(level, "\(why): asking \(serverURL) for changes again now (the long-poll of \(String(format: "%.0f", Double(Clock.monotonic() - parked.since) / 1e9)) s is given up)")
        Task { await self.restartPull() }
    }

    /// After a push the server saved, a long-poll parked before the push was sent must bring that
    /// change back; one that stays silent for `echoWaitMilliseconds` is woken. The timer runs only then:
    /// an idle agent arms nothing.
    func expectEcho(pushSentAt: Int64) {
        guard let parked = feed.parked, parked.since < pushSentAt, feed.echoTimer == nil else { return }
        let timer = LoopTimer(loop: loop)
        feed.echoTimer = timer
        timer.start(after: Self.echoWaitMilliseconds) { [unowned self] in
            self.assumeIsolated { agent in
                agent.feed.echoTimer = nil
                guard agent.feed.parked?.id == parked.id else { return }
                agent.wakeFeed("the change feed did not bring back a change the server saved \(Self.echoWaitMilliseconds) ms ago")
            }
        }
    }
}
