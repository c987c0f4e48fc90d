import Foundation
import SinkiRecord
@testable import SinkiServer
import SinkiSupport
import SinkiTestSupport
import Testing

/// W1: 10,000 records of 4 KiB random content pushed in batches of 1,000, then read back in feed pages
/// of 1,000. Opt-in (`SINKI_BENCH=1`) and meant for release builds:
///
///     SINKI_BENCH=1 swift test -c release -Xswiftc -enable-testing --filter SinkiServerTests.BenchmarkTests
@Suite(.serialized, .enabled(if: ProcessInfo.processInfo.environment["SINKI_BENCH"] != nil))
struct BenchmarkTests {
    static let batches = (0..<10).map { batch in
        (0..<1_000).map { fileRecord("W1/batch\(batch)/file\($0).bin", randomBytes(4096)) }
    }

    private func milliseconds(_ since: UInt64) -> Double { Double(DispatchTime.now().uptimeNanoseconds - since) / 1e6 }

    private func summary(_ times: [Double]) -> String {
        let sorted = times.sorted()
        return "median \(sorted[sorted.count / 2].formatted2) ms, max \(sorted.last!.formatted2) ms"
    }

    @Test func storeCommitsAThousandRecordBatch() throws {
        let directory = TemporaryDirectory("sinki-bench")
        let store = try SQLiteRecordStore(path: directory.child("records.db"))
        defer { store.close() }
        let validator = ModifyValidator(maxInlineBytes: 64 << 20)
        var checks: [Double] = []
        var commits: [Double] = []
        for batch in Self.batches {
            var began = DispatchTime.now().uptimeNanoseconds
            let items = try batch.map { try validator.check($0).get() }
            checks.append(milliseconds(began))
            began = DispatchTime.now().uptimeNanoseconds
            let outcomes = try store.modify(user: "bench", items: items)
            commits.append(milliseconds(began))
            #expect(outcomes.count == 1_000)
        }
        print("W1 store: validate 1,000 × 4 KiB \(summary(checks)); commit \(summary(commits))")
        var pages: [Double] = []
        var after: Int64 = 0
        while true {
            let began = DispatchTime.now().uptimeNanoseconds
            let page = try store.changes(user: "bench", after: after, limit: PageLimit(records: 1_000, dataBytes: 32 << 20))
            pages.append(milliseconds(began))
            after = page.lastTag
            if !page.more { break }
        }
        print("W1 store: read a feed page of 1,000 with data \(summary(pages))")
    }

    @Test func serverRoundTrips() throws {
        let fixture = try ServerFixture()
        let connection = try fixture.connect()
        var modifies: [Double] = []
        for batch in Self.batches {
            let body = ModifyRequest(records: batch).jsonBytes
            let began = DispatchTime.now().uptimeNanoseconds
            let response = try connection.request("POST", "/v1/records/modify", headers: [("Content-Type", "application/json")], body: body)
            modifies.append(milliseconds(began))
            #expect(response.status == 200)
        }
        print("W1 HTTP: POST /v1/records/modify of 1,000 × 4 KiB (5.5 MB of JSON), send to answer: \(summary(modifies))")
        var pages: [Double] = []
        var token: String?
        var total = 0
        while true {
            let began = DispatchTime.now().uptimeNanoseconds
            let response = try connection.request("GET", changesTarget(since: token, limit: 1_000))
            pages.append(milliseconds(began))
            let page = try response.page()
            total += page.records.count
            token = page.token
            if !page.more { break }
        }
        #expect(total == 10_000)
        print("W1 HTTP: GET /v1/changes pages of 1,000 with data, send to last byte (client parse excluded): \(summary(pages))")
    }
}
