import Foundation
@testable import SinkiServer
import SinkiRecord
import SinkiSupport
import SinkiTestSupport
import Testing

/// `GET /v1/assets/ID` of a manifest asset: the file's bytes read from its chunks in order.
@Suite struct ManifestAssetTests {
    @Test func servesTheFileWholeAndRangesAcrossChunkBoundaries() throws {
        let fixture = try ServerFixture()
        // Larger than a streamed piece (256 KiB), so that pieces and chunks cross each other.
        let file = ChunkedFile.random([700_000, 3, 300_000, 1_200_000])
        try fixture.uploadChunks(of: file)
        #expect(try fixture.modify([file.record("G/big.bin")]).map(\.status) == [.saved])
        let bytes = file.bytes
        let whole = try fixture.request("GET", Routes.assets + file.hash)
        #expect(whole.status == 200 && whole.body == bytes)
        #expect(whole.header("ETag") == "\"\(file.hash)\"" && whole.header("Accept-Ranges") == "bytes")
        #expect(whole.header("Content-Type") == "application/octet-stream")
        let size = bytes.count
        let cases: [(String, Int, String?, Range<Int>?)] = [
            ("bytes=699990-700010", 206, "bytes 699990-700010/\(size)", 699_990..<700_011),
            ("bytes=700000-700002", 206, "bytes 700000-700002/\(size)", 700_000..<700_003),
            ("bytes=699999-1000003", 206, "bytes 699999-1000003/\(size)", 699_999..<1_000_004),
            ("bytes=500000-", 206, "bytes 500000-\(size - 1)/\(size)", 500_000..<size),
            ("bytes=-10", 206, "bytes \(size - 10)-\(size - 1)/\(size)", (size - 10)..<size),
            ("bytes=\(size)-", 416, "bytes */\(size)", nil),
            ("bytes=0-1,5-6", 200, nil, 0..<size),
        ]
        for (range, status, contentRange, slice) in cases {
            let response = try fixture.request("GET", Routes.assets + file.hash, headers: [("Range", range)])
            #expect(response.status == status, "\(range)")
            #expect(response.header("Content-Range") == contentRange, "\(range)")
            if let slice { #expect(response.body == Array(bytes[slice]), "\(range)") }
        }
        #expect(try fixture.request("GET", Routes.assets + file.hash, headers: [("Range", "bytes=1-2"), ("If-Range", "\"x\"")]).status == 200)
    }

    /// A record of the user within the token's prefix opens it, or (history on) a kept version of one.
    @Test(arguments: [true, false])
    func onlyARecordOrKeptVersionOfTheUserWithinTheTokensPrefixOpensIt(history: Bool) throws {
        let fixture = try ServerFixture.withAccounts { $0.retention.historyDays = history ? 30 : 0 }
        let alice = try fixture.issue(user: "alice"), bob = try fixture.issue(user: "bob")
        let narrow = try fixture.issue(user: "alice", device: "phone", scope: TokenScope(prefix: "S/a"))
        let file = ChunkedFile.random([300_000, 10])
        try fixture.uploadChunks(of: file, token: alice.secret)
        // Chunks alone are no asset: a record must name the manifest.
        #expect(try fixture.request("GET", Routes.assets + file.hash, token: alice.secret).status == 404)
        let saved = try #require(try fixture.modify([file.record("S/b/big.bin")], token: alice.secret).first?.record)
        #expect(try fixture.request("GET", Routes.assets + file.hash, token: alice.secret).body == file.bytes)
        #expect(try fixture.request("GET", Routes.assets + file.hash, token: bob.secret).status == 404)
        #expect(try fixture.request("GET", Routes.assets + file.hash, token: narrow.secret).status == 404)
        #expect(try fixture.modify([tombstone("S/b/big.bin", baseTag: saved.changeTag)], token: alice.secret).map(\.status) == [.saved])
        // Deleted: the version kept in history is still read (`sinkid cat --version`); without history, nothing is.
        let after = try fixture.request("GET", Routes.assets + file.hash, token: alice.secret)
        if history { #expect(after.body == file.bytes) } else { #expect(after.status == 404) }
    }

    @Test func aChunkGoneFromUnderTheRecordIsSaid() throws {
        let fixture = try ServerFixture()
        let file = ChunkedFile.random([300_000, 300_000])
        try fixture.uploadChunks(of: file)
        #expect(try fixture.modify([file.record("G/big.bin")]).map(\.status) == [.saved])
        // Damaged, reported and removed: the record names it still, until a writer uploads it again.
        try fixture.heldChunks().overwrite(file.names[1], with: [1, 2, 3])
        #expect(try fixture.request("DELETE", Routes.chunks + file.names[1]).status == 204)
        let response = try fixture.request("GET", Routes.assets + file.hash)
        #expect(response.status == 409)
        let problem = try response.problem()
        #expect(problem.code == "chunks-missing" && problem.detail.contains(file.names[1]))
        // The first chunk alone is still there.
        let first = try fixture.request("GET", Routes.assets + file.hash, headers: [("Range", "bytes=0-299999")])
        #expect(first.status == 206 && first.body == file.chunks[0])
        try fixture.uploadChunks(of: file)
        #expect(try fixture.request("GET", Routes.assets + file.hash).body == file.bytes)
    }
}
