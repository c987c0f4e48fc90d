import Testing
@testable import SinkiAgent

/// Retries against an unreachable server: growing, capped, jittered, and back to the start once
/// the server answers.
@Suite struct BackoffTests {
    /// A clock the test moves: each retry waits out its delay on it.
    final class TestClock: @unchecked Sendable {
        // @unchecked: used by one test's thread only.
        var now: Int64 = 1_000_000_000
    }

    @Test func aSecondApartForTheFirstMinuteThenGrowingToTheCap() {
        let clock = TestClock()
        var backoff = Backoff(clock: { clock.now })
        // A restarted server is found about a second after it answers, for a minute of outage.
        let steps = [0.5] + Array(repeating: 1.0, count: 60) + [2, 4, 8, 16, 30, 30, 30]
        for (index, step) in steps.enumerated() {
            let delay = backoff.next()
            clock.now += Int64(step * 1e9)
            #expect(delay >= step * 0.75 && delay <= step * 1.25, "delay \(delay) for step \(step) (attempt \(index + 1))")
        }
        #expect(backoff.attempt == steps.count)
    }

    /// Retries that end early (woken by another request's answer, or failing at once) must not use the
    /// first minute up: the quick steps last a minute of wall time too.
    @Test func retriesThatEndEarlyKeepTheQuickStepsForAMinute() {
        let clock = TestClock()
        var backoff = Backoff(clock: { clock.now })
        for attempt in 1...200 {
            let delay = backoff.next()
            clock.now += 100_000_000 // each try ended after 0.1 s
            if attempt > 1 { #expect(delay >= 0.75 && delay <= 1.25, "attempt \(attempt) waited \(delay) s with 20 s gone") }
        }
        clock.now += 41_000_000_000
        _ = backoff.next()
        #expect(backoff.next() >= 1.5, "past the minute the steps grow")
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
