import Foundation
@testable import SinkiCLI
import Testing

/// The times `sinkid restore --at` takes: RFC 3339, a local time, or an age.
@Suite struct MomentTests {
    static let now: Int64 = 1_795_000_000_000_000_000

    @Test func rfc3339WithOrWithoutAFractionAndAnOffset() {
        #expect(Moment.parse("2026-12-01T18:00:00Z", now: Self.now) == 1_796_148_000_000_000_000)
        #expect(Moment.parse("2026-12-01T18:00:00.250Z", now: Self.now) == 1_796_148_000_250_000_000)
        #expect(Moment.parse("2026-12-01T19:00:00+01:00", now: Self.now) == 1_796_148_000_000_000_000)
    }

    @Test func aLocalTimeIsThisMachinesZone() throws {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = .current
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
        let expected = try #require(formatter.date(from: "2026-12-01 18:00:05")).timeIntervalSince1970
        #expect(Moment.parse("2026-12-01 18:00:05", now: Self.now) == Int64(expected) * 1_000_000_000)
        #expect(Moment.parse("2026-12-01 18:00", now: Self.now) == (Int64(expected) - 5) * 1_000_000_000)
        #expect(Moment.local(Int64(expected) * 1_000_000_000) == "2026-12-01 18:00:05")
        #expect(Moment.utc(1_796_148_000_000_000_000) == "2026-12-01T18:00:00Z")
    }

    @Test func anAgeCountsBackFromNow() {
        #expect(Moment.parse("10m", now: Self.now) == Self.now - 600_000_000_000)
        #expect(Moment.parse("2h", now: Self.now) == Self.now - 7_200_000_000_000)
        #expect(Moment.parse("3d", now: Self.now) == Self.now - 259_200_000_000_000)
        #expect(Moment.parse("1h30m", now: Self.now) == Self.now - 5_400_000_000_000)
    }

    @Test func anythingElseIsNoMoment() {
        for text in ["", "yesterday", "10x", "2026-13-01 10:00", "2026-02-30 10:00", "2026-12-01", "18:00", "2026-12-01T18:00:00", "-5m"] {
            #expect(Moment.parse(text, now: Self.now) == nil, "\(text)")
        }
    }
}
