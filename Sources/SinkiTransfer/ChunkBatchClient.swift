import SinkiLoop
import SinkiRecord
import SinkiSupport

/// A chunk in a fetch answer: its bytes, or none when the server holds no such chunk for this token.
public struct FetchedChunk: Sendable {
    public var name: String
    /// Empty: not held.
    public var bytes: [UInt8]
}

/// Chunks several to a request (docs/protocol.md, "Chunks in batches"): `POST /v1/chunks/batch`
/// carries chunks up, `POST /v1/chunks/fetch` brings them down, both framed (`ChunkFrames`), so that
/// no chunk costs a round trip of its own.
extension SyncClient {
    /// A batch's body, its chunks never copied: each frame's header, then the chunk's own array. Each
    /// chunk's `crc32` is set (`ChunkFileReader.withChecksums`).
    static func framedBody(_ chunks: [ChunkPayload]) -> HTTPBody {
        var parts: [[UInt8]] = []
        parts.reserveCapacity(chunks.count * 2)
        for chunk in chunks {
            parts.append(ChunkFrames.header(name: chunk.ref.sha256, length: chunk.bytes.count, crc32: chunk.crc32))
            parts.append(chunk.bytes)
        }
        return .parts(parts)
    }

    /// Sends `chunks` in one `POST /v1/chunks/batch`; the answer says which the server refused (a
    /// narrowed token's chunk whose bytes do not hash to its name).
    public func sendChunks(_ chunks: [ChunkPayload], isolation: isolated (any Actor)? = #isolation) async throws(SyncError) -> ChunkBatchResponse {
        var request = request("POST", Routes.chunkBatch, timeout: 0)
        request.headers.append(("Content-Type", ChunkFrames.mediaType))
        // Stalled for a minute: the connection is gone (a batch takes seconds on the slowest link).
        request.stallTimeout = 60
        request.body = Self.framedBody(chunks)
        let response = try await send(request, isolation: isolation)
        return try await parse(response, isolation: isolation) { try ChunkBatchResponse.parse($0) }
    }

    /// Sends the batches `next` hands out, one request each, keeping up to `width` requests going: the
    /// next batch is asked for while the last ones travel, so no batch waits for the one before it (a
    /// round trip each on a slow link). `next` returns nil at the end (an empty batch is passed over);
    /// `sent` hears of each batch once the server holds it, in any order, with its bytes. Both are called
    /// from this function's task group, on `isolation`: closures that touch loop-confined state must
    /// capture it (`_ = isolation`), or Swift runs them, being async, off the loop. A chunk the server
    /// refuses (its bytes are not its name, which only damage on the way does) fails the whole stream.
    public func sendChunkStream(width: Int, next: () async throws -> [ChunkPayload]?,
                                sent: ([ChunkRef], Int64) async throws -> Void,
                                isolation: isolated (any Actor)? = #isolation) async throws {
        let bound = LoopBound(self, loop: http.loop)
        try await withThrowingTaskGroup(of: ([ChunkRef], Int64).self) { group in
            var running = 0
            var ended = false
            while true {
                while !ended && running < max(1, width) {
                    guard let batch = try await next() else {
                        ended = true
                        break
                    }
                    if batch.isEmpty { continue }
                    group.addTask { [isolation] in try await Self.sendBatch(bound, batch, isolation: isolation) }
                    running += 1
                }
                guard running > 0, let (refs, bytes) = try await group.next() else { return }
                running -= 1
                try await sent(refs, bytes)
            }
        }
    }

    /// Sends one batch on the loop (the box is only opened there): its chunks and bytes.
    private static func sendBatch(_ client: LoopBound<SyncClient>, _ batch: [ChunkPayload],
                                  isolation: isolated (any Actor)?) async throws -> ([ChunkRef], Int64) {
        (batch.map(\.ref), try await client.value.upload(batch))
    }

    /// Sends `chunks` in one request and returns their bytes; throws when the server refused one (its
    /// bytes are not its name, which only damage on the way does).
    public func upload(_ chunks: [ChunkPayload], isolation: isolated (any Actor)? = #isolation) async throws(SyncError) -> Int64 {
        let answer = try await sendChunks(chunks)
        if let refused = answer.refused.first {
            throw .badResponse("the server refused chunk \(refused.prefix(16))… as other bytes than its name says")
        }
        return chunks.reduce(0) { $0 + Int64($1.bytes.count) }
    }

    /// Fetches `names` (each once) in one `POST /v1/chunks/fetch`: a frame per name, in the order
    /// asked (a chunk the server holds none of comes with no bytes).
    public func fetchChunks(_ names: [String], isolation: isolated (any Actor)? = #isolation) async throws(SyncError) -> [FetchedChunk] {
        var request = request("POST", Routes.fetchChunks, timeout: 0)
        request.headers = [("Accept", ChunkFrames.mediaType), ("Content-Type", "application/json")]
        request.stallTimeout = 60
        request.body = .bytes(ChunkNamesRequest(chunks: names).jsonBytes)
        let limit = names.count * (ChunkFrames.Kind.answer.headerBytes + Self.maxFetchedChunkBytes)
        let response: HTTPResponse
        do { response = try await http.send(request, sink: .memory(limit: limit), isolation: isolation) } catch { throw .transport(error) }
        guard (200..<300).contains(response.status) else { throw Self.failure(response, url: request.url) }
        let frames = try await parse(response, isolation: isolation) { body in try Self.frames(body) }
        guard frames.map(\.name) == names else {
            throw .badResponse("the answer to a fetch of \(names.count) chunk(s) holds other chunks than asked, or not all of them")
        }
        return frames
    }

    /// The frames of a fetch answer.
    static func frames(_ body: [UInt8]) throws -> [FetchedChunk] {
        var reader = ChunkFrameReader(.answer, maxLength: maxFetchedChunkBytes)
        var out: [FetchedChunk] = []
        try body.withUnsafeBytes { buffer in
            try reader.feed(buffer) { event in
                switch event {
                case let .begin(name, length, _):
                    out.append(FetchedChunk(name: name, bytes: []))
                    out[out.count - 1].bytes.reserveCapacity(length)
                case let .bytes(bytes): out[out.count - 1].bytes += bytes
                case .end: break
                }
            }
        }
        try reader.finish()
        return out
    }

    /// A chunk is at most this large (twice `ChunkProfile.large.maximum`); a longer frame is not one.
    public static let maxFetchedChunkBytes = 4 << 20
}
