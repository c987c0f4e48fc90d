import SinkiRecord
import SinkiTestSupport
import Testing

/// Records in frames (issue 22: inline content raw on the wire, not base64): the same batches and pages
/// as JSON carries, however the body is cut; a body cut off or out of shape refused with where.
@Suite struct RecordFramesTests {
    static func records(_ count: Int, seed: UInt64) -> [Record] {
        var random = SeededRandom(seed: seed)
        return (0..<count).map { index in
            let size = Int(random.next() % 9_000)
            let data: [UInt8]? = index % 5 == 4 ? nil : (0..<size).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            var record = Record(path: "Saves/f\(index) \u{e9}.bin", type: index % 3 == 0 ? "keep-both" : "newest", data: data,
                                size: Int64(size), sha256: "ab\(index)", mode: 0o640, modifiedAt: Int64(index) * 1_000_000_007,
                                device: "d\u{1}\"\n")
            record.baseTag = Int64(index)
            if index % 7 == 6 {
                record.deleted = true
                record.data = nil
            }
            if index % 11 == 10 { record.data = [] }
            return record
        }
    }

    /// `bytes` fed to a reader in pieces cut by `random`.
    static func streamed(_ bytes: [UInt8], limits: RecordFramesReader.Limits = .init(),
                         random: inout SeededRandom) throws -> (records: [Record], envelope: [UInt8]) {
        var reader = RecordFramesReader(limits: limits)
        var start = 0
        while start < bytes.count {
            let end = min(bytes.count, start + 1 + Int(random.next() % UInt64([1, 4, 300, 70_000][Int(random.next() % 4)])))
            try bytes[start..<end].withUnsafeBytes { try reader.take($0) }
            start = end
        }
        return try reader.finish()
    }

    @Test func aBatchInFramesIsTheBatchInJSONHoweverItIsCut() throws {
        var random = SeededRandom(seed: 22)
        for count in [0, 1, 2, 40] {
            let batch = ModifyRequest(records: Self.records(count, seed: UInt64(count)))
            let frames = batch.framesBytes
            #expect(try ModifyRequest.parse(frames: frames) == batch)
            #expect(try ModifyRequest.parse(frames: frames) == ModifyRequest.parse(batch.jsonBytes))
            for _ in 0..<30 { #expect(try ModifyRequest(frames: Self.streamed(frames, random: &random)) == batch) }
        }
    }

    @Test func contentTravelsRawSoABatchIsAThirdSmallerThanInJSON() {
        let records = (0..<100).map { index in
            Record(path: "bench/d000/f\(index).bin", type: "keep-both", data: [UInt8](repeating: UInt8(index), count: 4_107),
                   size: 4_096, sha256: String(repeating: "a", count: 64), mode: 0o644, modifiedAt: 1_764_422_400_123_456_789, device: "A")
        }
        let batch = ModifyRequest(records: records)
        let content = 100 * 4_107
        // Base64 alone is 4/3 of the content; frames add a few hundred bytes a record for the fields.
        #expect(batch.jsonBytes.count > content * 4 / 3)
        #expect(batch.framesBytes.count < content + 100 * 300)
    }

    @Test func aPageInFramesIsThePageInJSON() throws {
        let news = InFlightNews(position: 9, ended: ["s1"])
        for page in [RecordPage(records: Self.records(30, seed: 5), token: "s1.42", more: true),
                     RecordPage(records: [], token: "", more: false, floor: 7),
                     RecordPage(records: Self.records(3, seed: 6), token: "s.1", more: false, inflight: news),
                     RecordPage(records: Self.records(1, seed: 7), token: "s.12", more: false, omitted: 11)] {
            let parsed = try RecordPage.parse(page.framesBytes, contentType: "Application/Vnd.Sinki.Records; v=1")
            #expect(parsed == page)
            #expect(try RecordPage.parse(page.jsonBytes, contentType: "application/json") == page)
        }
    }

    @Test func aStreamOfPagesReadsBackPageByPageHoweverItIsCut() throws {
        let pages = [RecordPage(records: Self.records(4, seed: 11), token: "s.1", more: true),
                     RecordPage(records: [], token: "s.1", more: false, inflight: InFlightNews(position: 3, ended: ["x"])),
                     RecordPage(records: Self.records(2, seed: 12), token: "s.9", more: false)]
        let bytes = pages.flatMap(\.framesBytes)
        let ends = pages.indices.map { index in pages[...index].reduce(0) { $0 + $1.framesBytes.count } }
        for step in [1, 7, 64, bytes.count] {
            var stream = RecordPageStream()
            var read: [RecordPage] = []
            var offset = 0
            while offset < bytes.count {
                let end = min(bytes.count, offset + step)
                read += try bytes[offset..<end].withUnsafeBytes { try stream.take($0) }
                offset = end
                // A page is handed over as soon as its envelope is in, not later.
                #expect(read.count == ends.filter { $0 <= offset }.count, "step \(step) at \(offset)")
            }
            try stream.finish()
            #expect(read == pages, "step \(step)")
        }
        // Cut inside a page, the answer is refused at its end; cut between pages, it is whole.
        for end in 1..<bytes.count {
            var stream = RecordPageStream()
            _ = try bytes[..<end].withUnsafeBytes { try stream.take($0) }
            if ends.contains(end) {
                try stream.finish()
            } else {
                #expect(throws: RecordFramesError.self, "cut at \(end)") { try stream.finish() }
            }
        }
    }

    @Test func aBodyCutAnywhereIsRefusedNotReadShort() throws {
        let frames = ModifyRequest(records: Self.records(6, seed: 1)).framesBytes
        for end in 0..<frames.count {
            #expect(throws: RecordFramesError.self, "cut at \(end)") { try RecordFramesReader.parse(Array(frames[..<end])) }
        }
    }

    /// A frame of the given kind and payload.
    static func frame(_ kind: Character, _ payload: [UInt8]) -> [UInt8] {
        let count = UInt32(payload.count)
        return [UInt8(ascii: kind.unicodeScalars.first!), UInt8(count >> 24), UInt8((count >> 16) & 255), UInt8((count >> 8) & 255), UInt8(count & 255)] + payload
    }

    static let record = Array(#"{"path":"S/a","size":1}"#.utf8)
    static let end = frame("E", Array("{}".utf8))

    @Test func framesOutOfShapeAreRefusedSayingWhere() throws {
        func refusal(_ body: [UInt8]) -> String {
            do {
                _ = try ModifyRequest.parse(frames: body)
                return "read"
            } catch {
                return "\(error)"
            }
        }
        #expect(refusal(Self.frame("D", [1]) + Self.end).contains("does not follow a record"))
        #expect(refusal(Self.frame("R", Self.record) + Self.frame("D", [1]) + Self.frame("D", [2]) + Self.end).contains("frame at byte 34"))
        #expect(refusal(Self.frame("X", []) + Self.end).contains("unknown frame kind"))
        #expect(refusal(Self.frame("R", Self.record) + Self.end + Self.frame("R", Self.record)).contains("after the envelope"))
        #expect(refusal(Self.frame("R", Array(#"{"path":"S/a","data":"AA=="}"#.utf8)) + Self.end).contains("D frame"))
        #expect(refusal(Self.frame("R", Array(#"{"path":"S/a""#.utf8)) + Self.end).contains("at byte 18"))
        #expect(refusal(Self.frame("R", Self.record) + Self.frame("E", Array("[]".utf8))) != "read")
        #expect(refusal(Self.frame("R", Array(#"{"size":1}"#.utf8)) + Self.end).contains("field path"))
        // Members of the envelope and of a record that this version does not know are skipped.
        let later = Self.frame("R", Array(#"{"path":"S/a","later":[1]}"#.utf8)) + Self.frame("E", Array(#"{"later":{"x":1}}"#.utf8))
        #expect(try ModifyRequest.parse(frames: later).records.map(\.path) == ["S/a"])
    }

    @Test func aFramePastItsLimitIsRefusedFromItsHeader() throws {
        let limits = RecordFramesReader.Limits(maxRecords: 2, maxRecordBytes: 100, maxDataBytes: 10, maxEnvelopeBytes: 4)
        func refusal(_ body: [UInt8]) -> String {
            var reader = RecordFramesReader(limits: limits)
            do {
                // Only the header: the payload is never waited for.
                try body.withUnsafeBytes { try reader.take($0) }
                _ = try reader.finish()
                return "read"
            } catch {
                return "\(error)"
            }
        }
        let header = { (kind: Character, count: UInt32) -> [UInt8] in Array(Self.frame(kind, [UInt8](repeating: 0, count: Int(count))).prefix(5)) }
        #expect(refusal(header("R", 101)).contains("over the 100 bytes"))
        #expect(refusal(Self.frame("R", Self.record) + header("D", 11)).contains("over the 10 bytes"))
        #expect(refusal(header("E", 5)).contains("over the 4 bytes"))
        #expect(refusal(Self.frame("R", Self.record) + Self.frame("R", Self.record) + header("R", 1)).contains("at most 2 records"))
        #expect(refusal(Self.frame("R", Self.record) + Self.frame("D", [UInt8](repeating: 7, count: 10)) + Self.frame("E", Array("{}".utf8))) == "read")
    }

    @Test func acceptHeadersNameFramesOnlyWhenTheyWantThem() {
        #expect(RecordFrames.accepted(by: "application/vnd.sinki.records, application/json;q=0.5"))
        #expect(RecordFrames.accepted(by: "application/json, Application/Vnd.Sinki.Records ; q=0.9"))
        #expect(!RecordFrames.accepted(by: "application/json"))
        #expect(!RecordFrames.accepted(by: "*/*"))
        #expect(!RecordFrames.accepted(by: "application/vnd.sinki.records;q=0"))
        #expect(!RecordFrames.accepted(by: nil))
        #expect(RecordFrames.names("application/vnd.sinki.records; charset=binary"))
        #expect(!RecordFrames.names("application/json"))
    }
}
