import SinkiRecord
import SinkiSupport

/// One path whose live content differed between the server and the Remote tree (nil: no live record).
public struct RemoteMismatch: Sendable, Equatable {
    public var path: String
    public var server: RemoteFacts?
    public var here: RemoteFacts?
}

/// Setting part of the Remote tree to what a listing of the server says (a digest that differed, a
/// full comparison). Only Remote changes, and where the server no longer has what both agreed on, the
/// agreement: the planner then does the rest through the normal rules (a version the server lacks is
/// sent again, one purged as a tombstone is deleted here, a newer one is written, a local change meets
/// it as a conflict).
extension Replica {
    /// Sets the Remote entries directly in `folder` to the server's `records` (every record directly in
    /// it, tombstones included); returns the paths whose live content differed. `floor` is the
    /// server's history floor, `listedAt` its position before the listing.
    public func repairRemote(folder: String, server records: [Record], floor: Int64, listedAt: Int64) throws -> [RemoteMismatch] {
        let theirs = records.filter { PathText.same(PathText.folder(of: $0.path), folder) }
        return try settle(server: theirs, here: try store.remoteEntries(directlyIn: folder), floor: floor,
                          readThrough: min(listedAt, try feedPosition()))
    }

    /// A page of a full comparison: the server's records of root `root` after `after` through `last`
    /// (nil: to the root's end), in bytewise order, against the Remote entries of the same range. Only
    /// versions up to `readThrough` are compared (newer ones are on their way through the feed).
    public func compare(root: RootID, server records: [Record], after: String, through last: String?, floor: Int64,
                        readThrough: Int64) throws -> [RemoteMismatch] {
        let name = roots[root].name
        let here = try store.rows(root: name, after: after, through: last).compactMap { row in row.remote.map { (row.path, $0) } }
        // Rows with a Synced entry and no Remote one say the server had them: they count too.
        let agreedOnly = try store.rows(root: name, after: after, through: last).filter { $0.remote == nil && $0.synced?.tag ?? 0 > 0 }
        var mismatches = try settle(server: records.filter { PathText.isWithin($0.path, name) }, here: here, floor: floor, readThrough: readThrough)
        let listed = Set(records.map { PathKey($0.path) })
        for row in agreedOnly where !listed.contains(PathKey(row.path)) {
            try forgetAgreement(row.path, floor: floor)
            mismatches.append(RemoteMismatch(path: row.path, server: nil, here: nil))
        }
        return mismatches
    }

    /// Sets Remote to `server` for the paths of `server` and `here` (versions above what the feed has
    /// brought, or above the listing's position, are on their way through the feed and left alone).
    private func settle(server records: [Record], here: [(path: String, facts: RemoteFacts)], floor: Int64,
                        readThrough: Int64) throws -> [RemoteMismatch] {
        var theirs: [PathKey: Record] = [:]
        for record in records { theirs[PathKey(record.path)] = record }
        var mine: [PathKey: (path: String, facts: RemoteFacts)] = [:]
        for entry in here { mine[PathKey(entry.path)] = entry }
        var mismatched: [RemoteMismatch] = []
        var toSet: [Record] = []
        var toForget: [String] = []
        for key in Set(theirs.keys).union(mine.keys) {
            let server = theirs[key].map(RemoteFacts.init), entry = mine[key]
            let path = theirs[key]?.path ?? entry!.path
            if (entry?.facts.tag ?? 0) > readThrough || (server?.tag ?? 0) > readThrough { continue }
            // A mode and extended attributes count too: `sync --verify` compares what a file is, not
            // only its bytes.
            if server?.liveContent != entry?.facts.liveContent || server?.perm != entry?.facts.perm
                || server?.xattrDigest != entry?.facts.xattrDigest {
                mismatched.append(RemoteMismatch(path: path, server: server?.isTombstone == false ? server : nil,
                                                 here: entry?.facts.isTombstone == false ? entry?.facts : nil))
            }
            if let record = theirs[key] {
                if server != entry?.facts { toSet.append(record) }
            } else {
                toForget.append(path)
            }
        }
        try store.transaction {
            try feed.ingest(toSet, token: nil, exactly: true)
            try store.forgetRemote(toForget)
            for path in toForget { try forgetAgreement(path, floor: floor) }
        }
        mismatched.sort { $0.path.utf8.lexicographicallyPrecedes($1.path.utf8) }
        return mismatched
    }

    /// The server holds nothing at `path`. If both sides agreed on a version at or below the server's
    /// history floor, it was deleted elsewhere and the tombstone purged since: Remote says deleted, at
    /// that version, and the planner deletes it here (a local change since wins). Above the floor the
    /// server lost it: the agreement is void, and the planner sends what is here as new.
    private func forgetAgreement(_ path: String, floor: Int64) throws {
        guard let row = try store.row(path), let synced = row.synced, synced.tag > 0 else { return }
        if synced.kind == nil { return }
        if synced.tag <= floor {
            try store.observeRemote([(path, RemoteFacts(tag: synced.tag, kind: nil))], exactly: true)
        } else {
            try store.setSynced(path, nil)
        }
    }

    /// Counts kept across restarts of what the checks against the server repaired.
    public func digestCounts() throws -> DigestCounts {
        DigestCounts(repaired: Int(try store.meta(MetaKey.digestRepaired) ?? "") ?? 0,
                     lastRepairAt: Int64(try store.meta(MetaKey.digestRepairedAt) ?? ""))
    }

    public func saveDigestCounts(_ counts: DigestCounts) throws {
        try store.transaction {
            try store.setMeta(MetaKey.digestRepaired, String(counts.repaired))
            try store.setMeta(MetaKey.digestRepairedAt, counts.lastRepairAt.map(String.init))
        }
    }

    /// The digests of one folder of the Remote tree (zero for a folder that never held a record).
    public func remoteFolder(_ path: String) throws -> RemoteFolder { try store.remoteFolder(path) ?? RemoteFolder(path: path) }

    /// The folders directly in `path` that ever held a record, with their digests.
    public func remoteChildren(of path: String) throws -> [RemoteFolder] { try store.remoteChildren(of: path) }
}

/// What the checks against the server have repaired on this state database, in all.
public struct DigestCounts: Sendable, Equatable {
    /// Paths whose copy of the server's record differed from the server's (a digest mismatch).
    public var repaired = 0
    /// When the last such path was repaired (nanoseconds since the epoch).
    public var lastRepairAt: Int64?

    public init(repaired: Int = 0, lastRepairAt: Int64? = nil) {
        self.repaired = repaired
        self.lastRepairAt = lastRepairAt
    }
}

extension MetaKey {
    static let digestRepaired = "digest.repaired"
    static let digestRepairedAt = "digest.repaired.at"
}
