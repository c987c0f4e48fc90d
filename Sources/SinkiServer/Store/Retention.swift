import SinkiSupport
import Synchronization

/// How long the server keeps what nobody needs any more (docs/server.md, "Tombstone retention" and
/// "Chunks").
public struct RetentionSettings: Sendable, Equatable {
    /// Tombstones older than this are purged; 0 keeps them forever (`--tombstone-days`). A tombstone is
    /// kept at least as long as the history, whose last version of a deleted path it is.
    public var tombstoneDays: Double = 30
    /// Versions replaced longer ago than this are removed, with what only they held; 0 keeps none
    /// (`--history-days`, docs/server.md, "History").
    public var historyDays: Double = 30
    /// A chunk no live record names is removed once it was last uploaded or found present this long ago
    /// (`--chunk-grace`): time for the record that will name it to come.
    public var chunkGraceSeconds: Double = 24 * 3600
    public init() {}

    /// The tombstones' retention in words: days, or seconds when shorter than one.
    var spoken: String { Self.days(max(tombstoneDays, historyDays)) }

    /// How old a tombstone must be to go: its own retention, or the history's when that is longer.
    var tombstoneNanoseconds: Int64 { Int64(max(tombstoneDays, historyDays) * 86_400e9) }
    var historyNanoseconds: Int64 { Int64(historyDays * 86_400e9) }
    var chunkGraceNanoseconds: Int64 { Int64(chunkGraceSeconds * 1e9) }
    /// How often a pass runs: a quarter of the tombstone retention (when on), of the history (when on)
    /// or of the chunk grace, whichever is shortest, between a second and an hour, so a purge is at most
    /// a quarter late and an idle server wakes at most once an hour.
    var intervalSeconds: Double {
        let tombstones = tombstoneDays > 0 ? max(tombstoneDays, historyDays) * 86_400 / 4 : Double.infinity
        let history = historyDays > 0 ? historyDays * 86_400 / 4 : Double.infinity
        return min(3600, max(1, min(tombstones, history, chunkGraceSeconds / 4)))
    }

    /// The history window in words.
    var historySpoken: String { Self.days(historyDays) }

    static func days(_ days: Double) -> String {
        days >= 1 ? "\(days == days.rounded() ? String(Int(days)) : String(days)) day(s)" : "\(Int((days * 86_400).rounded())) s"
    }
}

/// What one retention pass removed.
struct RetentionPass: Sendable, Equatable {
    var tombstones = 0
    var versions = 0
    var blobs = 0
    var chunks = 0
}

/// Purges tombstones past their retention, raising the history floor (agents behind it get `410
/// token-expired` and compare everything), and kept versions replaced before the history window, then
/// removes blobs no record or kept version names and chunks none names past their grace. Runs on a thread of its own; the store's writer lock keeps it apart from
/// commits, and the users' chunk locks from uploads and modifies (`ChunkStore.collect`).
final class Retention: Sendable {
    private let store: any RecordStore & VersionStore
    private let uploads: UploadStore
    private let chunks: ChunkStore
    private let settings: RetentionSettings
    private let logger: Logger
    private let sweeper = Sweeper()
    private let completed = Atomic<Int>(0)

    init(store: any RecordStore & VersionStore, uploads: UploadStore, chunks: ChunkStore, settings: RetentionSettings, logger: Logger) {
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
            // History off (0) keeps no versions: any left from before go now.
            let before = settings.historyDays > 0 ? now - settings.historyNanoseconds : Int64.max
            while true {
                let expiry = try store.expireVersions(supersededBefore: before, limit: 5_000)
                done.versions += expiry.removed
                if !expiry.more { break }
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
            logger.info("retention: purged \(done.tombstones) tombstone(s) older than \(settings.spoken), \(done.versions) version(s) replaced "
                        + "more than \(settings.historySpoken) ago, removed \(done.blobs) blob(s) and \(done.chunks) chunk(s) nothing names; "
                        + "change feed from \(floor)")
        }
        completed.add(1, ordering: .releasing)
        return done
    }
}
