import SinkiLoop
import SinkiSupport

/// What a stop still waits for. A stop that takes longer than a few seconds says so in the log, and
/// what holds it, instead of leaving the reader (or a service manager about to SIGKILL it) to guess.
struct StopWait {
    /// Says what is pending while the stop lasts.
    var timer: LoopTimer?
    /// Once the work has ended: the step of `run()` being awaited.
    var awaiting: String?
    /// When the stop began (monotonic nanoseconds).
    var since: Int64 = 0
    /// The replica call the look at the disk awaits, in words, while it awaits one.
    var diskStep: String?
}

extension Agent {
    /// A stop that has not ended after this long says what it waits for, and again each time as long.
    static let slowStopMilliseconds: UInt64 = 5_000

    /// Ends the agent: the current write finishes, state is saved, `run()` returns 0.
    public func stop() {
        guard !stopping else { return }
        stopping = true
        logger.info("stopping")
        stopWait.since = Clock.monotonic()
        let timer = LoopTimer(loop: loop)
        timer.start(after: Self.slowStopMilliseconds, repeat: Self.slowStopMilliseconds) { [unowned self] in
            self.assumeIsolated { $0.saySlowStop() }
        }
        stopWait.timer = timer
        controlStopping()
        watcher?.stop()
        pullTask?.cancel()
        endRetryWaits()
        sleeper?.wakeAll()
        for task in pushTasks.values { task.cancel() }
        dropStagedPush()
        cancelUploads()
        // Downloads end where they stand (the partial file stays for the next run); their workers
        // (placing a chunk, hashing) finish before the process exits.
        for task in transfers.downloading.values { task.cancel() }
        for task in rounds.fetching.values { task.cancel() }
        sharedConflictsTask?.cancel()
        cancelPrefetches()
        finishIfIdle()
    }

    /// What the look at the disk and the replica's queue are doing, for a stop that waits on them: a
    /// queue held by one call that does not end reads differently from a call that awaits something else.
    private var replicaState: String {
        var parts: [String] = []
        if let step = stopWait.diskStep { parts.append("the look at the disk is in \(step)") }
        if let replica {
            parts.append(replica.busyFor.map { "the state's queue has run one call for \(String(format: "%.1f", Double($0) / 1e9)) s" }
                ?? "the state's queue is idle")
        }
        return parts.isEmpty ? "" : " (" + parts.joined(separator: "; ") + ")"
    }

    func finishIfIdle() {
        guard stopping, stopPending.isEmpty, let finished else { return }
        self.finished = nil
        finished.resume(returning: exitCode)
    }

    /// The work a stop waits for before the agent's last steps (`run()`), each in words.
    var stopPending: [String] {
        var pending: [String] = []
        if !pushTasks.isEmpty { pending.append("\(pushTasks.count) modify request(s)") }
        if rounds.running { pending.append("a sync round") }
        if !transfers.uploads.isEmpty { pending.append("\(transfers.uploads.count) upload(s)") }
        if !rounds.fetching.isEmpty { pending.append("\(rounds.fetching.count) fetch(es)") }
        if !merge.settling.isEmpty { pending.append("\(merge.settling.count) merge(s)") }
        if !prefetch.isIdle { pending.append("files fetched ahead") }
        if sharedConflictsTask != nil { pending.append("conflict records being sent") }
        return pending
    }

    private func saySlowStop() {
        let seconds = String(format: "%.0f", Double(Clock.monotonic() - stopWait.since) / 1e9)
        if finished == nil {
            logger.warning("still stopping after \(seconds) s: waiting for \(stopWait.awaiting ?? "its last steps")" + replicaState)
        } else if stopPending.isEmpty {
            // Everything ended, but the last of it did not say so: a bug, which need not hold the stop.
            logger.warning("still stopping after \(seconds) s with nothing left to wait for (a bug); stopping now")
            finishIfIdle()
        } else {
            logger.warning("still stopping after \(seconds) s: waiting for \(stopPending.joined(separator: ", "))")
        }
    }
}
