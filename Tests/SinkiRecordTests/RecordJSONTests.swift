import Testing
@testable import SinkiRecord

@Suite struct RecordJSONTests {
    let sample = Record(path: "SaveGames/slot 1/plåyer\"1\".save", type: "keep-both", data: Array(0...255), deleted: false,
                        changeTag: 42, baseTag: 41, size: 256, sha256: String(repeating: "ab", count: 32),
                        mode: 0o640, modifiedAt: 1_764_422_400_123_456_789, device: "laptop\n")

    @Test func recordRoundTrips() throws {
        var reader = JSONReader(sample.jsonBytes())
        let back = try Record.read(from: &reader)
        try reader.finish()
        #expect(back == sample)
        #expect(back.recordName == RecordName.of(sample.path))
    }

    @Test func assetAndTombstoneRoundTrip() throws {
        let tombstone = Record(path: "A/b", deleted: true, changeTag: 7)
        let withAsset = Record(path: "A/big.bin", type: "binary", asset: Asset(id: "u1", size: 1 << 40, sha256: "00"), size: 1 << 40)
        let page = RecordPage(records: [tombstone, withAsset], token: "s.7", more: true)
        #expect(try RecordPage.parse(page.jsonBytes) == page)
    }

    @Test func aManifestAssetRoundTripsAsPairs() throws {
        let chunks = [ChunkRef(sha256: String(repeating: "a1", count: 32), size: 1_048_848),
                      ChunkRef(sha256: String(repeating: "b2", count: 32), size: 7)]
        let record = Record(path: "A/disk.img", type: "binary", asset: Asset(manifestHash: String(repeating: "c3", count: 32), chunks: chunks),
                            size: 1_048_855, sha256: String(repeating: "c3", count: 32))
        let json = String(decoding: record.jsonBytes(), as: UTF8.self)
        #expect(json.contains(#""chunks":[["\#(chunks[0].sha256)",1048848],["\#(chunks[1].sha256)",7]]"#))
        var reader = JSONReader(record.jsonBytes())
        let back = try Record.read(from: &reader)
        #expect(back == record)
        #expect(back.asset?.isManifest == true && back.asset?.id == back.asset?.sha256 && back.asset?.size == 1_048_855)
    }

    @Test(arguments: [#"{"path":"A/b","asset":{"id":"x","size":1,"sha256":"x","chunks":[["aa"]]}}"#,
                      #"{"path":"A/b","asset":{"id":"x","size":1,"sha256":"x","chunks":[["aa",1,2]]}}"#,
                      #"{"path":"A/b","asset":{"id":"x","size":1,"sha256":"x","chunks":[[1,"aa"]]}}"#])
    func aMalformedChunkListIsRefused(text: String) {
        var reader = JSONReader(Array(text.utf8))
        #expect(throws: (any Error).self) { try Record.read(from: &reader) }
    }

    @Test func modifyResponseRoundTrips() throws {
        let response = ModifyResponse(results: [
            ModifyResult(path: "A/x", status: .saved, record: Record(path: "A/x", changeTag: 3)),
            ModifyResult(path: "A/../x", status: .refused, problem: Problem(.badPath, detail: "no", requestId: "r1")),
        ])
        #expect(try ModifyResponse.parse(response.jsonBytes) == response)
    }

    @Test func readerHandlesEscapesAndUnknownFields() throws {
        let text = #"{"path":"A\/b\u00e9\ud83d\ude00","extra":{"nested":[1,2.5,true,null,"x"]},"deleted":1,"data":"aGk\/"}"#
        var reader = JSONReader(Array(text.utf8))
        let record = try Record.read(from: &reader)
        #expect(record.path == "A/bé😀")
        #expect(record.deleted)
        #expect(record.data == Array("hi?".utf8))
    }

    @Test(arguments: [
        #"{"path":"A/b","deleted":2}"#,
        #"{"deleted":0}"#,
        #"{"path":"A/b","data":"abc"}"#,
        #"{"path":"A/b","changeTag":1.5}"#,
        #"{"path":"A/b""#,
        #"{"path":"A\ud800x"}"#,
        #"{"path":"A/b","changeTag":99999999999999999999}"#,
    ])
    func malformedRecordsAreRefused(_ text: String) {
        var reader = JSONReader(Array(text.utf8))
        #expect(throws: (any Error).self) { _ = try Record.read(from: &reader) }
    }

    @Test func invalidUTF8InAStringIsRefused() {
        var bytes = Array(#"{"path":"A/"#.utf8)
        bytes += [0xFF, 0xFE]
        bytes += Array(#""}"#.utf8)
        var reader = JSONReader(bytes)
        #expect(throws: JSONError.self) { _ = try Record.read(from: &reader) }
    }

    @Test func genericValuesParse() throws {
        let value = try JSONValue.parse(Array(#" {"a": [1, -2, 3.25e2, "s"], "b": {"c": false}} "#.utf8))
        #expect(value["a"] == .array([.int(1), .int(-2), .double(325), .string("s")]))
        #expect(value["b"]?["c"] == .bool(false))
        var writer = JSONWriter()
        value.write(to: &writer)
        #expect(try JSONValue.parse(writer.bytes) == value)
    }

    @Test func base64MatchesKnownVectors() {
        let vectors = ["": "", "f": "Zg==", "fo": "Zm8=", "foo": "Zm9v", "foob": "Zm9vYg==", "fooba": "Zm9vYmE=", "foobar": "Zm9vYmFy"]
        for (plain, encoded) in vectors {
            #expect(Base64.encode(Array(plain.utf8)) == encoded)
            #expect(Base64.decode(encoded) == Array(plain.utf8))
        }
        #expect(Base64.decode("Zm9v!A==") == nil)
        #expect(Base64.decode("Zm9") == nil)
    }

    @Test func recordNamesAreStableAndDistinct() {
        #expect(RecordName.of("SaveGames/a") == RecordName.of("SaveGames/a"))
        #expect(RecordName.of("SaveGames/a") != RecordName.of("SaveGames/A"))
        #expect(RecordName.of("").count == 32)
        // FNV-1a-128 of the empty string is its offset basis.
        #expect(RecordName.of("") == "6c62272e07bb014262b821756295c58d")
        // Published FNV-1a-128 test vector for "a".
        #expect(RecordName.of("a") == "d228cb696f1a8caf78912b704e4a8964")
    }
}
