import SinkiLoop
import SinkiRecord
import SinkiState
import SinkiSupport

/// When paths whose last operation failed are planned again: one timer for the soonest due (none
/// armed while nothing waits, so an idle agent has no wake-up), and at once after an event that may
/// have removed their cause.
struct RetrySchedule {
    var timer: LoopTimer?
    /// When each root last made its failures due because of a local event (a burst makes them due once).
    var lastEvent: [RootID: Int64] = [:]
    /// Events closer together than this make a root's failures due once.
    static let eventSpacing: Int64 = 200_000_000
}

extension Agent {
    /// Arms the timer for the soonest failure due (or disarms it when none waits).
    func scheduleRetry() {
        guard let replica, !stopping else { return }
        Task {
            let next = await replica.nextFailureDue
            self.armRetry(at: next)
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
            self.assumeIsolated { $0.failuresDue() }
        }
    }

    /// The soonest failure is due: a new pass plans it again.
    private func failuresDue() {
        Task {
            await replica?.restartPass()
            pumpSync()
        }
    }

    /// Something changed on disk in `root`: a folder made, a file closed, space freed. The remote
    /// changes that failed there may go now.
    func causeMayHaveGone(root: RootID) {
        guard let replica else { return }
        let now = Clock.monotonic()
        if let last = retries.lastEvent[root], now - last < RetrySchedule.eventSpacing { return }
        retries.lastEvent[root] = now
        let name = configuration.roots[root.index].name
        Task {
            let made = await replica.retryFailures(under: name, direction: .down)
            if !made.isEmpty { self.pumpSync() }
        }
    }

    /// The index of the root a record path belongs to.
    func rootIndex(of path: String) -> Int? {
        guard let name = PathText.firstComponent(path) else { return nil }
        return configuration.roots.firstIndex { PathText.same($0.name, name) }
    }
}
