import Testing
@testable import SinkiServer
import SinkiRecord
import SinkiSupport

/// `GET /v1/assets/ID` with Range, and records that name an upload as their asset.
@Suite struct TusAssetTests {
    static let tokens = ["a": ServerIdentity(user: "alice", device: "a"), "b": ServerIdentity(user: "bob", device: "b")]

    func finished(_ tus: TusFixture, _ data: [UInt8], token: String? = nil) throws -> String {
        let id = try tus.create(length: Int64(data.count), token: token)
        #expect(try tus.patch(id, offset: 0, data, token: token).status == 204)
        return id
    }

    @Test func servesTheWholeAssetAndRanges() throws {
        let tus = try TusFixture()
        let data = pattern(100_000)
        let id = try finished(tus, data)
        let whole = try tus.request("GET", "/v1/assets/\(id)")
        #expect(whole.status == 200)
        #expect(whole.body == data)
        #expect(whole.header("Accept-Ranges") == "bytes")
        #expect(whole.header("ETag") == "\"\(Digest.sha256Hex(data))\"")
        let cases: [(String, Int, String?, Range<Int>?)] = [
            ("bytes=10-19", 206, "bytes 10-19/100000", 10..<20),
            ("bytes=99990-", 206, "bytes 99990-99999/100000", 99_990..<100_000),
            ("bytes=-5", 206, "bytes 99995-99999/100000", 99_995..<100_000),
            ("bytes=99999-200000", 206, "bytes 99999-99999/100000", 99_999..<100_000),
            ("bytes=100000-", 416, "bytes */100000", nil),
            ("bytes=0-1,5-6", 200, nil, 0..<100_000),
            ("pages=1-2", 200, nil, 0..<100_000),
        ]
        for (range, status, contentRange, slice) in cases {
            let response = try tus.request("GET", "/v1/assets/\(id)", headers: [("Range", range)])
            #expect(response.status == status, "\(range)")
            #expect(response.header("Content-Range") == contentRange, "\(range)")
            if let slice { #expect(response.body == Array(data[slice]), "\(range)") }
        }
        let stale = try tus.request("GET", "/v1/assets/\(id)", headers: [("Range", "bytes=10-19"), ("If-Range", "\"other\"")])
        #expect(stale.status == 200)
    }

    @Test func onlyTheOwnerGetsFinishedAssets() throws {
        let tus = try TusFixture(tokens: Self.tokens)
        let id = try finished(tus, bytes("secret"), token: "a")
        let unfinished = try tus.create(length: 10, token: "a")
        #expect(try tus.request("GET", "/v1/assets/\(id)", token: "a").body == bytes("secret"))
        #expect(try tus.request("GET", "/v1/assets/\(id)", token: "b").status == 404)
        #expect(try tus.request("GET", "/v1/assets/\(unfinished)", token: "a").status == 404)
        #expect(try tus.request("GET", "/v1/assets/nothing", token: "a").status == 404)
    }

    @Test func aRecordNamesOnlyAFinishedUploadOfItsWriterWithItsSizeAndHash() throws {
        let tus = try TusFixture(tokens: Self.tokens)
        let data = pattern(70_000)
        let hash = Digest.sha256Hex(data)
        let id = try finished(tus, data, token: "a")
        let bobs = try finished(tus, data, token: "b")
        let unfinished = try tus.create(length: 70_000, token: "a")
        func record(_ path: String, asset: Asset, size: Int64 = 70_000, sha256: String = hash) -> Record {
            Record(path: "Games/\(path)", asset: asset, size: size, sha256: sha256, device: "a")
        }
        let results = try tus.fixture.modify([
            record("good.bin", asset: Asset(id: id, size: 70_000, sha256: hash)),
            record("wrong-hash.bin", asset: Asset(id: id, size: 70_000, sha256: String(repeating: "0", count: 64)), sha256: String(repeating: "0", count: 64)),
            record("wrong-size.bin", asset: Asset(id: id, size: 69_999, sha256: hash), size: 69_999),
            record("unfinished.bin", asset: Asset(id: unfinished, size: 70_000, sha256: hash)),
            record("bobs.bin", asset: Asset(id: bobs, size: 70_000, sha256: hash)),
            record("unknown.bin", asset: Asset(id: "nope", size: 70_000, sha256: hash)),
            record("disagrees.bin", asset: Asset(id: id, size: 70_000, sha256: hash), size: 5),
        ], token: "a")
        #expect(results.map(\.status) == [.saved, .refused, .refused, .refused, .refused, .refused, .refused])
        for result in results.dropFirst() { #expect(result.problem?.code == "bad-request", "\(result.path)") }
        #expect(results[0].record?.asset == Asset(id: id, size: 70_000, sha256: hash))
    }
}
