import SinkiLoop
import SinkiRecord
import SinkiState
import SinkiSupport
import SinkiTransfer

/// Sends a large file as chunks: reads it once from where an earlier run stopped, cutting and naming
/// chunks a batch at a time (the next batch is read while this one travels), asks the server which
/// of each batch it lacks, sends those in one request per batch (`POST /v1/chunks/batch`, up to
/// `batchesInFlight` at once), and keeps how far it came after each batch. When the last chunk is cut
/// the file's identity (its manifest's hash) is known, and the record may name the manifest.
/// Loop-confined, like the clients it drives.
struct ChunkSender {
    let tus: TusClient
    let sync: SyncClient
    let replica: Replica
    let source: UploadSource
    let width: Int
    /// Bytes of the file read so far, and of them sent as new chunks.
    let progress: (Int64, Int64) -> Void
    /// Tells the server each batch's chunks once they are there, for receivers to fetch meanwhile.
    var announcer: InFlightAnnouncer?

    /// About this much of the file per batch: one missing-chunks request and one upload each. A few
    /// batches are in memory at once (sent while the next is read): 2 MiB keeps the sender of 1 GiB
    /// within 64 MiB (issue 22, item 5: 51-58 MiB in W3; 4 MiB held 57-67, 8 MiB 66-70). Small batches
    /// cost nothing on a slow link since consecutive batches travel side by side (`sendChunkStream`;
    /// before, each batch's last chunks drained the link: a new 256 MiB file over 20 ms / 100 Mbit/s
    /// took 26.3 s in 2 MiB batches, 24.6 s in 8 MiB).
    static let batchBytes = 2 << 20
    /// Batch uploads under way at once: 4 MiB in flight fills a link of 100 Mbit/s at a round trip of
    /// 300 ms, and keeps the sender's memory within its 64 MiB.
    static let batchesInFlight = 2
    /// Batches asked about at once at most, while the server holds them whole (each keeps only its
    /// chunks' names then, so the number costs no memory): with 2 MiB batches, a 256 MiB file edited in
    /// one place costs 128 questions, which overlap as fast as the file is read.
    static let maxLookAhead = 64

    struct Outcome {
        var chunks: Int
        /// Chunk bytes sent (those the server already held are not).
        var bytes: Int64
        /// Whether a record waits to be pushed (a file touched but unchanged has none).
        var recordWaits: Bool
    }

    func run(isolation: isolated (any Actor)? = #isolation) async throws -> Outcome {
        try await tus.checkSize(source.size)
        var chunks = source.resume?.chunks ?? []
        let reader = ChunkFileReader(file: source.file, size: source.size, from: source.resume?.offset ?? 0)
        var newBytes: Int64 = 0
        var read = source.resume?.offset ?? 0
        // A file of up to 256 KiB is named by the SHA-256 of its bytes, not by its manifest: it is one
        // batch, read whole, and hashed whole too (it costs nothing at that size).
        let whole = ContentID.isManifest(size: source.size) ? nil : Digest(.sha256)
        progress(read, 0)
        let sync = self.sync
        let keepsAllBytes = whole != nil
        // The next batches are read, and the server asked which of their chunks it lacks, while this one
        // travels: no round trip of its own between two batches. (A chunk in both may go twice.) Reads
        // go one after another (the reader cuts the file in order); the questions overlap. While the
        // server turns out to hold whole batches (an edit of a large file: a few chunks new among
        // thousands), more are asked about at once, up to `maxLookAhead`, so that the round trips
        // overlap rather than add up. A batch read then keeps only its chunks' names: the few the server
        // lacks are read again (and checked against their names) when they go. Otherwise a batch waiting
        // its turn keeps only the bytes it will send.
        var lastRead: Task<ReadBatch, any Error>?
        var ahead: [Task<(batch: ReadBatch, lacking: Set<String>), any Error>] = []
        func lookAhead(lean: Bool) {
            let previous = lastRead
            let read = Task {
                _ = isolation
                if let previous { _ = try await previous.value }
                return try await Blocking.run {
                    let start = reader.offset
                    let chunks = try reader.next(maxBytes: Self.batchBytes)
                    return ReadBatch(start: start, chunks: lean ? chunks.map(\.withoutBytes) : chunks, lean: lean)
                }
            }
            lastRead = read
            ahead.append(Task {
                _ = isolation
                let batch = try await read.value
                if batch.chunks.isEmpty { return (batch, []) }
                let lacking = Set(try await sync.missingChunks(batch.chunks.map(\.ref.sha256)))
                if keepsAllBytes || batch.lean { return (batch, lacking) }
                return (batch.keeping(lacking), lacking)
            })
        }
        lookAhead(lean: false)
        defer { for task in ahead { task.cancel() } }
        // Batches in a row the server held whole.
        var heldWhole = 0
        // A file of one batch gains nothing from being announced: its record follows at once.
        let announcer = source.size > Int64(Self.batchBytes) ? self.announcer : nil
        var finished = false
        defer { if !finished { announcer?.abandon() } }
        announcer?.add(chunks)
        // The batches read and not yet all on the server, in file order: a batch's chunks are announced
        // once they and every chunk before them are there, and its progress is kept once it is all there.
        var open = OpenBatches()
        // Each of these runs on the caller's loop (`isolation`, captured), as `progress` and the announcer must.
        func settle() async throws {
            _ = isolation
            if let announcer {
                let ready = open.announceable()
                if !ready.isEmpty { announcer.add(ready) }
            }
            for batch in open.takeComplete() {
                chunks += batch.refs
                if let whole { for piece in batch.bytes { whole.update(piece) } }
                read += batch.size
                progress(read, newBytes)
                try await replica.saveUpload(source, progress: ChunkUploadProgress(path: source.path, stat: source.stat, offset: read, chunks: chunks))
            }
        }
        func next() async throws -> [ChunkPayload]? {
            _ = isolation
            let (batch, lacking) = try await ahead.removeFirst().value
            if batch.chunks.isEmpty { return nil }
            // The look-ahead doubles while whole batches are held, and falls back to one at the first
            // batch with something to send (a new file's: its batches keep their bytes).
            heldWhole = lacking.isEmpty ? min(heldWhole * 2 + 1, Self.maxLookAhead - 1) : 0
            while ahead.count < 1 + heldWhole { lookAhead(lean: heldWhole > 0 && !keepsAllBytes) }
            // A chunk twice in one batch (runs of zeros) goes once.
            var named = Set<String>()
            let wanted = batch.placed.filter { lacking.contains($0.chunk.ref.sha256) && named.insert($0.chunk.ref.sha256).inserted }
            var toSend: [ChunkPayload] = []
            if !wanted.isEmpty {
                let path = source.path
                toSend = try await Blocking.run {
                    let full = try wanted.map { item in
                        guard batch.lean else { return item.chunk }
                        guard let again = try reader.reread(item.chunk.ref, at: item.offset) else { throw UploadSuperseded(path: path) }
                        return again
                    }
                    return ChunkFileReader.withChecksums(full)
                }
            }
            open.append(batch.chunks, lacking: lacking, keepingBytes: keepsAllBytes)
            try await settle()
            return toSend
        }
        // Batch after batch with no pause between them: the next is asked for while the last ones are
        // still on their way.
        try await sync.sendChunkStream(width: min(width, Self.batchesInFlight), next: next, sent: { refs, bytes in
            _ = isolation
            newBytes += bytes
            progress(read, newBytes)
            for ref in refs { open.arrived(ref.sha256) }
            try await settle()
        })
        // What was read is the file it was when opened: the same size, times and inode now.
        let now = try source.file.stat()
        guard read == source.size, now.size == source.stat.size, now.mtime == source.stat.mtime, now.ctime == source.stat.ctime else {
            throw UploadSuperseded(path: source.path)
        }
        guard let manifest = ContentID.manifestHash(hex: chunks.map { ($0.sha256, $0.size) }) else {
            throw UploadSuperseded(path: source.path)
        }
        await announcer?.settle()
        finished = true
        let waits = try await replica.uploadFinished(source, chunks: chunks, manifest: manifest, content: whole?.finishHex())
        return Outcome(chunks: chunks.count, bytes: newBytes, recordWaits: waits)
    }
}

/// A batch as the sender read it: its chunks (without their bytes when `lean`) and where the first starts.
private struct ReadBatch: Sendable {
    var start: Int64
    var chunks: [ChunkPayload]
    var lean: Bool

    /// Each chunk with where it starts in the file.
    var placed: [(chunk: ChunkPayload, offset: Int64)] {
        var offset = start
        return chunks.map { chunk in
            defer { offset += chunk.ref.size }
            return (chunk, offset)
        }
    }

    /// The batch with bytes kept only for the chunks named in `lacking`.
    func keeping(_ lacking: Set<String>) -> ReadBatch {
        ReadBatch(start: start, chunks: chunks.map { lacking.contains($0.ref.sha256) ? $0 : $0.withoutBytes }, lean: lean)
    }
}

extension ChunkPayload {
    /// The chunk's name and size only.
    var withoutBytes: ChunkPayload { ChunkPayload(ref: ref, bytes: [], crc32: []) }
}

/// The batches a `ChunkSender` has read and not yet seen all on the server, in file order.
private struct OpenBatches {
    struct Batch {
        var refs: [ChunkRef]
        var size: Int64
        /// The chunks' bytes, kept only for a file hashed whole.
        var bytes: [[UInt8]]
        /// Chunks not on the server yet.
        var missing: Set<String>
        /// How many of `refs`, from the start, are announced.
        var announced = 0
    }

    private var batches: [Batch] = []

    mutating func append(_ batch: [ChunkPayload], lacking: Set<String>, keepingBytes: Bool) {
        batches.append(Batch(refs: batch.map(\.ref), size: batch.reduce(0) { $0 + $1.ref.size },
                             bytes: keepingBytes ? batch.map(\.bytes) : [], missing: lacking))
    }

    /// A chunk is on the server: in every batch that names it (a chunk in two batches may go twice).
    mutating func arrived(_ sha256: String) {
        for index in batches.indices { batches[index].missing.remove(sha256) }
    }

    /// The chunks that may be announced now, in file order: those on the server with every one before them.
    mutating func announceable() -> [ChunkRef] {
        var out: [ChunkRef] = []
        for index in batches.indices {
            let refs = batches[index].refs
            var end = batches[index].announced
            while end < refs.count && !batches[index].missing.contains(refs[end].sha256) { end += 1 }
            out += refs[batches[index].announced..<end]
            batches[index].announced = end
            if end < refs.count { break }
        }
        return out
    }

    /// The batches at the front that are all on the server, removed.
    mutating func takeComplete() -> [Batch] {
        var count = 0
        while count < batches.count && batches[count].missing.isEmpty { count += 1 }
        let done = Array(batches.prefix(count))
        batches.removeFirst(count)
        return done
    }
}
