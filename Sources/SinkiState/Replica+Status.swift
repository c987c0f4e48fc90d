import Glibc
import SinkiRecord
import SinkiSupport

/// The replica's part of `sinkid status`, read in one call.
public struct ReplicaStatus: Sendable {
    /// One root's counts from the database.
    public struct RootTotals: Sendable, Equatable {
        public var name: String
        public var files: Int
        public var bytes: Int64
        /// Outbox entries below the root.
        public var pending: Int
        /// Remote changes below the root not applied here.
        public var notApplied: Int = 0
        /// The root's folder is not there (unmounted, moved away).
        public var folderMissing: Bool
    }

    public var roots: [RootTotals] = []
    public var pending: [PendingRow] = []
    public var pendingCount = 0
    /// `Replica.savedTotal` when `pendingCount` was counted.
    public var savedTotal = 0
    public var refusedCount = 0
    public var skipped: [String] = []
    public var skippedCount = 0
    /// Entries the last walk of each root left out by ignore rules.
    public var ignoredCount = 0
    public var feedToken: String?
    /// Remote changes not applied here (the first `limit`) and how many in all.
    public var notApplied: [UnappliedChange] = []
    public var notAppliedCount = 0
}

extension Replica {
    /// Counts and the first `limit` pending changes and skipped paths.
    public func statusFacts(limit: Int) throws -> ReplicaStatus {
        let database = store.database
        var facts = ReplicaStatus()
        facts.savedTotal = savedTotal
        let byRoot = try StatusQueries.pendingByRoot(database)
        let notApplied = store.unappliedCount > 0 ? try StatusQueries.notApplied(database, limit: limit) : (changes: [], count: 0, byRoot: [:])
        facts.notApplied = notApplied.changes
        facts.notAppliedCount = notApplied.count
        for root in roots {
            let totals = try store.totals(root: root.name)
            facts.roots.append(ReplicaStatus.RootTotals(name: root.name, files: totals.files, bytes: totals.bytes,
                                                        pending: byRoot[root.name] ?? 0, notApplied: notApplied.byRoot[root.name] ?? 0,
                                                        folderMissing: access(root.path, F_OK) != 0))
        }
        facts.pending = try StatusQueries.pending(database, limit: limit)
        (facts.pendingCount, facts.refusedCount) = try StatusQueries.counts(database)
        facts.skipped = Array(skipped.sorted().prefix(limit))
        facts.skippedCount = skipped.count
        facts.ignoredCount = ignoredCounts.values.reduce(0, +)
        facts.feedToken = try StatusQueries.feed(database).token
        return facts
    }

    /// Puts changes the server refused back in line (`sinkid retry`); returns their paths.
    public func retryRefused(under path: String?) throws -> [String] {
        try StatusQueries.requeueRefused(store.database, under: path)
    }
}
