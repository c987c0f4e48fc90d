import SinkiLoop
import SinkiRecord
import SinkiSupport

extension TusClient {
    /// Sends one chunk as an upload of its own: its bytes in the creating `POST` (creation-with-upload)
    /// when the server offers it, else in a `PATCH`, each with a checksum when offered (CRC-32 by
    /// preference). A body cut off is finished from the offset `HEAD` gives. Returns the bytes sent.
    public func uploadChunk(_ chunk: ChunkPayload, isolation: isolated (any Actor)? = #isolation) async throws(TusError) -> Int64 {
        let capabilities = try await discover()
        let length = Int64(chunk.bytes.count)
        let metadata = TusMetadata(text: [(Tus.chunkMetadataKey, chunk.ref.sha256)])
        var failures = 0
        var url: String?
        var offset: Int64 = 0
        var sent: Int64 = 0
        while true {
            do throws(TusError) {
                if let at = url {
                    // Where a cut-off body left it: the server's offset, then the rest.
                    guard let (now, declared) = try await head(at), declared == nil || declared == length else {
                        url = nil
                        offset = 0
                        continue
                    }
                    offset = min(now, length)
                    if offset == length { return sent }
                    let patch = request("PATCH", at, headers: headers(for: chunk, from: offset, capabilities) + [("Upload-Offset", String(offset))],
                                        body: .bytes(Array(chunk.bytes[Int(offset)...])))
                    let response = try await send(patch)
                    guard response.isSuccess else { throw Self.failure(response, url: at, step: "sending a chunk") }
                    sent += length - offset
                    let reached = response.header("Upload-Offset").flatMap { Int64($0.trimmedSpaces) } ?? 0
                    if reached == length { return sent }
                    continue
                }
                var headers = [("Upload-Length", String(length)), ("Upload-Metadata", metadata.header)]
                var body = HTTPBody.none
                // A chunk is small: its bytes go with the POST whenever the server takes them there
                // (an interruption costs one chunk at most).
                if capabilities.offers("creation-with-upload") {
                    headers += self.headers(for: chunk, from: 0, capabilities)
                    body = .bytes(chunk.bytes)
                }
                let post = request("POST", server.endpoint, headers: headers, body: body)
                let response = try await send(post)
                guard response.status == 201 || response.status == 200, let location = response.header("Location"), !location.isEmpty else {
                    throw Self.failure(response, url: server.endpoint, step: "creating a chunk's upload")
                }
                url = server.resolve(location.trimmedSpaces)
                if body.length > 0 {
                    sent += length
                    let reached = response.header("Upload-Offset").flatMap { Int64($0.trimmedSpaces) } ?? 0
                    if reached == length { return sent }
                }
            } catch {
                var retriable = error.isTemporary
                if case .status(let status, _, _) = error, [404, 409, 410, 423, 460].contains(status) { retriable = true }
                if case .protocolViolation = error { retriable = true }
                try await backOff(after: error, failures: &failures, retriable: retriable)
            }
        }
    }

    /// Sends `chunks`, up to `width` at once (sharing `[transfer] max-rate`): one batch of
    /// `uploadChunkStream`. Returns the bytes sent in all.
    public func uploadChunks(_ chunks: [ChunkPayload], width: Int, isolation: isolated (any Actor)? = #isolation) async throws(TusError) -> Int64 {
        var handedOut = false
        do {
            return try await uploadChunkStream(width: width, next: {
                _ = isolation
                defer { handedOut = true }
                return handedOut ? nil : chunks
            }, sent: { _, _ in })
        } catch let error as TusError {
            throw error
        } catch {
            throw .cancelled
        }
    }

    /// Sends the chunks `next` hands out, a batch at a time, keeping up to `width` uploads going
    /// across batches: the next batch is asked for while fewer than `width` chunks wait, so a batch's
    /// last chunks never leave the link idle before the next batch starts (a round trip per batch on a
    /// slow link). `next` returns nil at the end (an empty batch is fine); `sent` hears of each chunk
    /// as it is done, in any order. Both are called between uploads from this function's task group,
    /// on `isolation`: closures that touch loop-confined state must capture it (`_ = isolation`), or
    /// Swift runs them, being async, off the loop. Returns the bytes sent in all.
    public func uploadChunkStream(width: Int, next: () async throws -> [ChunkPayload]?,
                                  sent: (ChunkPayload, Int64) async throws -> Void,
                                  isolation: isolated (any Actor)? = #isolation) async throws -> Int64 {
        let bound = LoopBound(self, loop: http.loop)
        var total: Int64 = 0
        var waiting: [ChunkPayload] = []
        var first = 0
        var ended = false
        try await withThrowingTaskGroup(of: (ChunkPayload, Int64).self) { group in
            var running = 0
            while true {
                while !ended && waiting.count - first < max(1, width) {
                    guard let more = try await next() else {
                        ended = true
                        break
                    }
                    if first > 0 && first == waiting.count {
                        waiting.removeAll(keepingCapacity: true)
                        first = 0
                    }
                    waiting += more
                }
                while running < max(1, width) && first < waiting.count {
                    let chunk = waiting[first]
                    waiting[first].bytes = [] // the child holds the bytes now; they go with it
                    first += 1
                    group.addTask { [isolation] in (chunk, try await Self.sendChunk(bound, chunk, isolation: isolation)) }
                    running += 1
                }
                if running == 0 { return }
                guard let (chunk, bytes) = try await group.next() else { return }
                running -= 1
                total += bytes
                try await sent(chunk, bytes)
            }
        }
        return total
    }

    /// Sends one chunk on the loop; the box is only opened there.
    private static func sendChunk(_ client: LoopBound<TusClient>, _ chunk: ChunkPayload,
                                  isolation: isolated (any Actor)?) async throws(TusError) -> Int64 {
        try await client.value.uploadChunk(chunk)
    }

    /// Throws `tooLarge` when the server takes no file of `size` bytes (`Tus-Max-Size`): a file sent
    /// as chunks is refused whole, before any chunk goes, as one uploaded whole would be.
    public func checkSize(_ size: Int64, isolation: isolated (any Actor)? = #isolation) async throws(TusError) {
        let capabilities = try await discover()
        if let maxSize = capabilities.maxSize, size > maxSize { throw .tooLarge(size: size, maxSize: maxSize, url: server.endpoint) }
    }

    /// The body headers of a chunk sent from `offset`: its type, and a checksum when offered.
    private func headers(for chunk: ChunkPayload, from offset: Int64, _ capabilities: TusCapabilities) -> [(String, String)] {
        var out = [("Content-Type", Tus.chunkType)]
        guard options.checksums, let algorithm = capabilities.checksum() else { return out }
        let digest: [UInt8]
        if algorithm == .crc32 && offset == 0 && chunk.crc32.count == 4 {
            digest = chunk.crc32
        } else {
            digest = chunk.bytes.withUnsafeBytes { Digest.hash(UnsafeRawBufferPointer(rebasing: $0[Int(offset)...]), algorithm) }
        }
        out.append(("Upload-Checksum", TusChecksum(algorithm: algorithm.rawValue, digest: digest).header))
        return out
    }
}
