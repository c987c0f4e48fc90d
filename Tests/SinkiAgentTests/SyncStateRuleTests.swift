import SinkiControl
import Testing
@testable import SinkiAgent

/// "Up to date" only when the feed is applied, nothing waits to be sent or applied, and the last
/// full comparison found the same as the server.
@Suite struct SyncStateRuleTests {
    static func change(_ cause: String, attempts: Int = 1) -> NotAppliedChange {
        NotAppliedChange(path: "R/f", cause: cause, reason: "why", attempts: attempts, since: 0, nextAttempt: nil)
    }

    @Test func nothingWaitingIsUpToDate() {
        #expect(SyncStateRule.decide(SyncStateFacts()).state == .upToDate)
    }

    @Test func aRemoteChangeNotAppliedIsNeverUpToDate() {
        var facts = SyncStateFacts()
        facts.notApplied = [Self.change("no-space")]
        facts.notAppliedCount = 1
        let (state, reason) = SyncStateRule.decide(facts)
        #expect(state == .error)
        #expect(reason?.contains("1 remote change(s) not applied: R/f: why") == true)
        // A cause that passes on its own is syncing, until it has failed a few times.
        facts.notApplied = [Self.change("busy")]
        #expect(SyncStateRule.decide(facts).state == .syncing)
        facts.notApplied = [Self.change("busy", attempts: 5)]
        #expect(SyncStateRule.decide(facts).state == .error)
        // Counted even when none is listed (the list is capped).
        facts.notApplied = []
        facts.notAppliedCount = 3
        #expect(SyncStateRule.decide(facts).state == .syncing)
    }

    @Test func pathsStillDifferingAfterAComparisonAreAnError() {
        var facts = SyncStateFacts()
        facts.differing = 2
        #expect(SyncStateRule.decide(facts).state == .error)
        facts.differing = 0
        facts.verifying = true
        #expect(SyncStateRule.decide(facts) == (.syncing, "comparing with the server again after repairs"))
    }

    @Test func theFeedAndTheOutboxMustBeDone() {
        var facts = SyncStateFacts()
        facts.caughtUp = false
        #expect(SyncStateRule.decide(facts).state == .syncing)
        facts.caughtUp = true
        facts.toSend = 4
        #expect(SyncStateRule.decide(facts) == (.syncing, "4 local change(s) to send"))
        facts.toSend = 0
        facts.refused = 1
        #expect(SyncStateRule.decide(facts) == (.upToDate, "1 change(s) refused by the server (sinkid retry)"))
    }

    @Test func aLongPushSaysHowFarItIs() {
        var facts = SyncStateFacts()
        facts.toSend = 75_000
        // Two seconds in, 25,000 sent: 12,500 a second, six seconds left.
        var run = PushProgress(startedAt: 0)
        run.took(1_000, bytes: 64_000, savedTotal: 1_500)  // 500 taken before this run began
        run.took(24_000, bytes: 1_536_000, savedTotal: 25_500)
        facts.progress = run.view(pending: 75_000, savedTotal: 25_500, now: 2_000_000_000)
        #expect(SyncStateRule.decide(facts) == (.syncing, "75000 local change(s) to send; 25,000 of 100,000 sent (1.5 MiB), 12,500/s, about 6s left"))
        #expect(run.sentWords(now: 2_000_000_000) == "25,000 local change(s) sent (1.5 MiB), 12,500/s")
        // Before anything is sent there is no rate to tell, and the plain count stands.
        facts.progress = PushProgress(startedAt: 0).view(pending: 75_000, savedTotal: 500, now: 100_000_000)
        #expect(SyncStateRule.decide(facts) == (.syncing, "75000 local change(s) to send"))
        // Nothing to send: up to date, whatever the run says.
        facts.toSend = 0
        facts.progress = nil
        #expect(SyncStateRule.decide(facts).state == .upToDate)
    }

    @Test func safetyPauseAndScanComeFirst() {
        var facts = SyncStateFacts()
        facts.notAppliedCount = 1
        facts.paused = true
        #expect(SyncStateRule.decide(facts).state == .paused)
        facts.safetyStop = "gone"
        #expect(SyncStateRule.decide(facts).state == .stoppedForSafety)
    }
}
