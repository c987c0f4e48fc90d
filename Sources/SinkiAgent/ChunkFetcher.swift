import SinkiLoop
import SinkiRecord
import SinkiState
import SinkiSupport
import SinkiTransfer

/// Downloads the chunks a new version lacks (or a file in flight announced), `width` at once, each
/// checked against its name and placed by its sink off the loop. A chunk whose bytes do not match its name twice is reported
/// to the server as damaged (it removes it if so) and the download fails with why: it is tried again
/// later, never used.
struct ChunkFetcher {
    let sync: SyncClient
    let sink: any ChunkSink
    let width: Int

    struct Outcome {
        /// Why some chunk could not be had (nil: every chunk is in place).
        var failure: ApplyFailure?
    }

    /// A chunk is at most this large (`ChunkProfile.large.maximum`); a longer answer is not one.
    static let maxChunkBytes = 4 << 20

    func run(_ names: [String], received: (Int64) -> Void, isolation: isolated (any Actor)? = #isolation) async throws -> Outcome {
        if names.isEmpty { return Outcome() }
        let bound = LoopBound(sync, loop: sync.http.loop)
        let sink = self.sink
        var failure: ApplyFailure?
        try await withThrowingTaskGroup(of: (String, Result<Int64, ApplyFailure>).self) { group in
            var next = 0
            func start() {
                let name = names[next]
                next += 1
                group.addTask { [isolation] in (name, try await Self.fetch(bound, name, into: sink, isolation: isolation)) }
            }
            while next < min(width, names.count) { start() }
            while let (_, result) = try await group.next() {
                switch result {
                case let .success(bytes): received(bytes)
                case let .failure(why): failure = failure ?? why
                }
                if next < names.count && failure == nil { start() }
            }
        }
        return Outcome(failure: failure)
    }

    /// One chunk: fetched, checked and placed; a second try if the bytes were wrong, then a report.
    private static func fetch(_ client: LoopBound<SyncClient>, _ name: String, into sink: any ChunkSink,
                              isolation: isolated (any Actor)?) async throws -> Result<Int64, ApplyFailure> {
        for _ in 0..<2 {
            let answer: Result<[UInt8], SyncError>
            do { answer = .success(try await client.value.chunk(name, maxBytes: maxChunkBytes)) } catch { answer = .failure(error) }
            switch answer {
            case let .failure(.problem(problem)) where problem.status == 404:
                return .failure(ApplyFailure(.downloadFailed, "the server holds no chunk \(name.prefix(16))… of it (a device that has the file sends it again)"))
            case let .failure(error):
                throw error
            case let .success(bytes):
                if try await Blocking.run({ try sink.place(bytes, name: name) }) { return .success(Int64(bytes.count)) }
            }
        }
        let removed = (try? await client.value.reportDamagedChunk(name)) ?? false
        return .failure(ApplyFailure(.downloadFailed, "the server's chunk \(name.prefix(16))… does not match its SHA-256"
                                     + (removed ? " (reported; the server removed it)" : "")))
    }
}
