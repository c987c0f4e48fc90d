import SinkiSupport
import Synchronization

/// How long the server keeps what nobody needs any more (docs/server.md, "Tombstone retention" and
/// "Chunks").
public struct RetentionSettings: Sendable, Equatable {
    /// Tombstones older than this are purged; 0 keeps them forever (`--tombstone-days`).
    public var tombstoneDays: Double = 30
    /// A chunk no live record names is removed once it was last uploaded or found present this long ago
    /// (`--chunk-grace`): time for the record that will name it to come.
    public var chunkGraceSeconds: Double = 24 * 3600
    public init() {}

    /// The retention in words: days, or seconds when shorter than one.
    var spoken: String {
        tombstoneDays >= 1 ? "\(tombstoneDays == tombstoneDays.rounded() ? String(Int(tombstoneDays)) : String(tombstoneDays)) day(s)" : "\(Int((tombstoneDays * 86_400).rounded())) s"
    }

    var tombstoneNanoseconds: Int64 { Int64(tombstoneDays * 86_400e9) }
    var chunkGraceNanoseconds: Int64 { Int64(chunkGraceSeconds * 1e9) }
    /// How often a pass runs: a quarter of the tombstone retention (when on) or of the chunk grace,
    /// whichever is shorter, between a second and an hour, so a purge is at most a quarter late and an
    /// idle server wakes at most once an hour.
    var intervalSeconds: Double {
        let tombstones = tombstoneDays > 0 ? tombstoneDays * 86_400 / 4 : Double.infinity
        return min(3600, max(1, min(tombstones, chunkGraceSeconds / 4)))
    }
}

/// What one retention pass removed.
struct RetentionPass: Sendable, Equatable {
    var tombstones = 0
    var blobs = 0
    var chunks = 0
}

/// Purges tombstones past their retention, raising the history floor (agents behind it get `410
/// token-expired` and compare everything), then removes blobs no record names and chunks no live record
/// names past their grace. Runs on a thread of its own; the store's writer lock keeps it apart from
/// commits, and the users' chunk locks from uploads and modifies (`ChunkStore.collect`).
final class Retention: Sendable {
    private let store: any RecordStore
    private let uploads: UploadStore
    private let chunks: ChunkStore
    private let settings: RetentionSettings
    private let logger: Logger
    private let sweeper = Sweeper()
    private let completed = Atomic<Int>(0)

    init(store: any RecordStore, uploads: UploadStore, chunks: ChunkStore, settings: RetentionSettings, logger: Logger) {
        self.store = store
        self.uploads = uploads
        self.chunks = chunks
        self.settings = settings
        self.logger = logger
    }

    /// A pass now, then one every `intervalSeconds`.
    func start() {
        let interval = Int64(settings.intervalSeconds * 1e9)
        sweeper.start { [self] in
            pass(now: Clock.now())
            return Clock.now() + interval
        }
    }

    /// Stops the thread, after a pass under way.
    func stop() { sweeper.stop() }

    /// Passes completed (tests wait for the one at start before they set up what the next should find).
    var passes: Int { completed.load(ordering: .acquiring) }

    /// One pass; what it removed. Errors are logged: the next pass tries again.
    @discardableResult
    func pass(now: Int64) -> RetentionPass {
        var done = RetentionPass()
        do {
            if settings.tombstoneDays > 0 {
                let cutoff = now - settings.tombstoneNanoseconds
                // In slices, so that a first purge of millions never holds the writer for long.
                while true {
                    let sweep = try store.sweepTombstones(savedBefore: cutoff, limit: 5_000)
                    done.tombstones += sweep.removed
                    if !sweep.more { break }
                }
            }
            done.blobs = uploads.removeUnreferenced(keeping: try store.assetIDs(), now: now)
        } catch {
            logger.warning("retention: \(error)")
        }
        let store = self.store
        done.chunks = chunks.collect(references: { try store.chunkReferences(user: $0, after: $1) }, now: now,
                                     grace: settings.chunkGraceNanoseconds)
        if done != RetentionPass() {
            let floor = (try? store.historyFloor()).map(String.init) ?? "?"
            logger.info("retention: purged \(done.tombstones) tombstone(s) older than \(settings.spoken), removed \(done.blobs) blob(s) no record names "
                        + "and \(done.chunks) chunk(s) no record names; history from \(floor)")
        }
        completed.add(1, ordering: .releasing)
        return done
    }
}
