@testable import SinkiAgent
import Testing

/// A batch carries about a quarter second of sending at the pace the last ones went.
@Suite struct PushPaceTests {
    static let configured = 8 << 20

    @Test func theFirstBatchCarriesTheFloorAndMeasuresThePace() {
        #expect(PushPace().maxBytes(configured: Self.configured) == PushPace.floor)
        // A configured bound below the floor still holds.
        #expect(PushPace().maxBytes(configured: 100_000) == 100_000)
    }

    @Test func aFastLinkGetsTheConfiguredBoundAndASlowOneTheFloor() {
        var loopback = PushPace()
        loopback.answered(bodyBytes: 350_000, seconds: 0.004)
        #expect(loopback.maxBytes(configured: Self.configured) == Self.configured)
        var slow = PushPace()
        slow.answered(bodyBytes: 350_000, seconds: 2)
        #expect(slow.maxBytes(configured: Self.configured) == PushPace.floor)
    }

    @Test func inBetweenABatchIsAQuarterSecondAtTheSmoothedPace() {
        var pace = PushPace()
        // 100 Mbit/s: 12.5 MB a second; a batch of 3.125 MB.
        pace.answered(bodyBytes: 1_250_000, seconds: 0.1)
        #expect(pace.maxBytes(configured: Self.configured) == 3_125_000)
        // Half that pace once: the two averaged.
        pace.answered(bodyBytes: 625_000, seconds: 0.1)
        #expect(pace.bytesPerSecond == 9_375_000)
        #expect(pace.maxBytes(configured: Self.configured) == 2_343_750)
        // Two requests sharing the link each went at half its pace.
        var shared = PushPace()
        shared.answered(bodyBytes: 625_000, seconds: 0.1, sharing: 2)
        #expect(shared.maxBytes(configured: Self.configured) == 3_125_000)
        // Nothing measured from an empty body or no time.
        pace.answered(bodyBytes: 0, seconds: 0.1)
        pace.answered(bodyBytes: 1000, seconds: 0)
        #expect(pace.bytesPerSecond == 9_375_000)
    }

    @Test func requestsSharingTheLinkEachCarryTheirShareOfTheQuarterSecond() {
        var pace = PushPace()
        // 100 Mbit/s: three requests at once each carry a third of 3.125 MB, so that each commits a
        // quarter second after its first byte, not three quarters.
        pace.answered(bodyBytes: 1_250_000, seconds: 0.1)
        #expect(pace.maxBytes(configured: Self.configured, depth: 3) == 1_041_666)
        #expect(pace.maxBytes(configured: Self.configured, depth: 1) == 3_125_000)
        // Never below the floor, however many share.
        #expect(pace.maxBytes(configured: Self.configured, depth: 100) == PushPace.floor)
    }
}
