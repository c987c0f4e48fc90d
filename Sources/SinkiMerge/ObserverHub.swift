import SinkiConfig
import SinkiRecord
import SinkiSupport
import Synchronization

/// Runs the `[observe PATH]` commands for remote changes applied (issue 5), never holding up the
/// caller: `notify` only queues.
///
/// Each observer has a queue of its own and runs one change at a time, in order; at most
/// `Limits.running` observers run at once, taken in turn, so a slow observer holds one slot and
/// never delays the others' queues behind it. A run longer than `Limits.timeout` is killed (its
/// process group); a full queue drops its oldest change. Failures are logged, never retried.
///
/// A hub serves one config: on a reload the agent makes a new hub and lets the old one finish.
public final class ObserverHub: Sendable {
    /// Bounds on what observers may cost.
    public struct Limits: Sendable, Equatable {
        /// Longest a run may take before its process group is killed.
        public var timeout: Duration
        /// Observer commands running at once.
        public var running: Int
        /// Changes waiting per observer; beyond it the oldest is dropped (and logged).
        public var queued: Int
        /// Bytes of stdout and of stderr kept per run for the log.
        public var outputLimit: Int

        public init(timeout: Duration = .seconds(60), running: Int = 4, queued: Int = 1000, outputLimit: Int = 16 << 10) {
            self.timeout = timeout
            self.running = max(1, running)
            self.queued = max(1, queued)
            self.outputLimit = outputLimit
        }
    }

    /// How many runs the hub has seen end, for status and tests.
    public struct Counts: Sendable, Equatable {
        public var succeeded = 0
        /// Runs that exited non-zero, were killed, timed out or could not start.
        public var failed = 0
        /// Changes dropped from a full queue.
        public var dropped = 0
    }

    private struct State {
        var queues: [[ObservedChange]]
        var busy: [Bool]
        var running = 0
        /// Where the turn-taking looks first for the next observer to start.
        var turn = 0
        var counts = Counts()
        var idleWaiters: [CheckedContinuation<Void, Never>] = []

        var isIdle: Bool { running == 0 && queues.allSatisfy(\.isEmpty) }
    }

    private let observers: [ObserverSettings]
    private let environment: [String: String]
    private let limits: Limits
    private let logger: Logger
    private let state: Mutex<State>

    /// `environment` is what every observer starts with (the agent's own); the `SINKI_*` variables
    /// of each change are added to it.
    public init(observers: [ObserverSettings], environment: [String: String], logger: Logger, limits: Limits = Limits()) {
        self.observers = observers
        self.environment = environment
        self.limits = limits
        self.logger = logger
        state = Mutex(State(queues: Array(repeating: [], count: observers.count), busy: Array(repeating: false, count: observers.count)))
    }

    /// Queues `change` for every observer whose path covers it and starts what may start. Returns at
    /// once. The caller passes only changes that came from another device.
    public func notify(_ change: ObservedChange) {
        let matching = observers.indices.filter { observers[$0].matches(change.path) }
        guard !matching.isEmpty else { return }
        var dropped: [Int] = []
        state.withLock { state in
            for index in matching {
                state.queues[index].append(change)
                if state.queues[index].count > limits.queued {
                    state.queues[index].removeFirst()
                    state.counts.dropped += 1
                    dropped.append(index)
                }
            }
        }
        for index in dropped {
            logger.warning("observer [observe \(observers[index].path)] is behind by \(limits.queued) changes: dropped the oldest")
        }
        startWhatMay()
    }

    /// Returns once every queued change has been run (at once when there are none).
    public func idle() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.isIdle { return true }
                state.idleWaiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    public var counts: Counts { state.withLock { $0.counts } }

    private func startWhatMay() {
        let jobs = state.withLock { state -> [(Int, ObservedChange)] in
            var jobs: [(Int, ObservedChange)] = []
            let count = observers.count
            var looked = 0
            while state.running < limits.running, looked < count {
                let index = (state.turn + looked) % count
                looked += 1
                guard !state.busy[index], !state.queues[index].isEmpty else { continue }
                state.busy[index] = true
                state.running += 1
                jobs.append((index, state.queues[index].removeFirst()))
                state.turn = (index + 1) % count
                looked = 0
            }
            return jobs
        }
        for (index, change) in jobs {
            Task { await self.run(index, change) }
        }
    }

    private func run(_ index: Int, _ change: ObservedChange) async {
        let observer = observers[index]
        var environment = self.environment
        for (key, value) in change.environment { environment[key] = value }
        let spec = CommandSpec(observer.exec, substituting: change.placeholders, environment: environment, timeout: limits.timeout,
                               outputLimit: limits.outputLimit, killGroupOnExit: false)
        let result = await CommandRunner.run(spec)
        let ok = result.exitCode == 0
        let line = "observer [observe \(observer.path)] for \(change.event.rawValue) \(quoted(change.path.string)): \(result.summary)"
        if ok { logger.debug(line) } else { logger.warning(line) }
        state.withLock { state in
            state.busy[index] = false
            state.running -= 1
            if ok { state.counts.succeeded += 1 } else { state.counts.failed += 1 }
        }
        startWhatMay()
        let idle = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard state.isIdle else { return [] }
            defer { state.idleWaiters.removeAll() }
            return state.idleWaiters
        }
        for waiter in idle { waiter.resume() }
    }
}
