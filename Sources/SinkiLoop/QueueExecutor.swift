import Dispatch
import SinkiSupport
import Synchronization

/// A serial executor backed by a private dispatch queue: actors that do blocking work (SQLite,
/// hashing, file writes) run here, off the event loop.
public final class QueueExecutor: SerialExecutor {
    private let queue: DispatchQueue
    /// When the job running now began (CLOCK_MONOTONIC nanoseconds), 0 while none runs: a stop that
    /// waits on this actor can tell a queue held by one job that does not end from an actor that only
    /// awaits something else.
    private let jobStarted = Atomic<Int64>(0)

    public init(label: String) { queue = DispatchQueue(label: label) }

    public func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        queue.async { [self] in
            jobStarted.store(Clock.monotonic(), ordering: .relaxed)
            unowned.runSynchronously(on: executor)
            jobStarted.store(0, ordering: .relaxed)
        }
    }

    public func checkIsolated() {
        dispatchPrecondition(condition: .onQueue(queue))
    }

    /// How long the job running now has run, in nanoseconds; nil when the queue runs none.
    public var runningFor: Int64? {
        let started = jobStarted.load(ordering: .relaxed)
        return started == 0 ? nil : Clock.monotonic() - started
    }
}
