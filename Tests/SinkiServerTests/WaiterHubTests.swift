import Foundation
@testable import SinkiServer
import SinkiSupport
import SinkiTestSupport
import Synchronization
import Testing

/// The hub on its own, with fake connections: a counter stands for suspend and resume.
@Suite struct WaiterHubTests {
    final class FakeConnection: Sendable {
        let slot = WaiterHub.WakeSlot()
        let suspended = Atomic<Int>(0)
        let resumed = Atomic<Int>(0)
        func suspend() { suspended.add(1, ordering: .relaxed) }
        @Sendable func resume() { resumed.add(1, ordering: .relaxed) }
        var resumeCount: Int { resumed.load(ordering: .relaxed) }
    }

    private func park(_ hub: WaiterHub, _ user: String, _ connection: FakeConnection, seconds: Double = 60) -> WaiterHub.ParkResult {
        hub.park(user: user, seen: hub.generation(of: user), deadline: Clock.monotonic() + Int64(seconds * 1e9), socket: -1,
                 slot: connection.slot, suspend: connection.suspend, resume: connection.resume)
    }

    @Test func aCommitResumesTheUsersWaitersOnce() throws {
        let hub = try WaiterHub(logger: testLogger())
        defer { hub.shutdown() }
        let alice = [FakeConnection(), FakeConnection()]
        let bob = FakeConnection()
        #expect(alice.map { park(hub, "alice", $0) }.allSatisfy { $0 != .stopping })
        #expect(park(hub, "bob", bob) != .stopping)
        #expect(hub.waitingCount == 3)
        hub.notify(user: "alice")
        #expect(alice.map(\.resumeCount) == [1, 1])
        #expect(bob.resumeCount == 0)
        #expect(alice.allSatisfy { $0.slot.reason == .changed })
        hub.notify(user: "alice")
        #expect(alice.map(\.resumeCount) == [1, 1])
        #expect(hub.waitingCount == 1)
    }

    @Test func parkingIsRefusedWhenACommitCameInSinceTheStoreWasAsked() throws {
        let hub = try WaiterHub(logger: testLogger())
        defer { hub.shutdown() }
        let seen = hub.generation(of: "alice")
        hub.notify(user: "alice")
        let connection = FakeConnection()
        let result = hub.park(user: "alice", seen: seen, deadline: Clock.monotonic() + 1_000_000_000, socket: -1,
                              slot: connection.slot, suspend: connection.suspend, resume: connection.resume)
        #expect(result == .changed)
        #expect(connection.suspended.load(ordering: .relaxed) == 0)
        // Another user's commit does not matter.
        hub.notify(user: "bob")
        #expect(park(hub, "alice", connection) != .changed)
    }

    @Test func deadlinesResumeInOrderOnTime() throws {
        let hub = try WaiterHub(logger: testLogger())
        defer { hub.shutdown() }
        let late = FakeConnection()
        let early = FakeConnection()
        let began = Date()
        guard case .parked = park(hub, "u", late, seconds: 0.4), case .parked = park(hub, "u", early, seconds: 0.1) else {
            Issue.record("not parked")
            return
        }
        try waitUntilSync("the early waiter's deadline", timeout: 2, interval: 0.005) { early.resumeCount == 1 }
        let earlyAt = Date().timeIntervalSince(began)
        #expect(late.resumeCount == 0)
        try waitUntilSync("the late waiter's deadline", timeout: 2, interval: 0.005) { late.resumeCount == 1 }
        let lateAt = Date().timeIntervalSince(began)
        #expect(earlyAt >= 0.1 && earlyAt < 0.25, "early waiter resumed after \(earlyAt) s")
        #expect(lateAt >= 0.4 && lateAt < 0.6, "late waiter resumed after \(lateAt) s")
        #expect(early.slot.reason == .timeout && late.slot.reason == .timeout)
        #expect(hub.waitingCount == 0)
    }

    @Test func shutdownResumesEveryoneAndRefusesNewWaiters() throws {
        let hub = try WaiterHub(logger: testLogger())
        let connections = (0..<10).map { _ in FakeConnection() }
        for (index, connection) in connections.enumerated() { _ = park(hub, "user\(index % 3)", connection) }
        hub.shutdown()
        #expect(connections.allSatisfy { $0.resumeCount == 1 && $0.slot.reason == .shutdown })
        #expect(park(hub, "user0", FakeConnection()) == .stopping)
        hub.shutdown()
    }

    @Test func aWaiterWokenEarlyLeavesNoTimerBehind() throws {
        let hub = try WaiterHub(logger: testLogger())
        defer { hub.shutdown() }
        // Many short polls, each answered by a commit: their stale deadlines must not resume anything.
        let connections = (0..<2_000).map { _ in FakeConnection() }
        for connection in connections {
            _ = park(hub, "u", connection, seconds: 0.2)
            hub.notify(user: "u")
        }
        // A later deadline: the hub handles deadlines in order, so once this one fired every stale one
        // has surfaced too, and none may have resumed a connection a second time.
        let fresh = FakeConnection()
        _ = park(hub, "u", fresh, seconds: 0.3)
        try waitUntilSync("the last deadline", timeout: 3) { fresh.resumeCount == 1 }
        #expect(connections.allSatisfy { $0.resumeCount == 1 })
    }

    @Test func theDeadlineHeapPopsInOrder() {
        var heap = DeadlineHeap()
        var generator = SystemRandomNumberGenerator()
        let deadlines = (0..<500).map { _ in Int64.random(in: 0..<1_000_000, using: &generator) }
        for (index, deadline) in deadlines.enumerated() { heap.push(deadline: deadline, id: UInt64(index)) }
        var popped: [Int64] = []
        while let entry = heap.popMinimum() { popped.append(entry.deadline) }
        #expect(popped == deadlines.sorted())
    }
}
