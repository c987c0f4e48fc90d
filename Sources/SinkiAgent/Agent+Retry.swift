import SinkiLoop
import SinkiRecord
import SinkiState
import SinkiSupport

/// When the remote changes that could not be applied are tried again: one timer for the soonest due
/// (none armed while nothing waits, so an idle agent has no wake-up), and at once after an event that
/// may have removed their cause.
struct RetrySchedule {
    var timer: LoopTimer?
    /// A round of retries runs now; another was asked for meanwhile.
    var running = false
    var wanted = false
    /// When each root last made its changes due because of a local event (a burst of events makes them
    /// due once).
    var lastEvent: [Int: Int64] = [:]

    /// Rounds of one run at most: changes that keep failing wait for their backoff, never spin.
    static let roundsPerRun = 20
    /// Changes applied per round.
    static let batch = 500
    /// Events closer together than this make a root's changes due once.
    static let eventSpacing: Int64 = 200_000_000
}

extension Agent {
    /// Arms the timer for the soonest change not applied (or disarms it when none waits).
    func scheduleRetry() {
        guard let replica, !stopping else { return }
        Task {
            let next = try? await replica.nextUnappliedAttempt()
            self.armRetry(at: next ?? nil)
        }
    }

    private func armRetry(at next: Int64?) {
        guard !stopping, let next else {
            retries.timer?.stop()
            return
        }
        let timer = retries.timer ?? LoopTimer(loop: loop)
        retries.timer = timer
        let wait = max(0, next - Clock.now())
        timer.start(after: UInt64(wait / 1_000_000) + 1) { [unowned self] in
            self.assumeIsolated { $0.startRetry() }
        }
    }

    private func startRetry() {
        Task { await self.retryNotApplied() }
    }

    /// Tries the changes not applied that are due now, through the same path as a feed page.
    func retryNotApplied() async {
        guard !retries.running else {
            retries.wanted = true
            return
        }
        retries.running = true
        defer {
            retries.running = false
            if retries.wanted {
                retries.wanted = false
                Task { await self.retryNotApplied() }
            } else {
                scheduleRetry()
            }
        }
        guard let replica, caughtUp, !stopping, !control.paused, reachable != false else { return }
        for _ in 0..<RetrySchedule.roundsPerRun {
            let due: [UnappliedChange]
            do { due = try await replica.dueUnapplied(limit: RetrySchedule.batch) } catch {
                logger.error("cannot read the changes not applied: \(error)")
                return
            }
            let records = due.map(\.record).filter { control.safetyStops[rootIndex(of: $0.path) ?? -1] == nil }
            if records.isEmpty { return }
            logger.debug("retrying \(records.count) remote change(s) not applied")
            do { try await applyRemote(records, token: nil, retrying: true) } catch {
                if stopping || Task.isCancelled { return }
                logger.warning("cannot retry remote changes not applied: \(error)")
                return
            }
            // The last change kept aside may have gone in: nothing else looks again then.
            await sayIfUpToDate()
        }
    }

    /// Something changed on disk in `root`: a folder made, a file closed, space freed. The changes not
    /// applied there may go now.
    func causeMayHaveGone(root: Int) {
        guard let replica else { return }
        let now = Clock.monotonic()
        if let last = retries.lastEvent[root], now - last < RetrySchedule.eventSpacing { return }
        retries.lastEvent[root] = now
        let name = configuration.roots[root].name
        Task {
            let made = (try? await replica.makeUnappliedDue(under: name, includingInvalid: false)) ?? []
            if !made.isEmpty { await self.retryNotApplied() }
        }
    }

    /// The index of the root a record path belongs to.
    func rootIndex(of path: String) -> Int? {
        guard let name = PathText.firstComponent(path) else { return nil }
        return configuration.roots.firstIndex { PathText.same($0.name, name) }
    }
}
