import SinkiControl
import Testing
@testable import SinkiAgent

/// What `sinkid status` says of transfers: bytes done, the rate of this run only, failures last.
@Suite struct TransferBookTests {
    static let second: Int64 = 1_000_000_000

    @Test func theRateCountsOnlyWhatThisRunMoved() throws {
        var book = TransferBook()
        let key = TransferBook.Key.of(.upload, "SaveGames/big.bin")
        book.moving[key] = TransferBook.Moving(direction: .upload, total: 1000)
        // Resumed: the first progress already stands at 400 (sent by an earlier run).
        book.progress(key, done: 400)
        let since = try #require(book.moving[key]?.since)
        book.progress(key, done: 600)
        let status = try #require(book.statuses(now: since.at + 2 * Self.second).first)
        #expect(status.path == "SaveGames/big.bin" && status.direction == .upload)
        #expect(status.done == 600 && status.total == 1000)
        #expect(abs(status.rate - 100) < 0.001, "200 bytes over 2 s, not 600")
    }

    @Test func progressIsClampedToTheFileAndNoRateBeforeATenthOfASecond() throws {
        var book = TransferBook()
        let key = TransferBook.Key.of(.download, "SaveGames/a.bin")
        book.moving[key] = TransferBook.Moving(direction: .download, total: 50)
        book.progress(key, done: 80)
        #expect(book.moving[key]?.done == 50)
        book.progress(key, done: -5)
        #expect(book.moving[key]?.done == 0)
        let since = try #require(book.moving[key]?.since)
        #expect(book.statuses(now: since.at + 50_000_000).first?.rate == 0)
        book.progress("download:SaveGames/unknown.bin", done: 10)
        #expect(book.moving.count == 1, "progress of a transfer not listed adds nothing")
    }

    @Test func failedTransfersComeAfterMovingOnesWithTheirReason() {
        var book = TransferBook()
        book.failed[TransferBook.Key.of(.upload, "SaveGames/a.bin")] = TransferBook.Failure(direction: .upload, total: 9, reason: "server refused")
        book.moving[TransferBook.Key.of(.download, "SaveGames/z.bin")] = TransferBook.Moving(direction: .download, total: 5)
        let statuses = book.statuses()
        #expect(statuses.map(\.path) == ["SaveGames/z.bin", "SaveGames/a.bin"])
        #expect(statuses[0].failed == nil && statuses[1].failed == "server refused")
        #expect(TransferBook.Key.path(of: TransferBook.Key.of(.upload, "S/with:colon")) == "S/with:colon")
    }
}
