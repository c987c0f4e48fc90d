import Testing
@testable import SinkiAgent

/// Retries against an unreachable server: growing, capped, jittered, and back to the start once
/// the server answers.
@Suite struct BackoffTests {
    @Test func aSecondApartForTheFirstMinuteThenGrowingToTheCap() {
        var backoff = Backoff()
        // A restarted server is found about a second after it answers, for a minute of outage.
        let steps = [0.5] + Array(repeating: 1.0, count: 60) + [2, 4, 8, 16, 30, 30, 30]
        for (index, step) in steps.enumerated() {
            let delay = backoff.next()
            #expect(delay >= step * 0.75 && delay <= step * 1.25, "delay \(delay) for step \(step) (attempt \(index + 1))")
        }
        #expect(backoff.attempt == steps.count)
    }

    @Test func anUpcomingDelayCountsNoAttempt() {
        var backoff = Backoff(steps: [1, 100], jitter: 0)
        #expect(backoff.upcoming() == 1)
        #expect(backoff.upcoming() == 1)
        #expect(backoff.next() == 1)
        #expect(backoff.upcoming() == 100)
        #expect(backoff.attempt == 1)
    }

    @Test func jitterSpreadsAgentsThatFailedTogether() {
        let firsts = (0..<50).map { _ in var backoff = Backoff(steps: [10]); return backoff.next() }
        #expect(Set(firsts).count > 40, "fifty agents must not retry in step")
        #expect(firsts.allSatisfy { $0 >= 7.5 && $0 <= 12.5 })
    }

    @Test func aResetStartsFromTheFirstStep() {
        var backoff = Backoff(steps: [1, 100], jitter: 0)
        #expect(backoff.next() == 1)
        #expect(backoff.next() == 100)
        backoff.reset()
        #expect(backoff.next() == 1)
    }
}
