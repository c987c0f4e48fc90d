import SinkiLoop
import SinkiRecord
import SinkiState
import SinkiSupport
import SinkiTransfer

/// Downloads the chunks a new version lacks (or a file in flight announced), a few to a request
/// (`POST /v1/chunks/fetch`) and `width` requests at once, each chunk checked against its name and
/// placed by its sink off the loop. A chunk whose bytes do not match its name twice is reported to the
/// server as damaged (it removes it if so) and the download fails with why: it is tried again later,
/// never used.
struct ChunkFetcher {
    let sync: SyncClient
    let sink: any ChunkSink
    let width: Int

    struct Outcome {
        /// Why some chunk could not be had (nil: every chunk is in place).
        var failure: ApplyFailure?
    }

    /// Chunks asked for in one request: some 1.5 MiB of a large file's (384 KiB normal) chunks, so that
    /// no chunk costs a round trip of its own and an answer lost to a cut connection costs little.
    static let namesPerRequest = 4

    /// Fetches `names` (each once).
    func run(_ names: [String], received: (Int64) -> Void, isolation: isolated (any Actor)? = #isolation) async throws -> Outcome {
        if names.isEmpty { return Outcome() }
        let bound = LoopBound(sync, loop: sync.http.loop)
        let sink = self.sink
        let groups = stride(from: 0, to: names.count, by: Self.namesPerRequest).map { Array(names[$0..<min(names.count, $0 + Self.namesPerRequest)]) }
        var failure: ApplyFailure?
        try await withThrowingTaskGroup(of: (Int64, ApplyFailure?).self) { group in
            var next = 0
            func start() {
                let names = groups[next]
                next += 1
                group.addTask { [isolation] in try await Self.fetch(bound, names, into: sink, isolation: isolation) }
            }
            while next < min(width, groups.count) { start() }
            while let (bytes, why) = try await group.next() {
                if bytes > 0 { received(bytes) }
                failure = failure ?? why
                if next < groups.count && failure == nil { start() }
            }
        }
        return Outcome(failure: failure)
    }

    /// A few chunks in one request, each checked and placed; a chunk whose bytes were wrong is asked
    /// for once more on its own, then reported. The bytes placed, and why some chunk could not be.
    private static func fetch(_ client: LoopBound<SyncClient>, _ names: [String], into sink: any ChunkSink,
                              isolation: isolated (any Actor)?) async throws -> (Int64, ApplyFailure?) {
        var placed: Int64 = 0
        var wrong: [String] = []
        for chunk in try await client.value.fetchChunks(names) {
            if chunk.bytes.isEmpty { return (placed, notHeld(chunk.name)) }
            if try await Blocking.run({ try sink.place(chunk.bytes, name: chunk.name) }) {
                placed += Int64(chunk.bytes.count)
            } else {
                wrong.append(chunk.name)
            }
        }
        for name in wrong {
            // Damaged on the way, or on the server: a second answer tells which.
            let again = try await client.value.fetchChunks([name])[0]
            if again.bytes.isEmpty { return (placed, notHeld(name)) }
            if try await Blocking.run({ try sink.place(again.bytes, name: name) }) {
                placed += Int64(again.bytes.count)
                continue
            }
            let removed = (try? await client.value.reportDamagedChunk(name)) ?? false
            return (placed, ApplyFailure(.downloadFailed, "the server's chunk \(name.prefix(16))… does not match its SHA-256"
                                         + (removed ? " (reported; the server removed it)" : "")))
        }
        return (placed, nil)
    }

    private static func notHeld(_ name: String) -> ApplyFailure {
        ApplyFailure(.downloadFailed, "the server holds no chunk \(name.prefix(16))… of it (a device that has the file sends it again)")
    }
}
