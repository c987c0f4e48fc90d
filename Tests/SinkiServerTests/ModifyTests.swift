import Foundation
import SinkiRecord
@testable import SinkiServer
import SinkiSupport
import SinkiTestSupport
import Testing

@Suite struct ModifyTests {
    @Test func eachItemOfABatchIsSavedConflictedOrRefusedOnItsOwn() throws {
        let fixture = try ServerFixture()
        let first = try fixture.modify([fileRecord("G/existing", "v1")])
        let existing = try #require(first[0].record)

        var negative = fileRecord("G/negative", "")
        negative.size = -1
        var bloated = fileRecord("G/bloated", "hello")
        bloated.data = randomBytes(2_000)
        let badPaths = ["../x", "/etc/x", "a/../../x", "G\\x", "G/a\u{0}b", "G//x", "G/./x", "G/x/", "G", ""]
        let batch = [fileRecord("G/new", "fresh"), fileRecord("G/existing", "stale edit", baseTag: 0)]
            + badPaths.map { fileRecord($0, "x") }
            + [negative, bloated, fileRecord("G/also-new", "ok"), tombstone("G/never-seen", baseTag: 0)]

        let response = try fixture.request("POST", "/v1/records/modify", headers: [("Content-Type", "application/json")],
                                           body: ModifyRequest(records: batch).jsonBytes)
        let requestID = try #require(response.header("X-Request-Id"))
        let results = try response.modifyResults()
        #expect(results.map(\.path) == batch.map(\.path))
        #expect(results.map(\.status) == [.saved, .conflict] + Array(repeating: .refused, count: badPaths.count + 2) + [.saved, .saved])

        // Saved: the stored record without data, with a new tag.
        let saved = try #require(results[0].record)
        #expect(saved.changeTag > existing.changeTag && saved.data == nil && saved.sha256 == Digest.sha256Hex(Array("fresh".utf8)))
        // Conflict: the server's record, data included.
        let conflict = try #require(results[1].record)
        #expect(conflict.changeTag == existing.changeTag)
        #expect(try content(of: conflict) == Array("v1".utf8))
        // Refused: a problem each, naming the request.
        for result in results[2..<(2 + badPaths.count)] {
            #expect(result.problem?.code == "bad-path", "\(quoted(result.path))")
            #expect(result.problem?.requestId == requestID)
            #expect(result.record == nil)
        }
        for result in results[(2 + badPaths.count)..<(4 + badPaths.count)] {
            #expect(result.problem?.code == "bad-request", "\(result.path): \(String(describing: result.problem))")
            #expect(result.problem?.status == 400)
        }
        #expect(results[2 + badPaths.count].problem?.detail.contains("negative size") == true)
        #expect(results[3 + badPaths.count].problem?.detail.contains("more than zlib ever makes") == true)

        // Only the saves reached the store.
        let feed = try fixture.changes()
        #expect(feed.records.map(\.path) == ["G/existing", "G/new", "G/also-new", "G/never-seen"])
        #expect(try content(of: feed.records[0]) == Array("v1".utf8))
    }

    /// Inline content is stored as given: the receiving agent inflates it (no more than its declared
    /// size) and checks its hash, so the server never needs to read it.
    @Test func inlineContentIsStoredAsGivenWithoutInflatingOrHashing() throws {
        let fixture = try ServerFixture()
        var wrongSize = fileRecord("G/wrong-size", "hello")
        wrongSize.size = 6
        var wrongSHA = fileRecord("G/wrong-sha", "hello")
        wrongSHA.sha256 = Digest.sha256Hex(Array("other".utf8))
        var notZlib = fileRecord("G/not-zlib", "hello")
        notZlib.data = Array("plain text, not a zlib stream".utf8)
        // At the bound: zlib's worst case for 1,000 bytes, and its margin.
        var atBound = fileRecord("G/at-bound", randomBytes(1_000))
        atBound.data = randomBytes(Int(ModifyValidator.compressedBound(1_000)))
        let batch = [wrongSize, wrongSHA, notZlib, atBound]
        let results = try fixture.modify(batch)
        #expect(results.map(\.status) == [.saved, .saved, .saved, .saved])
        let feed = try fixture.changes().records
        #expect(feed.map(\.data) == batch.map(\.data))
        #expect(feed.map(\.sha256) == batch.map(\.sha256))
        #expect(feed.map(\.size) == batch.map(\.size))
        // One byte more than any zlib stream of that size needs is refused unread.
        var over = atBound
        over.path = "G/over-bound"
        over.data = randomBytes(Int(ModifyValidator.compressedBound(1_000)) + 1)
        #expect(try fixture.modify([over]).map(\.status) == [.refused])
        // The bound follows zlib: incompressible content at its worst still fits.
        for size in [0, 1, 1_000, 70_000, 300_000] {
            for level: Int32 in [0, 1, 9] {
                let worst = Deflate.compress(randomBytes(size), level: level)
                #expect(Int64(worst.count) <= ModifyValidator.compressedBound(Int64(size)), "\(size) bytes compress to \(worst.count) at level \(level)")
            }
        }
    }

    /// `device` and `type` reach every other device's log and merge rules (issue 24, item 11): a
    /// device name with a newline or over 128 bytes, and a type that is no word, are refused with the
    /// field named; the names agents send are saved.
    @Test func deviceAndTypeAreBoundedAndPrintable() throws {
        let fixture = try ServerFixture()
        var newline = fileRecord("G/newline", "x")
        newline.device = "laptop\n2026-01-01T00:00:00Z ERROR sinkid: forged"
        var escape = fileRecord("G/escape", "x")
        escape.device = "laptop\u{1B}[31m"
        var huge = fileRecord("G/huge", "x")
        huge.device = String(repeating: "d", count: 1 << 20)
        var pathType = fileRecord("G/path-type", "x")
        pathType.type = "../../etc"
        var longType = fileRecord("G/long-type", "x")
        longType.type = String(repeating: "t", count: 65)
        var fine = fileRecord("G/fine", "x")
        fine.device = "Alice's laptop (café) — 2"
        fine.type = "keep-both"
        var json = fileRecord("G/fine.json", "{}")
        json.type = "json"
        let results = try fixture.modify([newline, escape, huge, pathType, longType, fine, json])
        #expect(results.map(\.status) == [.refused, .refused, .refused, .refused, .refused, .saved, .saved])
        #expect(results.prefix(5).map { $0.problem?.field } == ["device", "device", "device", "type", "type"])
        #expect(try fixture.changes().records.map(\.path) == ["G/fine", "G/fine.json"])
    }

    @Test func aSaveBasedOnTheCurrentTagReplacesTheRecord() throws {
        let fixture = try ServerFixture()
        let first = try #require(try fixture.modify([fileRecord("G/doc", "v1")])[0].record)
        let second = try fixture.modify([fileRecord("G/doc", "v2", baseTag: first.changeTag)])
        #expect(second[0].status == .saved)
        let deleted = try fixture.modify([tombstone("G/doc", baseTag: second[0].record!.changeTag)])
        #expect(deleted[0].status == .saved && deleted[0].record?.deleted == true)
        let feed = try fixture.changes()
        #expect(feed.records.count == 1)
        #expect(feed.records[0].deleted && feed.records[0].data == nil)
        #expect(feed.records[0].changeTag == deleted[0].record!.changeTag)
    }

    @Test func modifyTakesOnlyJSON() throws {
        let fixture = try ServerFixture()
        let body = ModifyRequest(records: [fileRecord("G/x", "x")]).jsonBytes
        for headers in [[("Content-Type", "text/plain")], [], [("Content-Type", "application/x-www-form-urlencoded")]] {
            let response = try fixture.request("POST", "/v1/records/modify", headers: headers, body: body)
            #expect(response.status == 415)
            #expect(try response.problem().code == "unsupported-media-type")
        }
        let withCharset = try fixture.request("POST", "/v1/records/modify", headers: [("Content-Type", "Application/JSON; charset=utf-8")], body: body)
        #expect(withCharset.status == 200)
    }

    @Test(arguments: ["{", "not json", #"{"records": 5}"#, #"{"other": []}"#, #"{"records": [{"path": "G/x", "deleted": 2}]}"#,
                      #"{"records": [{"type": "x"}]}"#, #"{"records": []} trailing"#])
    func badJSONSavesNothing(body: String) throws {
        let fixture = try ServerFixture()
        let response = try fixture.request("POST", "/v1/records/modify", headers: [("Content-Type", "application/json")], body: Array(body.utf8))
        #expect(response.status == 400)
        #expect(try response.problem().code == "bad-json")
        #expect(try fixture.changes().records.isEmpty)
    }

    @Test func anEmptyBatchAnswersNoResults() throws {
        let fixture = try ServerFixture()
        #expect(try fixture.modify([]).isEmpty)
    }

    @Test func aDeclaredLengthOverTheLimitIsRefusedBeforeTheBodyIsRead() throws {
        let fixture = try ServerFixture { $0.limits.maxBodyBytes = 10_000 }
        let connection = try fixture.connect()
        // Headers only: the server must answer without waiting for a megabyte that never comes.
        try connection.write(Array("POST /v1/records/modify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n".utf8))
        let response = try connection.receive(timeout: 5)
        #expect(response.status == 413)
        #expect(try response.problem().code == "too-large")
        #expect(connection.isClosed(within: 5))
    }

    @Test func aChunkedBodyOverTheLimitIsRefused() throws {
        let fixture = try ServerFixture { $0.limits.maxBodyBytes = 10_000 }
        let records = (0..<10).map { fileRecord("G/\($0)", randomBytes(2_000)) }
        let connection = try fixture.connect()
        try connection.send("POST", "/v1/records/modify", headers: [("Content-Type", "application/json")],
                            body: ModifyRequest(records: records).jsonBytes, chunked: true)
        let response = try connection.receive()
        #expect(response.status == 413)
        #expect(try response.problem().code == "too-large")
        #expect(try fixture.changes().records.isEmpty)
        // A body under the limit on the same kind of connection still goes through.
        let small = try fixture.connect()
        try small.send("POST", "/v1/records/modify", headers: [("Content-Type", "application/json")],
                       body: ModifyRequest(records: [fileRecord("G/small", "x")]).jsonBytes, chunked: true)
        #expect(try small.receive().modifyResults().map(\.status) == [.saved])
    }

    @Test func aBatchOverTheRecordLimitIsRefused() throws {
        let fixture = try ServerFixture { $0.limits.maxBatchRecords = 5 }
        let response = try fixture.request("POST", "/v1/records/modify", headers: [("Content-Type", "application/json")],
                                           body: ModifyRequest(records: (0..<6).map { fileRecord("G/\($0)", "x") }).jsonBytes)
        #expect(response.status == 413)
        #expect(try response.problem().code == "too-large")
    }

    @Test func inlineContentOverTheServersLimitIsRefused() throws {
        let fixture = try ServerFixture { $0.limits.maxInlineBytes = 1_000 }
        var huge = fileRecord("G/huge", [UInt8](repeating: 0, count: 100))
        huge.size = 1 << 40
        let results = try fixture.modify([huge, fileRecord("G/fine", [UInt8](repeating: 7, count: 1_000))])
        #expect(results.map(\.status) == [.refused, .saved])
        #expect(results[0].problem?.code == "too-large")
    }

    @Test func aThousandRecordBatchRoundTrips() throws {
        let fixture = try ServerFixture()
        let records = (0..<1_000).map { fileRecord("Bench/dir\($0 % 10)/file\($0).bin", randomBytes(4096)) }
        let started = Date()
        let results = try fixture.modify(records)
        let committed = Date()
        #expect(results.count == 1_000)
        #expect(results.allSatisfy { $0.status == .saved })
        let page = try fixture.changes(limit: 1_000)
        let fetched = Date()
        #expect(!page.more)
        #expect(page.records.count == 1_000)
        #expect(page.records.map(\.path) == records.map(\.path))
        #expect(page.records.map(\.data) == records.map(\.data))
        print("1,000 × 4 KiB (debug build): modify \(Int(committed.timeIntervalSince(started) * 1000)) ms, "
              + "feed page \(Int(fetched.timeIntervalSince(committed) * 1000)) ms")
    }
}
