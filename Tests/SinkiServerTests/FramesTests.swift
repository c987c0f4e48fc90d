import Foundation
import SinkiRecord
@testable import SinkiServer
import SinkiSupport
import SinkiTestSupport
import Testing

/// Records in frames on the server's routes (docs/protocol.md, "Records in frames"): a modify batch taken
/// in frames as in JSON; the feed and look-ups answered in frames to a client that accepts them, in JSON
/// to any other.
@Suite struct FramesTests {
    static let framesType = [("Content-Type", RecordFrames.mediaType)]
    static let acceptFrames = [("Accept", "application/vnd.sinki.records, application/json;q=0.5")]

    @Test func aBatchInFramesIsSavedAsTheSameBatchInJSONWouldBe() throws {
        let fixture = try ServerFixture()
        let existing = try #require(try fixture.modify([fileRecord("G/existing", "v1")])[0].record)
        let batch = [fileRecord("G/new", randomBytes(5_000)), fileRecord("G/existing", "stale", baseTag: 0),
                     fileRecord("G/../x", "x"), tombstone("G/never", baseTag: 0), fileRecord("G/empty", [])]
        let response = try fixture.request("POST", "/v1/records/modify", headers: Self.framesType,
                                           body: ModifyRequest(records: batch).framesBytes)
        let results = try response.modifyResults()
        #expect(results.map(\.status) == [.saved, .conflict, .refused, .saved, .saved])
        #expect(results[1].record?.changeTag == existing.changeTag)
        #expect(try content(of: #require(results[1].record)) == Array("v1".utf8))
        #expect(results[2].problem?.code == "bad-path")
        // Stored as given: the feed gives back the bytes sent.
        let feed = try fixture.changes()
        let new = try #require(feed.records.first { $0.path == "G/new" })
        #expect(new.data == batch[0].data && new.sha256 == batch[0].sha256)
        #expect(feed.records.first { $0.path == "G/empty" }?.data == batch[4].data)
    }

    @Test func aBatchInFramesOutOfShapeSavesNothing() throws {
        let fixture = try ServerFixture()
        let whole = ModifyRequest(records: [fileRecord("G/a", "a"), fileRecord("G/b", "b")]).framesBytes
        for (name, body) in [("cut off before its envelope", Array(whole.dropLast(3))),
                             ("a frame of an unknown kind", [UInt8(ascii: "Z"), 0, 0, 0, 0] + whole),
                             ("JSON sent as frames", ModifyRequest(records: [fileRecord("G/a", "a")]).jsonBytes)] {
            let response = try fixture.request("POST", "/v1/records/modify", headers: Self.framesType, body: body)
            #expect(response.status == 400, "\(name)")
            #expect(try response.problem().code == "bad-json", "\(name)")
        }
        #expect(try fixture.changes().records.isEmpty)
        // A record frame past the most a record can take is refused from its header.
        let huge: [UInt8] = [UInt8(ascii: "R"), 0x7F, 0xFF, 0xFF, 0xFF]
        let response = try fixture.request("POST", "/v1/records/modify", headers: Self.framesType, body: huge)
        #expect(response.status == 413)
        #expect(try response.problem().code == "too-large")
    }

    @Test func anotherBodyTypeIsRefusedNamingBothThatModifyTakes() throws {
        let fixture = try ServerFixture()
        let response = try fixture.request("POST", "/v1/records/modify", headers: [("Content-Type", "text/plain")],
                                           body: ModifyRequest(records: [fileRecord("G/x", "x")]).framesBytes)
        #expect(response.status == 415)
        #expect(try response.problem().detail.contains("application/json or application/vnd.sinki.records"))
    }

    @Test func theFeedAndLookUpsAnswerFramesToAClientThatAcceptsThem() throws {
        let fixture = try ServerFixture()
        let sent = [fileRecord("F/a", randomBytes(3_000)), fileRecord("F/b", "b", device: "phone"), tombstone("F/c", baseTag: 0)]
        _ = try fixture.modify(sent)
        let json = try fixture.request("GET", "/v1/changes")
        #expect(json.header("Content-Type") == "application/json")
        let framed = try fixture.request("GET", "/v1/changes?omitDataFrom=phone", headers: Self.acceptFrames)
        #expect(framed.header("Content-Type") == RecordFrames.mediaType)
        #expect(framed.header("Vary") == "Accept")
        let page = try RecordPage.parse(framed.body, contentType: framed.header("Content-Type"))
        let expected = try RecordPage.parse(json.body)
        #expect(page.token == expected.token && page.more == expected.more)
        #expect(page.records.map(\.path) == ["F/a", "F/b", "F/c"])
        #expect(page.records[0] == expected.records[0])
        #expect(page.records[1].data == nil && page.records[2].data == nil)
        // Content raw: the page is smaller than the JSON by about a third of the content.
        #expect(framed.body.count + 900 < json.body.count)
        // A long-poll answered by a save answers in frames too.
        let waiting = try fixture.connect()
        try waiting.send("GET", "/v1/changes?wait=30&since=\(encoded(page.token))", headers: Self.acceptFrames)
        _ = try fixture.modify([fileRecord("F/d", "d")])
        let woken = try waiting.receive()
        #expect(try RecordPage.parse(woken.body, contentType: woken.header("Content-Type")).records.map(\.path) == ["F/d"])
        // A look-up with content.
        let lookup = try fixture.request("GET", "/v1/records?path=F/a&data=1", headers: Self.acceptFrames)
        #expect(lookup.header("Content-Type") == RecordFrames.mediaType)
        #expect(try RecordPage.parse(lookup.body, contentType: lookup.header("Content-Type")).records.first?.data == sent[0].data)
    }
}
