import Dispatch
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
        try await waitFor("the job to hold the queue") { (actor.executor.runningFor ?? 0) >= 50_000_000 }
        gate.signal()
        await held.value
        try await waitFor("the queue to be idle") { actor.executor.runningFor == nil }
    }

    /// Generous: in a loaded full run the task that takes the job to the queue waited over 10 s for a
    /// thread of the shared pool, which other suites' blocking waits held.
    private func waitFor(_ what: String, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while !condition() {
            if ContinuousClock.now > deadline { Issue.record("timed out waiting for \(what)"); return }
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}
