import Glibc
import SinkiRecord
import SinkiSupport

/// The replica's part of `sinkid status`, read in one call.
public struct ReplicaStatus: Sendable {
    /// One root's counts from the trees.
    public struct RootTotals: Sendable, Equatable {
        public var name: String
        public var files: Int
        public var bytes: Int64
        /// Paths below the root whose Local differs from Synced (changes to send).
        public var pending: Int
        /// Paths below the root whose Remote differs from Synced (changes to bring here).
        public var toApply: Int
        /// Remote changes below the root whose write failed (each says why).
        public var notApplied: Int = 0
        /// The root's folder is not there (unmounted, moved away).
        public var folderMissing: Bool
    }

    public var roots: [RootTotals] = []
    /// The first local changes to send, by path.
    public var pending: [PendingRow] = []
    public var pendingCount = 0
    /// `savedTotal` when `pendingCount` was counted.
    public var savedTotal = 0
    /// Local changes the server refused (each waits for `sinkid retry` or a new version).
    public var refused: [FailedPath] = []
    public var refusedCount = 0
    public var toApplyCount = 0
    /// The bytes those bring (files whose content is not here).
    public var toApplyBytes: Int64 = 0
    /// Paths not synced whole, with why (names that cannot be record paths, special files, extended
    /// attributes not sent or not kept).
    public var skipped: [(path: String, reason: String)] = []
    public var skippedCount = 0
    /// Entries the last walk of each root left out by ignore rules.
    public var ignoredCount = 0
    public var feedToken: String?
    /// Remote changes whose write failed (the first `limit`) and how many in all.
    public var notApplied: [FailedPath] = []
    public var notAppliedCount = 0
    /// Paths handed out and not answered (saves in flight, downloads, uploads, merges).
    public var inFlight = 0
}

extension Replica {
    /// Counts, and the first `limit` pending changes, failures and skipped paths.
    public func statusFacts(limit: Int) throws -> ReplicaStatus {
        let database = store.database
        var facts = ReplicaStatus()
        facts.savedTotal = uploader.savedTotal
        let byRoot = try StatusQueries.byRoot(database)
        let failures = scheduler.failures
        for root in roots {
            let totals = byRoot[root.name]
            facts.roots.append(ReplicaStatus.RootTotals(name: root.name, files: totals?.files ?? 0, bytes: totals?.bytes ?? 0,
                                                        pending: totals?.local ?? 0, toApply: totals?.remote ?? 0,
                                                        notApplied: failures.count(.down, under: root.name),
                                                        folderMissing: access(root.path, F_OK) != 0))
        }
        facts.pending = try StatusQueries.pending(database, limit: limit)
        let counts = try StatusQueries.counts(database)
        facts.pendingCount = counts.local
        facts.toApplyCount = counts.remote
        facts.toApplyBytes = try StatusQueries.remoteBytes(database)
        facts.refused = Array(failures.listed(.up).prefix(limit))
        facts.refusedCount = failures.count(.up)
        facts.notApplied = Array(failures.listed(.down).prefix(limit))
        facts.notAppliedCount = failures.count(.down)
        let unkept = try store.unkeptXattrList(limit: limit)
        var skipped: [String: String] = observer.skipped
        for (path, reason) in observer.xattrsLeftOut { skipped[path] = skipped[path].map { $0 + "; " + reason } ?? reason }
        for (path, reason) in unkept.entries { skipped[path] = skipped[path].map { $0 + "; " + reason } ?? reason }
        facts.skipped = skipped.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }.prefix(limit).map { ($0.key, $0.value) }
        // A path both observed and with attributes not kept counts once.
        let observed = Set(observer.skipped.keys).union(observer.xattrsLeftOut.keys)
        facts.skippedCount = observed.count + unkept.count - (try observed.filter { try store.hasUnkeptXattrs($0) }.count)
        facts.ignoredCount = observer.ignoredCounts.values.reduce(0, +)
        facts.feedToken = try StatusQueries.feed(database).token
        facts.inFlight = scheduler.inFlight.count
        return facts
    }

    /// Puts changes the server refused back in line (`sinkid retry`); returns their paths.
    public func retryRefused(under path: String?) -> [String] { retryFailures(under: path, direction: .up) }

    // MARK: Full comparisons

    public func saveVerify(_ record: VerifyRecord) throws {
        try store.transaction {
            try store.setMeta(MetaKey.verifyAt, String(record.finishedAt))
            try store.setMeta(MetaKey.verifyResult, record.result)
            try store.setMeta(MetaKey.verifyRepaired, String(record.repaired))
            try store.setMeta(MetaKey.verifyDiffering, record.differing.prefix(100).joined(separator: "\n"))
            try store.setMeta(MetaKey.verifyDetail, record.detail)
        }
    }

    public func lastVerify() throws -> VerifyRecord? { try StatusQueries.lastVerify(store.database) }

    /// Paths where the trees still differ below `root`, at most `limit` (what a comparison that found no
    /// more to repair shows as still different).
    public func stillDiffering(root: String, limit: Int) throws -> [String] {
        var out: [String] = []
        var after = root + "/"
        while out.count < limit {
            let page = try store.workPage(after: after, limit: limit)
            guard let last = page.last else { break }
            for path in page where PathText.isWithin(path, root) && !scheduler.inFlight.contains(path) { out.append(path) }
            if !PathText.isWithin(last, root) { break }
            after = last
        }
        return Array(out.prefix(limit))
    }
}

/// The outcome of a full comparison, as the state database keeps it between runs (for status).
public struct VerifyRecord: Sendable, Equatable {
    public var finishedAt: Int64
    /// `same`, `repaired`, `differing` or `failed`.
    public var result: String
    public var repaired: Int
    public var differing: [String]
    public var detail: String?

    public init(finishedAt: Int64, result: String, repaired: Int, differing: [String], detail: String?) {
        self.finishedAt = finishedAt
        self.result = result
        self.repaired = repaired
        self.differing = differing
        self.detail = detail
    }
}

extension MetaKey {
    static let verifyAt = "verify.at"
    static let verifyResult = "verify.result"
    static let verifyRepaired = "verify.repaired"
    static let verifyDiffering = "verify.differing"
    static let verifyDetail = "verify.detail"
}
