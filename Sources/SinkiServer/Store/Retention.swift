import SinkiSupport

/// How long the server keeps what nobody needs any more (docs/server.md, "Tombstone retention").
public struct RetentionSettings: Sendable, Equatable {
    /// Tombstones older than this are purged; 0 keeps them forever (`--tombstone-days`).
    public var tombstoneDays: Double = 30
    public init() {}

    /// The retention in words: days, or seconds when shorter than one.
    var spoken: String {
        tombstoneDays >= 1 ? "\(tombstoneDays == tombstoneDays.rounded() ? String(Int(tombstoneDays)) : String(tombstoneDays)) day(s)" : "\(Int((tombstoneDays * 86_400).rounded())) s"
    }

    var tombstoneNanoseconds: Int64 { Int64(tombstoneDays * 86_400e9) }
    /// How often a pass runs: a quarter of the retention, between a second and an hour, so a purge is
    /// at most a quarter late and an idle server wakes at most once an hour.
    var intervalSeconds: Double { min(3600, max(1, tombstoneDays * 86_400 / 4)) }
}

/// Purges tombstones past their retention, raising the history floor (agents behind it get `410
/// token-expired` and compare everything), then removes blobs no record names. Runs on a thread of its
/// own; the store's writer lock keeps it apart from commits.
final class Retention: Sendable {
    private let store: any RecordStore
    private let uploads: UploadStore
    private let settings: RetentionSettings
    private let logger: Logger
    private let sweeper = Sweeper()

    init(store: any RecordStore, uploads: UploadStore, settings: RetentionSettings, logger: Logger) {
        self.store = store
        self.uploads = uploads
        self.settings = settings
        self.logger = logger
    }

    /// A pass now, then one every `intervalSeconds`; none with retention off.
    func start() {
        guard settings.tombstoneDays > 0 else { return }
        let interval = Int64(settings.intervalSeconds * 1e9)
        sweeper.start { [self] in
            pass(now: Clock.now())
            return Clock.now() + interval
        }
    }

    /// Stops the thread, after a pass under way.
    func stop() { sweeper.stop() }

    /// One pass; what it removed. Errors are logged: the next pass tries again.
    @discardableResult
    func pass(now: Int64) -> (tombstones: Int, blobs: Int) {
        var tombstones = 0
        do {
            let cutoff = now - settings.tombstoneNanoseconds
            // In slices, so that a first purge of millions never holds the writer for long.
            while true {
                let sweep = try store.sweepTombstones(savedBefore: cutoff, limit: 5_000)
                tombstones += sweep.removed
                if !sweep.more { break }
            }
            let blobs = uploads.removeUnreferenced(keeping: try store.assetIDs(), now: now)
            if tombstones > 0 || blobs > 0 {
                let floor = try store.historyFloor()
                logger.info("retention: purged \(tombstones) tombstone(s) older than \(settings.spoken), removed \(blobs) blob(s) no record names; history from \(floor)")
            }
            return (tombstones, blobs)
        } catch {
            logger.warning("retention: \(error)")
            return (tombstones, 0)
        }
    }
}
