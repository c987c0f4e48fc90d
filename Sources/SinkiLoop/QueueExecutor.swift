import Dispatch

/// A serial executor backed by a private dispatch queue: actors that do blocking work (SQLite,
/// hashing, file writes) run here, off the event loop.
public final class QueueExecutor: SerialExecutor {
    private let queue: DispatchQueue
    public init(label: String) { queue = DispatchQueue(label: label) }

    public func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        queue.async { unowned.runSynchronously(on: executor) }
    }

    public func checkIsolated() {
        dispatchPrecondition(condition: .onQueue(queue))
    }
}
