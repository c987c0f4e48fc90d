import SinkiRecord
import SinkiTestSupport
import Testing

/// The modify batch read as it arrives (issue 24 item 4): the same batches, and the same refusals, as
/// reading the whole text in one piece, however the text is cut; bounded by its limits.
@Suite struct ModifyRequestReaderTests {
    /// The batch read in one piece, as the server read it before: the oracle.
    static func wholeParse(_ bytes: [UInt8]) throws -> ModifyRequest {
        var reader = JSONReader(bytes)
        var records: [Record]?
        try reader.readObject { reader, key in
            if key == "records" {
                var list: [Record] = []
                try reader.readArray { reader in list.append(try Record.read(from: &reader)) }
                records = list
            } else {
                try reader.skipValue()
            }
        }
        try reader.finish()
        guard let records else { throw NoRecords() }
        return ModifyRequest(records: records)
    }

    /// `bytes` fed in pieces cut by `random`.
    static func streamed(_ bytes: [UInt8], limits: ModifyRequestReader.Limits = .init(), random: inout SeededRandom) throws -> ModifyRequest {
        var reader = ModifyRequestReader(limits: limits)
        var start = 0
        while start < bytes.count {
            let end = min(bytes.count, start + 1 + Int(random.next() % UInt64([1, 7, 300, 70_000][Int(random.next() % 4)])))
            try bytes[start..<end].withUnsafeBytes { try reader.take($0) }
            start = end
        }
        return try reader.finish()
    }

    static let samples: [String] = [
        #"{"records":[]}"#,
        #" { "records" : [ {"path":"S/a","data":"eJwLAQAAVgBW","size":1} , {"path":"S/b","deleted":1} ] } "#,
        #"{"other":{"records":[1,2]},"records":[{"path":"S/[x]{y}","device":"a\"}]"}],"tail":[{"x":"]"}]}"#,
        #"{"rec\u006frds":[{"path":"S/esc","asset":{"id":"","size":3,"sha256":"00","chunks":[["aa",1],["bb",2]]}}]}"#,
        #"{"records":[{"path":"S/1"}],"records":[{"path":"S/2"},{"path":"S/3","type":"save","x":[[{"y":"\\"}]]}]}"#,
        #"{"records":[{"path":"S/a","data":null,"movedFrom":null,"baseTag":null}]}"#,
    ]

    @Test func theSameBatchesHoweverTheTextIsCut() throws {
        var random = SeededRandom(seed: 24)
        for sample in Self.samples {
            let bytes = Array(sample.utf8)
            let expected = try Self.wholeParse(bytes)
            for _ in 0..<50 { #expect(try Self.streamed(bytes, random: &random) == expected, "\(sample)") }
            #expect(try ModifyRequest.parse(bytes) == expected)
        }
        // A batch as agents send it, with content.
        let records = (0..<40).map { (index: Int) -> Record in
            let data: [UInt8] = (0..<(index * 977)).map { (at: Int) -> UInt8 in UInt8(truncatingIfNeeded: at * 31 + index) }
            return Record(path: "Saves/\(index).bin", type: "binary", data: data,
                   size: Int64(index * 977), sha256: "ab", mode: 0o644, modifiedAt: 1, device: "d\u{1}\"\n")
        }
        let batch = ModifyRequest(records: records)
        for _ in 0..<20 { #expect(try Self.streamed(batch.jsonBytes, random: &random) == batch) }
    }

    /// Every text the whole reading refuses is refused, and every one it reads is read the same, for
    /// thousands of damaged batches (bytes changed, cut short, spliced).
    @Test func damagedTextsFareAsInOnePiece() throws {
        var random = SeededRandom(seed: 2024)
        let alphabet = Array(#"{}[]",:\ 0an"#.utf8)
        var refused = 0
        for round in 0..<6_000 {
            var bytes = Array(Self.samples[round % Self.samples.count].utf8)
            for _ in 0..<(1 + Int(random.next() % 3)) {
                let at = Int(random.next() % UInt64(bytes.count))
                switch random.next() % 4 {
                case 0: bytes[at] = alphabet[Int(random.next() % UInt64(alphabet.count))]
                case 1: bytes.remove(at: at)
                case 2: bytes.insert(alphabet[Int(random.next() % UInt64(alphabet.count))], at: at)
                default: bytes = Array(bytes[..<at])
                }
                if bytes.isEmpty { bytes = [UInt8(ascii: "{")] }
            }
            let whole = Result { try Self.wholeParse(bytes) }
            let streamed = Result { try Self.streamed(bytes, random: &random) }
            switch (whole, streamed) {
            case let (.success(a), .success(b)): #expect(a == b, "\(String(decoding: bytes, as: UTF8.self))")
            case (.failure, .failure): refused += 1
            default: Issue.record("one reading refused what the other read: \(String(decoding: bytes, as: UTF8.self)): \(whole) / \(streamed)")
            }
        }
        #expect(refused > 1_000)
    }

    @Test func anErrorNamesItsByteInTheWholeText() throws {
        var random = SeededRandom(seed: 7)
        let text = #"{"records":[{"path":"S/a","data":"eJwLAQAAVgBW"},{"path":"S/b","size":x}]}"#
        let at = Array(text.utf8).firstIndex(of: UInt8(ascii: "x"))!
        #expect(throws: JSONError.self) { try Self.streamed(Array(text.utf8), random: &random) }
        do {
            _ = try Self.streamed(Array(text.utf8), random: &random)
        } catch let error as JSONError {
            #expect(error.offset == at)
        }
        // Outside the records too.
        let envelope = #"{  "records" :   [{"path":"S/a","data":"eJwLAQAAVgBW"}  ,  {"path":"S/b"}],\#n\#n  "x":    tru}"#
        do {
            _ = try Self.streamed(Array(envelope.utf8), random: &random)
            Issue.record("read a broken envelope")
        } catch let error as JSONError {
            #expect(error.offset == Array(envelope.utf8).count - 4)
        }
    }

    @Test func limitsRefuseBeforeTheRestIsHeld() throws {
        var random = SeededRandom(seed: 9)
        let three = Array(#"{"records":[{"path":"S/a"},{"path":"S/b"},{"path":"S/c"}]}"#.utf8)
        #expect(throws: BatchLimitError.self) { try Self.streamed(three, limits: .init(maxRecords: 2), random: &random) }
        #expect(try Self.streamed(three, limits: .init(maxRecords: 3), random: &random).records.count == 3)
        let big = ModifyRequest(records: [Record(path: "S/big", data: [UInt8](repeating: 7, count: 30_000), size: 30_000)]).jsonBytes
        #expect(throws: BatchLimitError.self) { try Self.streamed(big, limits: .init(maxRecordBytes: 20_000), random: &random) }
        // Whatever a client puts beside the records is bounded too.
        let padded = Array(#"{"pad":""#.utf8) + [UInt8](repeating: UInt8(ascii: "a"), count: 10_000) + Array(#"","records":[]}"#.utf8)
        #expect(throws: BatchLimitError.self) { try Self.streamed(padded, limits: .init(maxEnvelopeBytes: 4_096), random: &random) }
        // Whitespace is not held, however much of it there is.
        let spaced = Array(#"{"records":"#.utf8) + [UInt8](repeating: 0x20, count: 100_000) + Array(#"[{"path":"S/a"}]}"#.utf8)
        #expect(try Self.streamed(spaced, limits: .init(maxEnvelopeBytes: 4_096), random: &random).records.map(\.path) == ["S/a"])
        // Nesting is bounded as in one piece, inside a record or out.
        let deep = Array(#"{"records":[{"path":"A/b","x":"#.utf8) + [UInt8](repeating: UInt8(ascii: "["), count: 200_000)
        #expect(throws: JSONError.self) { try Self.streamed(deep, random: &random) }
        let deepOut = Array(#"{"x":"#.utf8) + [UInt8](repeating: UInt8(ascii: "{"), count: 200_000)
        #expect(throws: JSONError.self) { try Self.streamed(deepOut, random: &random) }
    }
}

private struct NoRecords: Error {}
