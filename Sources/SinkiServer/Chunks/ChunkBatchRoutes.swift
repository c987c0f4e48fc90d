import Glibc
import SinkiRecord
import SinkiSupport

/// `POST /v1/chunks/batch`: several chunks in one request (docs/protocol.md, "Chunks in batches"),
/// framed (`ChunkFrames`). Each frame is written into a slot of the user's current pack as it arrives
/// and takes its name when its last byte is in and its CRC-32 checked, as a chunk sent whole in a tus `POST` with an
/// `Upload-Checksum` does (`DirectChunkWriter`; a mismatch answers `460` and ends the batch): a chunk
/// held already at that size is touched, and a narrowed token's bytes must hash to their name. So a
/// receiver may fetch a batch's first chunks while its last ones travel, and a body cut off keeps the
/// chunks whole by then (the sender asks which are missing before it sends again). Answers `200` with
/// how many were taken and which were refused.
struct ChunkBatchRoute: Route {
    let chunks: ChunkStore
    /// The longest body (`413 too-large` beyond).
    static let maxBodyBytes: Int64 = 64 << 20
    /// The most frames one body may carry (`413` beyond), as `missing` takes names.
    static let maxFrames = ChunkNamesRequest.mostToCheck

    func begin(_ request: Request) throws -> BodyPolicy {
        try request.requireWritable()
        let type = MediaType.essence(of: request.header("Content-Type"))
        guard type == ChunkFrames.mediaType else {
            throw Problem(.unsupportedMediaType, detail: "\(request.path) takes \(ChunkFrames.mediaType), not \(type.map(quoted) ?? "a body without Content-Type")")
        }
        if let length = request.contentLength, Int64(length) > Self.maxBodyBytes {
            throw Problem(.tooLarge, detail: "a batch of chunks is at most \(Self.maxBodyBytes) bytes; this one is \(length)")
        }
        return .stream(ChunkBatchWriter(chunks: chunks, user: request.identity.user, prefix: request.scopePrefix,
                                        maxUploadBytes: request.identity.scope.maxUploadBytes))
    }

    func respond(to request: Request) throws -> Reply {
        guard let writer = request.sink as? ChunkBatchWriter else { throw Problem(.internalError, detail: "bug: a chunk batch without its writer") }
        return .response(.json(try writer.finish().jsonBytes))
    }
}

/// Takes the body of `POST /v1/chunks/batch` as it arrives, a frame at a time (at most one chunk
/// under way). Confined to the worker thread of its request.
final class ChunkBatchWriter: BodySink {
    private let chunks: ChunkStore
    private let user: String
    private let prefix: String?
    private let maxUploadBytes: Int64?
    private var reader = ChunkFrameReader(.upload, maxLength: Int(ChunkStore.maxChunkBytes))
    private var current: DirectChunkWriter?
    /// Frames begun (the reader counts them too, but it is busy while its events are handled).
    private var frames = 0
    private var stored = 0
    private var refused: [String] = []

    init(chunks: ChunkStore, user: String, prefix: String?, maxUploadBytes: Int64?) {
        self.chunks = chunks
        self.user = user
        self.prefix = prefix
        self.maxUploadBytes = maxUploadBytes
    }

    func write(_ piece: UnsafeRawBufferPointer) throws {
        guard reader.offset + Int64(piece.count) <= ChunkBatchRoute.maxBodyBytes else {
            throw Problem(.tooLarge, detail: "a batch of chunks is at most \(ChunkBatchRoute.maxBodyBytes) bytes")
        }
        do {
            try reader.feed(piece) { event throws in
                switch event {
                case let .begin(name, length, crc32):
                    frames += 1
                    guard frames <= ChunkBatchRoute.maxFrames else {
                        throw Problem(.tooLarge, detail: "a batch carries at most \(ChunkBatchRoute.maxFrames) chunks")
                    }
                    if let most = maxUploadBytes, Int64(length) > most {
                        throw Problem(.beyondScope, detail: "chunk \(name) of \(length) bytes is over the token's maxUploadBytes of \(most)",
                                      field: "maxUploadBytes")
                    }
                    current = try DirectChunkWriter(chunks: chunks, user: user, name: name, length: Int64(length), checksum: crc32.map { (.crc32, $0) }, prefix: prefix)
                case let .bytes(bytes):
                    try current?.write(bytes)
                case .end:
                    guard let writer = current else { return }
                    current = nil
                    if try writer.commit() == .refused { refused.append(writer.name) } else { stored += 1 }
                }
            }
        } catch let error as ChunkFrameError {
            current?.abandon()
            current = nil
            throw Problem(error.kind == .tooLong ? .tooLarge : .badRequest, detail: "\(error)")
        } catch {
            current?.abandon()
            current = nil
            throw error
        }
    }

    /// The body is in: what became of its chunks. `400` when it ended inside a frame.
    func finish() throws -> ChunkBatchResponse {
        do {
            try reader.finish()
        } catch {
            throw Problem(.badRequest, detail: "\(error)")
        }
        return ChunkBatchResponse(stored: stored, refused: refused)
    }

    /// The client went away: the frame under way goes (the whole ones before it are named already).
    func abandon() {
        current?.abandon()
        current = nil
    }
}

/// `POST /v1/chunks/fetch`: the bytes of several chunks in one answer, framed (`ChunkFrames`) in the
/// order asked, each once; a chunk the token may not read (not held, or for a narrowed token not
/// uploaded by it) is a frame of length 0. Every chunk's pack is opened before the answer starts, so
/// one removed or repacked meanwhile is still sent whole, and the answer streams from the packs as libmicrohttpd sends it: nothing is held in memory but the frames' headers.
struct ChunkFetchRoute: Route {
    let chunks: ChunkStore
    static let bodyLimit = 64 << 10

    func begin(_ request: Request) throws -> BodyPolicy {
        try request.requireJSON()
        return .buffer(limit: Self.bodyLimit)
    }

    func respond(to request: Request) throws -> Reply {
        let names = try ChunkStore.checkedNames(request.decodeBody(ChunkNamesRequest.parse).chunks, most: ChunkNamesRequest.mostToFetch)
        let user = request.identity.user
        let held = try chunks.visible(user: user, prefix: request.scopePrefix, names)
        var frames: [ChunkFrameSource.Frame] = []
        var total: Int64 = 0
        for (name, entry) in zip(names, held) {
            // Removed (garbage, damage) since it was looked up: as not held.
            var opened: OpenChunk?
            if let entry { opened = try chunks.open(user: user, chunk: name, entry: entry) }
            let size = opened?.entry.size ?? 0
            frames.append(ChunkFrameSource.Frame(header: ChunkFrames.header(name: name, length: Int(size)), file: opened?.file,
                                                 offset: opened?.entry.offset ?? 0, size: size, start: total))
            total += Int64(ChunkFrames.Kind.answer.headerBytes) + size
        }
        return .response(Response(status: 200, contentType: ChunkFrames.mediaType, body: .stream(ChunkFrameSource(frames), length: total)))
    }
}

/// The answer of `POST /v1/chunks/fetch` as libmicrohttpd pulls it: each frame's header, then its
/// chunk's bytes from its open file. Used by the worker thread of its connection only.
final class ChunkFrameSource: ContentSource {
    struct Frame {
        var header: [UInt8]
        /// Nil for a chunk not held (a frame of length 0).
        var file: FileDescriptor?
        /// Where the chunk's bytes start in `file` (its pack).
        var offset: Int64
        var size: Int64
        /// Where the frame starts in the answer.
        var start: Int64
    }

    private let frames: [Frame]
    /// The frame the last read was in: reads go forward.
    private var cursor = 0

    init(_ frames: [Frame]) { self.frames = frames }

    func read(at offset: Int64, into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        if cursor >= frames.count || frames[cursor].start > offset { cursor = 0 }
        while cursor + 1 < frames.count && frames[cursor + 1].start <= offset { cursor += 1 }
        let frame = frames[cursor]
        let within = offset - frame.start
        let headerBytes = Int64(ChunkFrames.Kind.answer.headerBytes)
        if within < headerBytes {
            let count = min(buffer.count, Int(headerBytes - within))
            frame.header.withUnsafeBytes { header in
                buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: header[Int(within)..<Int(within) + count]))
            }
            return count
        }
        guard let file = frame.file else { throw SystemError("read", errno: EIO, path: "bug: a chunk frame read past its header") }
        let at = within - headerBytes
        let want = Int(min(Int64(buffer.count), frame.size - at))
        let got = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]), at: frame.offset + at)
        guard got == want else { throw SystemError("read", errno: EIO, path: "\(file.path): short at \(frame.offset + at)") }
        return got
    }
}
