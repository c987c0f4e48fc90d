@testable import SinkiState
import Testing

/// The feed's inline content counts what each entry costs beside its data, so that the pull loop's
/// read-ahead bound (`Agent.inlineAhead`) holds for tiny files too, and gives its room back once
/// everything it held is written.
@Suite struct InlineContentTests {
    @Test func eachEntryCountsItsOverheadBesideItsData() {
        var inline = InlineContent()
        inline.keep("R/a", tag: 1, data: [1, 2, 3])
        inline.keep("R/b", tag: 2, data: [])
        #expect(inline.bytes == 3 + 2 * InlineContent.overhead)
        // A newer version of a path replaces the older one's cost.
        inline.keep("R/a", tag: 3, data: [1])
        #expect(inline.bytes == 1 + 2 * InlineContent.overhead)
        #expect(inline.data("R/a", tag: 3) == [1] && inline.data("R/a", tag: 1) == nil)
        inline.drop("R/b")
        #expect(inline.bytes == 1 + InlineContent.overhead)
    }

    @Test func tinyFilesReachTheBudgetByTheirCountAndTheOldestGo() {
        var inline = InlineContent()
        let fit = InlineContent.budget / (64 + InlineContent.overhead)
        for index in 0..<(fit + 10) { inline.keep("R/\(index)", tag: Int64(index + 1), data: [UInt8](repeating: 7, count: 64)) }
        #expect(inline.bytes <= InlineContent.budget)
        #expect(inline.counts.entries == fit)
        #expect(inline.data("R/0", tag: 1) == nil && inline.data("R/\(fit + 9)", tag: Int64(fit + 10)) != nil)
    }

    @Test func everythingWrittenGivesTheRoomBack() {
        var inline = InlineContent()
        for index in 0..<5_000 { inline.keep("R/\(index)", tag: Int64(index + 1), data: [9]) }
        for index in 0..<4_999 { inline.drop("R/\(index)") }
        #expect(inline.counts.entries == 1 && inline.counts.order == 5_000)
        inline.drop("R/4999")
        #expect(inline.counts == (0, 0) && inline.bytes == 0 && inline.isEmpty)
    }
}
