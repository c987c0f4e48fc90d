import Testing
@testable import SinkiAgent

/// Retries against an unreachable server: growing, capped, jittered, and back to the start once
/// the server answers.
@Suite struct BackoffTests {
    @Test func delaysGrowStayWithinTheirJitterAndStopAtTheCap() {
        var backoff = Backoff()
        let steps = [0.5, 1, 2, 4, 8, 16, 30, 30, 30]
        for step in steps {
            let delay = backoff.next()
            #expect(delay >= step * 0.75 && delay <= step * 1.25, "delay \(delay) for step \(step)")
        }
        #expect(backoff.attempt == steps.count)
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
