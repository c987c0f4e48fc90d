import SinkiRecord

/// Fuzz target `record-json` (docs/fuzzing.md): the bytes as every JSON document a peer sends the agent
/// or the server — a change-feed or look-up page, a modify request and its response, a problem document,
/// any value through the generic reader — and as a page or a modify request in frames, and as a streamed
/// feed answer (pages in frames back to back). Each parse either throws or gives a value that is written out
/// and read back unchanged: what one side writes, the other reads as it was meant.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRecordJSON(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    checkDocuments(input)
    return 0
}

func require(_ condition: Bool, _ what: @autoclosure () -> String) {
    if !condition { fatalError("record-json invariant broken: \(what())") }
}

struct NotAProblem: Error {}

func roundTrips<T: Equatable>(_ name: String, _ value: T, _ write: (T) -> [UInt8], _ read: ([UInt8]) throws -> T) {
    let written = write(value)
    do {
        let back = try read(written)
        require(back == value, "\(name) read back differs: \(String(decoding: written, as: UTF8.self).prefix(300))")
    } catch {
        require(false, "\(name) written as \(String(decoding: written, as: UTF8.self).prefix(300)) does not read back: \(error)")
    }
}

func checkDocuments(_ input: [UInt8]) {
    if let page = try? RecordPage.parse(input) {
        roundTrips("RecordPage", page, { $0.jsonBytes }, RecordPage.parse)
    }
    if let request = try? ModifyRequest.parse(input) {
        roundTrips("ModifyRequest", request, { $0.jsonBytes }, ModifyRequest.parse(_:))
    }
    // The same documents in frames (docs/protocol.md, "Records in frames"): read back as written, and
    // the same as their JSON.
    if let page = try? RecordPage.parse(input, contentType: RecordFrames.mediaType) {
        roundTrips("RecordPage in frames", page, { $0.framesBytes }, { try RecordPage.parse($0, contentType: RecordFrames.mediaType) })
        roundTrips("RecordPage from frames", page, { $0.jsonBytes }, RecordPage.parse)
    }
    if let request = try? ModifyRequest.parse(frames: input) {
        roundTrips("ModifyRequest in frames", request, { $0.framesBytes }, ModifyRequest.parse(frames:))
        roundTrips("ModifyRequest from frames", request, { $0.jsonBytes }, ModifyRequest.parse(_:))
    }
    // A streamed feed answer: the pages it holds, read whole and read in two pieces cut anywhere, are
    // the same pages, and written out again read back as they were.
    var stream = RecordPageStream()
    if let pages = try? input.withUnsafeBytes({ try stream.take($0) }) {
        let cut = input.isEmpty ? 0 : Int(input[0]) % (input.count + 1)
        var halves = RecordPageStream()
        let again = try? input[..<cut].withUnsafeBytes { try halves.take($0) } + input[cut...].withUnsafeBytes { try halves.take($0) }
        require(again == pages, "a streamed answer cut at \(cut) reads as other pages")
        var written = RecordPageStream()
        let back = try? pages.flatMap(\.framesBytes).withUnsafeBytes { try written.take($0) }
        require(back == pages, "streamed pages written out do not read back")
    }
    if let response = try? ModifyResponse.parse(input) {
        roundTrips("ModifyResponse", response, { $0.jsonBytes }, ModifyResponse.parse)
    }
    if let problem = Problem.parse(input) {
        roundTrips("Problem", problem, { $0.jsonBytes }, { bytes in
            guard let back = Problem.parse(bytes) else { throw NotAProblem() }
            return back
        })
    }
    if let value = try? JSONValue.parse(input) {
        roundTrips("JSONValue", value, { value in
            var writer = JSONWriter()
            value.write(to: &writer)
            return writer.bytes
        }, JSONValue.parse)
    }
    // One record alone, as a look-up answer or a stored upload carries it.
    var reader = JSONReader(input)
    if let record = try? Record.read(from: &reader), (try? reader.finish()) != nil {
        roundTrips("Record", record, { $0.jsonBytes() }, { bytes in
            var reader = JSONReader(bytes)
            let back = try Record.read(from: &reader)
            try reader.finish()
            return back
        })
    }
}
