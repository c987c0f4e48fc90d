import SinkiLoop
import SinkiMerge
import SinkiRecord
import SinkiState
import SinkiSupport
import SinkiTransfer
import SinkiWatch

/// The rounds that bring the three trees together: the replica plans a page of what differs, does what
/// needs only this machine, and hands out what needs the network or the merge engine, which runs here
/// and records its outcome through the replica; then the next round. Nothing is queued anywhere: a
/// round that finds nothing to do ends them, and the next change (a look at the disk, a feed page, an
/// answer, a failure's time) starts them again.
struct SyncRounds {
    var running = false
    /// A round was asked for while one ran: it runs again once it ends.
    var wanted = false
    var task: Task<Void, Never>?
    /// Content being fetched (a record looked up, a download awaited), each by a number of its own:
    /// stopping cancels them and waits for them.
    var fetching: [Int: Task<Void, Never>] = [:]
    var nextFetch = 0
}

extension Agent {
    /// Up to this many modify requests in flight (and one more batch built, `stagedPush`): the next
    /// batches travel while the server commits the previous one, a round trip away.
    static let pushDepth = 3

    /// Starts rounds if none runs; asks for another if one does.
    func pumpSync() {
        if rounds.running {
            rounds.wanted = true
            return
        }
        guard !stopping, !control.paused, !feedMidRead, replica != nil else { return }
        rounds.running = true
        rounds.task = Task { await self.runRounds() }
    }

    /// Runs rounds until one ends them, then waits for nothing: what was handed out pumps again.
    func syncUntilSettled() async {
        pumpSync()
        while let task = rounds.task { await task.value }
    }

    private func runRounds() async {
        defer {
            rounds.running = false
            rounds.task = nil
            // An answer that came after the loop's last look (while the digests were checked, say) asked
            // for more: dropped here, its path waited for the next unrelated event (MergeRuleTests'
            // compare case, once in fifty: a merge's "keep local" never went up).
            if rounds.wanted { pumpSync() }
            // What the rounds found (an ask conflict) or settled goes to the server for the other devices.
            pumpSharedConflicts()
            finishIfIdle()
        }
        guard let replica else { return }
        var idleRounds = 0
        while !stopping && !control.paused && !feedMidRead {
            rounds.wanted = false
            let width = max(1, configuration.transfer.parallel)
            var options = StepOptions()
            options.canSend = caughtUp && accessOpen && access.storageOpen(now: Clock.now()) && (reachable == true || pushProbe)
            options.canPush = pushTasks.count < Self.pushDepth || stagedPush == nil
            options.maxRecords = configuration.batchRecords
            options.maxBytes = pushPace.maxBytes(configured: configuration.batchBytes, depth: Self.pushDepth)
            options.uploadSlots = max(0, width - transfers.uploads.count)
            options.fetchSlots = max(0, 4 * width - rounds.fetching.count)
            options.downloadSlots = max(0, width - transfers.downloading.count)
            options.excludingRoots = heldRoots
            let step: Step
            do { step = try await replica.step(options) } catch {
                logger.error("cannot plan what differs: \(error)")
                break
            }
            publishApplied(step.applied)
            if !step.toCheck.isEmpty {
                var batch = WatchBatch()
                batch.changes = step.toCheck.map { WatchBatch.Change($0, recursive: true) }
                handleWatch(batch)
            }
            if !step.batch.isEmpty {
                pushProbe = false
                if pushTasks.count < Self.pushDepth { push(step.batch) } else { stagedPush = step.batch }
            }
            for fetch in step.fetches { startFetch(fetch) }
            for path in step.uploads { startUpload(path) }
            for job in step.merges { startMerge(job) }
            // Both requests in flight: the next answer starts the rounds again from this page.
            if step.blocked { break }
            if step.didSomething {
                idleRounds = 0
                continue
            }
            if step.settled {
                if rounds.wanted { continue }
                break
            }
            // A page with nothing to do now: the pass goes on to the next page. A pass cannot go on for
            // ever without ending settled (nothing recorded), but the loop yields now and then.
            idleRounds += 1
            if idleRounds % 64 == 0 { await Task.yield() }
        }
        scheduleRetry()
        await sayIfUpToDate()
    }

    // MARK: Saves

    /// Sends one batch of records in a modify request and records the answers.
    private func push(_ batch: [Outgoing]) {
        guard let replica, let client else { return }
        let id = nextPushID
        nextPushID += 1
        if pushRun == nil { pushRun = PushProgress(startedAt: Clock.monotonic()) }
        pushTasks[id] = Task {
            var answered = false
            defer {
                pushTasks[id] = nil
                // The batch built meanwhile goes now; after a failure it is planned again with the rest.
                if answered, !stopping, let staged = stagedPush {
                    stagedPush = nil
                    push(staged)
                } else if !answered {
                    dropStagedPush()
                    // Saved or not, the feed passed over them: a check takes them from the server.
                    for outgoing in batch { digests.unanswered.insert(PathKey(outgoing.record.path)) }
                }
                if pushTasks.isEmpty { checkAfterPushes() }
                finishIfIdle()
                pumpSync()
            }
            do {
                let records = batch.map(\.record)
                let frames = client.sendsFrames
                let body = await Blocking.run { () -> ModifyBody in ModifyBody(ModifyRequest(records: records), frames: frames) }
                if !digests.feedMarkedBeforeSaves {
                    // Before the save goes: the feed passes over it, and only its answer tells this run of it.
                    try await replica.markFeedBeforeSaves()
                    digests.feedMarkedBeforeSaves = true
                }
                let sentAt = Clock.monotonic()
                let sharing = pushTasks.count
                let response = try await client.modify(body)
                answered = true
                pushPace.answered(bodyBytes: body.bytes.count, seconds: Double(Clock.monotonic() - sentAt) / 1e9, sharing: max(sharing, pushTasks.count))
                connected()
                storageHasRoom()
                let report = try await replica.acknowledge(batch, response.results)
                if report.saved > 0 { expectEcho(pushSentAt: sentAt) }
                logger.debug("pushed \(report.saved) change(s), \(report.conflicts) conflict(s), \(report.refused.count) refused")
                noteSent(report.saved, bytes: batch.reduce(0) { $0 + ($1.record.deleted ? 0 : $1.record.size) }, savedTotal: report.savedTotal)
                // A rename the server refused: the source's record says what became of it (deepest first, so a
                // folder whose contents follow their deletes is empty when its turn comes).
                for move in report.movesWithoutSource.sorted(by: { $0.path.utf8.count > $1.path.utf8.count }) {
                    // A stop does not wait for the rest (one read each: 300 of them held a SIGTERM past 10 s in
                    // the soak, seed 9875): each is planned again after the restart and refused again.
                    if stopping {
                        _ = try? await replica.settleMoveWithoutSource(move.path, source: nil, agreed: nil)
                        continue
                    }
                    do {
                        let source = try await client.record(at: move.source)
                        publishApplied(try await replica.settleMoveWithoutSource(move.path, source: source, agreed: move.agreed))
                    } catch {
                        _ = try? await replica.settleMoveWithoutSource(move.path, source: nil, agreed: nil)
                        throw error
                    }
                }
            } catch let error as SyncError {
                await replica.sendFailed(batch)
                // Refused, slowed down or out of room: planned again once the server lets us.
                if noteAccess(error) || noteStorageFull(error, changes: batch.count) { return }
                if case .transport = error {
                    disconnected(error)
                    schedulePushProbe()
                } else {
                    logger.error("push failed: \(error)")
                }
            } catch {
                await replica.sendFailed(batch)
                logger.error("push failed: \(error)")
            }
        }
    }

    /// The check against the server's digests put off while saves were in flight runs now that the
    /// last answer is recorded, in the pull loop: an open streamed answer is handed a page that says
    /// nothing new (the loop checks after it as after any page), a parked long-poll is given up.
    private func checkAfterPushes() {
        guard digests.afterPushes, !stopping else { return }
        digests.afterPushes = false
        if let stream = feed.stream?.pages, stream.nudge() { return }
        digests.checkFirst = true
        wakeFeed("the saves in flight are answered; checking with the server's digests", level: .debug)
    }

    /// The staged batch goes back to be planned again (a stop, a push that failed): its paths are no
    /// longer in flight.
    func dropStagedPush() {
        guard let staged = stagedPush, let replica else { return }
        stagedPush = nil
        Task {
            await replica.sendFailed(staged)
            pumpSync()
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
            pumpSync()
        }
    }

    /// Counts what a push sent into the current run, and tells systemd how the run goes at most once
    /// a second (`STATUS=`).
    func noteSent(_ count: Int, bytes: Int64, savedTotal: Int) {
        pushRun?.took(count, bytes: bytes, savedTotal: savedTotal)
        let now = Clock.monotonic()
        guard now - pushRunToldAt >= 1_000_000_000 else { return }
        pushRunToldAt = now
        control.notifier?.status(serviceStatus)
    }

    // MARK: Content

    /// Brings content a write needs: a small file's record looked up again with its data, or a large
    /// file's asset downloaded into the state folder and checked.
    private func startFetch(_ fetch: ContentFetch) {
        guard let replica, let client else { return }
        let number = rounds.nextFetch
        rounds.nextFetch += 1
        // Runs on this actor, so it starts only after it is filed below.
        rounds.fetching[number] = Task {
            defer {
                rounds.fetching[number] = nil
                pumpSync()
                finishIfIdle()
            }
            guard fetch.asset != nil else {
                do {
                    let record = try await client.record(at: fetch.path)
                    connected()
                    try await replica.fetched(fetch, record: record)
                } catch {
                    await replica.fetchAbandoned(fetch)
                    if stopping {
                    } else if case .transport? = error as? SyncError { disconnected(error) } else if let error = error as? SyncError, noteAccess(error) {
                    } else {
                        logger.warning("cannot look up \(quoted(fetch.path)) to write it: \(error)")
                    }
                }
                return
            }
            do {
                let failure = try await sharedDownload(fetch).value
                try await replica.fetched(fetch, failure: failure)
            } catch {
                await replica.fetchAbandoned(fetch)
            }
        }
    }

    // MARK: Merges

    /// Has the merge engine decide a conflict whose rule reads the files, then carries the answer out.
    private func startMerge(_ job: MergeJob) {
        guard let replica else { return }
        merge.settling[job.path.string, default: 0] += 1
        Task {
            defer {
                let left = (merge.settling[job.path.string] ?? 1) - 1
                merge.settling[job.path.string] = left > 0 ? left : nil
                pumpSync()
                finishIfIdle()
            }
            let outcome: MergeOutcome
            if job.waiting {
                outcome = MergeOutcome(resolution: .ask, decidedBy: .ask,
                                       summary: "already waits for sinkid resolve; the new version from \(job.remoteFacts.device) replaces the one kept aside")
            } else {
                outcome = await merge.engine.resolve(path: job.path, policy: job.policy, local: job.localVersion, remote: job.remoteVersion,
                                                     base: job.base)
            }
            logger.info("conflict on \(quoted(job.path.string)) with \(job.remoteFacts.device): \(outcome.summary)")
            do {
                publishApplied(try await replica.carryOut(job, outcome))
            } catch {
                await replica.mergeAbandoned(job)
                logger.warning("cannot carry out the merge of \(quoted(job.path.string)): \(error)")
            }
        }
    }
}
