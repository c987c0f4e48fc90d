import SinkiSupport
import Testing

/// `ChunkFrames` and `ChunkFrameReader`: a body of frames read back whatever pieces it arrives in.
@Suite struct ChunkFramesTests {
    struct Read: Equatable {
        var name: String
        var crc32: [UInt8]?
        var bytes: [UInt8]
    }

    func read(_ body: [UInt8], _ kind: ChunkFrames.Kind, pieces: Int) throws -> [Read] {
        var reader = ChunkFrameReader(kind, maxLength: 1 << 20)
        var out: [Read] = []
        var ended = 0
        var at = 0
        while at < body.count {
            let end = min(body.count, at + pieces)
            try body[at..<end].withUnsafeBytes { piece in
                try reader.feed(piece) { event in
                    switch event {
                    case let .begin(name, length, crc32):
                        out.append(Read(name: name, crc32: crc32, bytes: []))
                        out[out.count - 1].bytes.reserveCapacity(length)
                    case let .bytes(bytes): out[out.count - 1].bytes += bytes
                    case .end: ended += 1
                    }
                }
            }
            at = end
        }
        try reader.finish()
        #expect(ended == out.count && reader.frames == out.count && reader.offset == Int64(body.count))
        return out
    }

    @Test func anUploadReadsBackInPiecesOfAnySize() throws {
        let chunks = [[UInt8](repeating: 7, count: 1), (0..<5000).map { UInt8(truncatingIfNeeded: $0 * 13) }, [1, 2, 3]]
        let body = ChunkFrames.encode(chunks.map { (Digest.sha256Hex($0), $0) })
        let expected = chunks.map { Read(name: Digest.sha256Hex($0), crc32: Digest.hash($0, .crc32), bytes: $0) }
        #expect(body.count == chunks.reduce(0) { $0 + $1.count } + 3 * ChunkFrames.Kind.upload.headerBytes)
        for pieces in [1, 2, 35, 36, 37, 40, 41, 4096, body.count] {
            #expect(try read(body, .upload, pieces: pieces) == expected, "pieces of \(pieces)")
        }
    }

    @Test func anAnswerCarriesNoCRCAndMayHoldEmptyFrames() throws {
        let name = Digest.sha256Hex([9])
        let body = ChunkFrames.header(name: name, length: 0) + ChunkFrames.header(name: name, length: 1) + [9]
        #expect(try read(body, .answer, pieces: 5) == [Read(name: name, crc32: nil, bytes: []), Read(name: name, crc32: nil, bytes: [9])])
        // The same empty frame in an upload is refused: a chunk is at least a byte.
        #expect(throws: ChunkFrameError.self) { try read(ChunkFrames.header(name: name, length: 0, crc32: [0, 0, 0, 0]), .upload, pieces: 64) }
    }

    @Test func aBodyEndingInsideAFrameOrAFrameTooLongIsRefusedWithWhere() throws {
        let chunk: [UInt8] = Array(repeating: 1, count: 100)
        let body = ChunkFrames.encode([(Digest.sha256Hex(chunk), chunk), (Digest.sha256Hex(chunk), chunk)])
        for cut in [1, 39, 40, 139, 141, body.count - 1] {
            do {
                _ = try read(Array(body.prefix(cut)), .upload, pieces: 7)
                Issue.record("a body cut at \(cut) read as whole")
            } catch let error as ChunkFrameError {
                #expect(error.kind == .truncated, "cut at \(cut)")
                #expect(error.offset == Int64(cut), "cut at \(cut)")
            }
        }
        let long = ChunkFrames.header(name: Digest.sha256Hex(chunk), length: (1 << 20) + 1, crc32: [0, 0, 0, 0])
        do {
            _ = try read(long, .upload, pieces: 3)
            Issue.record("a frame over the longest chunk read")
        } catch let error as ChunkFrameError {
            #expect(error.kind == .tooLong && error.frame == 0 && error.offset == 0)
            #expect(error.description.contains("1 to 1048576 bytes"))
        }
    }
}
