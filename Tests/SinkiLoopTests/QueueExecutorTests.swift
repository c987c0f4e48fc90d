import Dispatch
import SinkiTestSupport
import Testing
@testable import SinkiLoop

/// An actor on a queue of its own, as the agent's replica is.
actor OnQueue {
    nonisolated let executor = QueueExecutor(label: "sinki-test-queue")
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// Blocks the queue until `gate` is signalled.
    func hold(_ gate: DispatchSemaphore) { gate.wait() }
}

@Suite struct QueueExecutorTests {
    /// A stop that waits on the replica says whether one call holds its queue: the executor knows how
    /// long the job it runs has run, and that none runs once it ends.
    @Test func aJobThatHoldsTheQueueIsSeenWithHowLongItRan() async throws {
        let actor = OnQueue()
        #expect(actor.executor.runningFor == nil)
        let gate = DispatchSemaphore(value: 0)
        let held = Task { await actor.hold(gate) }
        // Generous: in a loaded full run the task that takes the job to the queue waited over 10 s for
        // a thread of the shared pool, which other suites' blocking waits held.
        do {
            try await waitUntil("the job to hold the queue", timeout: 60, interval: 0.005) { (actor.executor.runningFor ?? 0) >= 50_000_000 }
        } catch {
            gate.signal()  // a queue left held would keep a thread of the test process blocked
            throw error
        }
        gate.signal()
        await held.value
        try await waitUntil("the queue to be idle", timeout: 60, interval: 0.005) { actor.executor.runningFor == nil }
    }
}
