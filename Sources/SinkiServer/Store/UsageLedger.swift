import SinkiRecord

/// What one stored version holds on the server: its inline data as stored (compressed), an upload
/// asset's blob, and the chunks of its manifest.
struct StoredContent: Sendable, Equatable {
    var inlineBytes: Int64 = 0
    var blobBytes: Int64 = 0
    var chunks: [ChunkRef] = []

    /// A record's, as a save carries it.
    init(of record: Record) {
        guard !record.deleted else { return }
        inlineBytes = Int64(record.data?.count ?? 0)
        if let asset = record.asset {
            if let chunks = asset.chunks { self.chunks = chunks } else { blobBytes = asset.size }
        }
    }

    init(inlineBytes: Int64, blobBytes: Int64, chunks: [ChunkRef]) {
        self.inlineBytes = inlineBytes
        self.blobBytes = blobBytes
        self.chunks = chunks
    }
}

/// A change of how many current records (`live`) and kept versions (`kept`) of a user name a chunk.
struct ChunkCountChange: Sendable, Equatable {
    var name: String
    var size: Int64
    var live: Int64
    var kept: Int64
}

/// A chunk's counts after a change.
struct ChunkCounts: Sendable, Equatable {
    var live: Int64
    var kept: Int64
}

/// What a store keeps of a user's usage, inside a write transaction of that user.
protocol UsageTransaction {
    /// Adds `changes` to the user's chunk counts (a chunk counted by nobody any more is forgotten) and
    /// returns each chunk's counts after, in order.
    func countChunks(_ changes: [ChunkCountChange]) throws -> [ChunkCounts]
    /// Adds to the user's usage and returns it after, with their quota.
    func addUsage(liveBytes: Int64, historyBytes: Int64) throws -> StorageFigures
}

/// The bytes a transaction adds to or takes from one user's usage, gathered while it runs and written
/// once at its end (docs/server.md, "Quotas"). Inline data and blobs count per version; a chunk counts
/// once however many versions name it: as live while a current record names it, else as history while a
/// kept version does.
struct UsageLedger {
    private var liveBytes: Int64 = 0
    private var historyBytes: Int64 = 0
    private var chunks: [String: ChunkCountChange] = [:]
    /// First-seen order, so that statements run in the same order every time.
    private var order: [String] = []

    /// `content` is named by `live` more current records and `kept` more kept versions (either may be
    /// negative).
    mutating func count(_ content: StoredContent, live: Int64, kept: Int64) {
        let bytes = content.inlineBytes + content.blobBytes
        liveBytes += bytes * live
        historyBytes += bytes * kept
        var seen = Set<String>()
        for chunk in content.chunks where seen.insert(chunk.sha256).inserted {
            if chunks[chunk.sha256] == nil {
                chunks[chunk.sha256] = ChunkCountChange(name: chunk.sha256, size: chunk.size, live: 0, kept: 0)
                order.append(chunk.sha256)
            }
            chunks[chunk.sha256]!.live += live
            chunks[chunk.sha256]!.kept += kept
        }
    }

    /// Writes the counts; returns the user's usage before and after, and the growth (after minus
    /// before); nil when nothing was counted.
    func commit(in transaction: some UsageTransaction) throws -> (before: StorageFigures, after: StorageFigures, growth: Int64)? {
        if liveBytes == 0 && historyBytes == 0 && chunks.isEmpty { return nil }
        var live = liveBytes, history = historyBytes
        let changes = order.compactMap { chunks[$0] }.filter { $0.live != 0 || $0.kept != 0 }
        if !changes.isEmpty {
            let counts = try transaction.countChunks(changes)
            for (change, new) in zip(changes, counts) {
                let old = ChunkCounts(live: new.live - change.live, kept: new.kept - change.kept)
                live += (new.live > 0 ? change.size : 0) - (old.live > 0 ? change.size : 0)
                history += (new.live <= 0 && new.kept > 0 ? change.size : 0) - (old.live <= 0 && old.kept > 0 ? change.size : 0)
            }
        }
        let after = try transaction.addUsage(liveBytes: live, historyBytes: history)
        var before = after
        before.liveBytes -= live
        before.historyBytes -= history
        return (before, after, live + history)
    }
}
