import Glibc
import SinkiConfig
import SinkiControl
import SinkiLoop
import SinkiRecord
import SinkiState
import SinkiSupport
import SinkiWatch

extension Agent {
    /// Gives the agent what only the command line knows: its version, and how to read the config
    /// again on SIGHUP. Call before `run()`.
    public func prepareControl(version: String, settings: ResolvedConfig?, reloader: ConfigReloader?) {
        control.version = version
        control.settings = settings
        control.reloader = reloader
    }

    /// Opens the control socket, listens for SIGHUP and finds systemd's notify socket. A control
    /// socket that cannot be made is logged, not fatal: syncing does not need it.
    func startControl() {
        control.startedAt = Clock.now()
        control.notifier = ServiceNotifier()
        control.hangup = LoopSignal(loop: loop, signal: SIGHUP) { [unowned self] in
            self.assumeIsolated { $0.reload() }
        }
        let server = ControlServer(loop: loop, stateDirectory: configuration.stateDirectory, handler: self, logger: logger.child("control"))
        do {
            try server.assumeIsolated { try $0.start() }
            control.server = server
        } catch {
            logger.error("\(error); sinkid status and the other commands cannot reach this agent")
        }
    }

    func stopControl() {
        control.server?.assumeIsolated { $0.stop() }
        control.server = nil
        control.hangup = nil
    }

    /// The first scan is done: systemd may consider the service started.
    func scanFinished() {
        control.scanned = true
        control.notifier?.ready(status: serviceStatus)
    }

    func contactMade() {
        control.lastContact = Clock.now()
        control.notifier?.status(serviceStatus)
    }

    func contactLost() {
        control.notifier?.status(serviceStatus)
    }

    func controlStopping() {
        control.notifier?.stopping()
    }

    /// One line for systemd's `STATUS=`.
    var serviceStatus: String {
        if !control.safetyStops.isEmpty { return "stopped for safety: \(control.safetyStops.values.sorted().joined(separator: "; ")); confirm with sinkid resume" }
        if control.paused { return "paused" + (control.pausedSince.map { " since \(Clock.iso8601($0))" } ?? "") + " (sinkid resume)" }
        if !pausedRootNames.isEmpty { return "paused: " + pausedRootNames.joined(separator: ", ") + " (sinkid resume ROOT); the other roots sync" }
        if !control.scanned { return "scanning" }
        if reachable == false { return "server \(serverURL) unreachable" + (outage.map { ": \($0.cause)" } ?? "") + "; retrying" }
        let roots = "syncing \(configuration.roots.count) root(s) with \(serverURL)"
        guard let run = pushRun, run.sent > 0 else { return roots }
        return roots + "; " + run.sentWords(now: Clock.monotonic())
    }

    /// Stops the pull loop and starts a new one once the old one has ended (after a pause, or to
    /// ask the server again now instead of waiting out a long-poll).
    func restartPull() async {
        let old = pullTask
        old?.cancel()
        endRetryWaits()
        await old?.value
        guard control.scanned, !stopping, !control.paused, pullTask == old else { return }
        pullTask = Task { await self.pullLoop() }
    }
}

extension Agent: ControlHandler {
    public func status() async -> StatusReport {
        var facts: ReplicaStatus?
        var problem: String?
        var waiting: (conflicts: [WaitingConflict], held: Int) = ([], 0)
        var listed: [ListedConflict] = []
        var conflictRecords = 0
        do {
            facts = try await replica?.statusFacts(limit: PendingSummary.listed)
            waiting = try await replica?.waitingConflicts() ?? ([], 0)
            listed = try await replica?.conflictList() ?? []
            conflictRecords = try await replica?.sharedConflictsToSend() ?? 0
        } catch {
            facts = nil
            problem = "cannot read the state database: \(error)"
        }
        let pendingCount = facts?.pendingCount ?? 0
        let notApplied = (facts?.notApplied ?? []).map {
            NotAppliedChange(path: $0.path, cause: $0.failure.cause.rawValue, reason: $0.failure.message, attempts: $0.attempts,
                             since: $0.since, nextAttempt: $0.nextAttempt)
        }
        let verifySummary = self.verifySummary
        var overall = SyncStateFacts()
        overall.safetyStop = control.safetyStops.isEmpty ? nil : control.safetyStops.values.sorted().joined(separator: "; ") + "; confirm with sinkid resume"
        overall.paused = control.paused
        overall.pausedSince = control.pausedSince
        overall.pausedRoots = control.pausedRoots.filter { entry in configuration.roots.contains { $0.name == entry.key } }
        overall.scanned = control.scanned
        overall.problem = problem
        if reachable == false { overall.unreachable = (outage ?? Outage(since: Clock.now(), cause: "no answer", failures: 1)).words(server: serverURL) }
        overall.tokenRefused = access.refused
        overall.rateLimitedSeconds = access.rateLimitRemaining(now: Clock.now())
        overall.storageFull = access.storageFull
        overall.caughtUp = caughtUp
        overall.refused = facts?.refusedCount ?? 0
        overall.toSend = max(0, pendingCount - overall.refused - waiting.held)
        overall.toApply = max(0, (facts?.toApplyCount ?? 0) - (facts?.notAppliedCount ?? 0) - waiting.conflicts.count)
        overall.inFlight = facts?.inFlight ?? 0
        overall.progress = overall.toSend > 0
            ? pushRun?.view(pending: overall.toSend, savedTotal: facts?.savedTotal ?? 0, now: Clock.monotonic()) : nil
        let movingDown = transfers.moving.values.filter { $0.direction == .download }
        // Changes that waited from before (a restart, a paused root), or chunks fetched ahead of their
        // record (streaming), begin a run when first seen.
        if (overall.toApply > 0 || !movingDown.isEmpty) && pullRun == nil { pullRun = PullProgress(startedAt: Clock.monotonic()) }
        if overall.toApply > 0 || !movingDown.isEmpty, let run = pullRun {
            overall.download = run.view(toApply: overall.toApply, toApplyBytes: facts?.toApplyBytes ?? 0,
                                        moving: movingDown.reduce(0) { $0 + $1.done }, now: Clock.monotonic())
        }
        overall.waitingConflicts = listed.count
        overall.conflictRecords = conflictRecords
        overall.notApplied = notApplied
        overall.notAppliedCount = facts?.notAppliedCount ?? 0
        overall.differing = verifySummary.differing.count
        overall.verifying = verify.running && verify.repairedThisRun > 0
        let digestSummary = self.digestSummary
        overall.transfersRunning = transfers.moving.count
        overall.checking = !digestSummary.matched
        overall.digestFailure = digestSummary.matched ? nil : digestSummary.failure.flatMap { $0.hasPrefix("cannot compare") ? nil : $0 }
        let (state, reason) = SyncStateRule.decide(overall)
        var roots: [RootStatus] = []
        for (index, root) in configuration.roots.enumerated() {
            let totals = facts?.roots.first { $0.name == root.name }
            var mine = overall
            mine.safetyStop = control.safetyStops[RootID(index)]
            mine.pausedRoots = overall.pausedRoots.filter { $0.key == root.name }
            if totals?.folderMissing == true { mine.problem = "the folder \(root.path) is missing" }
            mine.notApplied = notApplied.filter { PathText.isWithin($0.path, root.name) }
            mine.notAppliedCount = totals?.notApplied ?? 0
            mine.toSend = (totals?.pending ?? 0) > 0 ? overall.toSend : 0
            mine.differing = verifySummary.differing.filter { PathText.isWithin($0, root.name) }.count
            mine.toApply = (totals?.toApply ?? 0) > 0 ? overall.toApply : 0
            mine.transfersRunning = transfers.moving.keys.filter { PathText.isWithin(TransferBook.Key.path(of: $0), root.name) }.count
            let (rootState, rootReason) = SyncStateRule.decide(mine)
            roots.append(RootStatus(name: root.name, path: root.path, files: totals?.files ?? 0, bytes: totals?.bytes ?? 0,
                                    state: rootState, reason: rootReason))
        }
        let refusals = facts?.refused ?? []
        var changes = refusals.map { failed in
            PendingChange(path: failed.path, kind: .modify, queuedAt: failed.since, attempts: failed.attempts, refused: failed.failure.message)
        }
        let now = Clock.now()
        for row in facts?.pending ?? [] where !refusals.contains(where: { $0.path == row.path }) && changes.count < PendingSummary.listed {
            changes.append(PendingChange(path: row.path, kind: ChangeKind(rawValue: row.kind) ?? .modify,
                                         queuedAt: row.modifiedAt > 0 ? row.modifiedAt : now))
        }
        let lastProblem = logger.lastProblem.map { ProblemNote(at: $0.at, level: $0.level.name, message: $0.message, count: $0.count) }
        return StatusReport(
            generatedAt: Clock.now(),
            agent: AgentSummary(running: true, pid: getpid(), version: control.version, device: configuration.device,
                                startedAt: control.startedAt, stateDirectory: configuration.stateDirectory, state: state, reason: reason),
            server: ServerSummary(url: serverURL, embedded: configuration.serverURL == nil, reachable: reachable,
                                  lastContact: control.lastContact, lastError: lastProblem, tokenRefused: access.refused,
                                  retryAt: access.rateLimitRemaining(now: Clock.now()) == nil ? nil : access.retryAt,
                                  storageFull: access.storageFull),
            roots: roots,
            pending: PendingSummary(count: pendingCount, refused: facts?.refusedCount ?? 0, changes: changes),
            remote: RemoteSummary(upToDate: caughtUp && !control.paused && overall.pausedRoots.isEmpty && overall.toApply == 0 && (facts?.notAppliedCount ?? 0) == 0
                                  && digestSummary.matched && transfers.moving.isEmpty && overall.inFlight == 0, position: facts?.feedToken),
            skipped: SkippedSummary(count: facts?.skippedCount ?? 0, paths: facts?.skipped.map(\.path) ?? [], reasons: facts?.skipped.map(\.reason) ?? []),
            ignored: facts?.ignoredCount ?? 0,
            transfers: transfers.statuses(),
            // Only the `ask` rule leaves conflicts for `resolve`; every other is settled when found.
            conflicts: listed.map(ConflictEntry.init),
            notApplied: NotAppliedSummary(count: facts?.notAppliedCount ?? 0, changes: notApplied),
            verify: verifySummary,
            digest: digestSummary,
            progress: ProgressSummary(upload: overall.progress?.summary, download: overall.download))
    }

    public func pause(root name: String?) async throws(ControlError) -> ControlAck {
        if let name { return try await pauseRoot(name) }
        guard !control.paused else { return ControlAck("already paused; sinkid resume to go on") }
        let since = Clock.now()
        do {
            try await replica?.setPausedSince(since)
        } catch {
            return ControlAck("cannot keep the pause in the state database: \(error); not paused")
        }
        control.paused = true
        control.pausedSince = since
        pullTask?.cancel()
        endRetryWaits()
        cancelUploads()
        cancelPrefetches()
        logger.info("paused (sinkid pause): nothing is sent or applied until sinkid resume, also after a restart")
        control.notifier?.status(serviceStatus)
        return ControlAck("paused: local changes are still noted, but nothing is sent or applied until sinkid resume (also after a restart)")
    }

    public func resume(root name: String?) async throws(ControlError) -> ControlAck {
        if let name { return try await resumeRoot(name) }
        var done: [String] = []
        if !control.safetyStops.isEmpty {
            let names = control.safetyStops.keys.sorted().map { configuration.roots[$0.index].name }
            await confirmSafetyStops()
            logger.info("safety stop confirmed (sinkid resume) for \(names.joined(separator: ", "))")
            done.append("safety stop confirmed for \(names.joined(separator: ", ")): what is there now is synced")
        }
        if control.paused {
            do {
                try await replica?.setPausedSince(nil)
            } catch {
                return ControlAck("cannot clear the pause in the state database: \(error); still paused")
            }
            control.paused = false
            control.pausedSince = nil
            logger.info("resumed (sinkid resume)")
            done.append("resumed")
        }
        let roots = pausedRootNames
        if !roots.isEmpty {
            var left = control.pausedRoots
            for name in roots { left[name] = nil }
            do { try await replica?.setPausedRoots(left) } catch {
                return ControlAck("cannot clear the pause of \(roots.joined(separator: ", ")) in the state database: \(error); still paused")
            }
            control.pausedRoots = left
            logger.info("resumed \(roots.joined(separator: ", ")) (sinkid resume)")
            done.append("resumed \(roots.joined(separator: ", "))")
        }
        if !done.isEmpty {
            await restartPull()
            pumpSync()
        }
        control.notifier?.status(serviceStatus)
        return ControlAck(done.isEmpty ? "not paused; nothing to resume" : done.joined(separator: "; "))
    }

    public func syncNow(verify wanted: Bool) async -> ControlAck {
        guard control.scanned else { return ControlAck("the first scan is still running; changes are sent when it ends") }
        if wanted {
            guard !control.paused else { return ControlAck("paused: nothing is compared until sinkid resume") }
            guard caughtUp else { return ControlAck("the server's changes are still being read; compare once they are (sinkid status)") }
            let outcome = await verifyNow("sinkid sync --verify")
            switch outcome.result {
            case "same": return ControlAck("compared every record with \(serverURL): the same")
            case "repaired": return ControlAck("compared every record with \(serverURL): \(outcome.repaired) difference(s) repaired; now the same")
            default: return ControlAck("compared with \(serverURL): \(outcome.detail ?? outcome.result)")
            }
        }
        var rescan = WatchBatch()
        rescan.overflow = true
        handleWatch(rescan)
        if control.paused {
            return ControlAck("looking at every root again; paused, so nothing is sent or applied until sinkid resume")
        }
        backoff.reset()
        storageDueNow()
        logger.info("sync now (sinkid sync): looking at every root and asking the server again")
        // The feed asks without waiting; restartPull ends its backoff sleep.
        feed.askNow = true
        await restartPull()
        pumpSync()
        return ControlAck("looking at every root again and asking \(serverURL) for changes now")
    }

    public func retry(path: String?) async throws(ControlError) -> [String] {
        guard let replica else { throw ControlError(.unavailable, "the agent is not ready") }
        if access.storageFull != nil {
            storageDueNow()
            pumpSync()
        }
        var paths = await replica.retryFailures(under: path)
        paths += retryTransfers(under: path).filter { !paths.contains($0) }
        if let path, paths.isEmpty {
            throw ControlError(.notFound, "nothing the server refused, no failed transfer and no remote change not applied at or below \(quoted(path)) (sinkid status lists them)")
        }
        if !paths.isEmpty {
            logger.info("retrying \(paths.count) change(s) that failed (sinkid retry)")
            pumpSync()
        }
        return paths
    }

    public func server() async throws(ControlError) -> ServerAccessNote {
        ServerAccessNote(url: serverURL, tokenFile: configuration.tokenFile ?? embeddedTokenPath, caFile: configuration.caFile,
                         device: configuration.device, roots: configuration.roots.map { ($0.name, $0.path) })
    }

    public func conflicts() async throws(ControlError) -> [ConflictEntry] {
        guard let replica else { throw ControlError(.unavailable, "the agent is not ready") }
        do { return try await replica.conflictList().map(ConflictEntry.init) } catch {
            throw ControlError(.failed, "cannot read the conflicts: \(error)")
        }
    }

    public func resolve(path: String, keep: ResolveChoice) async throws(ControlError) -> ControlAck {
        guard let replica else { throw ControlError(.unavailable, "the agent is not ready") }
        guard let choice = KeepChoice(rawValue: keep.rawValue) else { throw ControlError(.badRequest, "bug: unknown choice \(keep)") }
        let result: (applied: [AppliedChange], message: String)?
        do { result = try await replica.resolveWaiting(path, keep: choice) } catch {
            throw ControlError(.failed, "cannot resolve \(quoted(path)): \(error)")
        }
        guard let result else {
            // Found on another device: settled through the server.
            let shared: SharedResolution?
            do { shared = try await replica.sharedResolution(path) } catch {
                throw ControlError(.failed, "cannot resolve \(quoted(path)): \(error)")
            }
            if let shared { return try await resolveShared(shared, keep: choice) }
            throw ControlError(.notFound, "no conflict waits at \(quoted(path)); only the ask rule leaves conflicts for resolve (sinkid conflicts lists them)")
        }
        publishApplied(result.applied)
        pumpSync()
        pumpSharedConflicts()
        return ControlAck(result.message)
    }

    public func checkWatch(_ path: WatchPath) async throws(ControlError) {
        guard let name = path.rootName else { return }
        guard configuration.roots.contains(where: { $0.name == name }) else {
            let names = configuration.roots.map(\.name).joined(separator: ", ")
            throw ControlError(.notFound, "no root named \(quoted(name)) is synced here (roots: \(names))")
        }
    }
}

extension ConflictEntry {
    /// A conflict as the state database keeps it, as the control socket lists it.
    public init(_ waiting: WaitingConflict) {
        self.init(path: waiting.path, remoteDevice: waiting.remote.device, detectedAt: waiting.detectedAt, local: waiting.local,
                  remote: waiting.remote, foundBy: waiting.local.device, shared: waiting.sharedTag > 0)
    }

    /// A conflict found here or on another device, as this one lists it.
    init(_ listed: ListedConflict) {
        self.init(path: listed.path, remoteDevice: listed.remote.device, detectedAt: listed.detectedAt, local: listed.local, remote: listed.remote,
                  foundBy: listed.foundBy, shared: listed.shared)
    }
}
