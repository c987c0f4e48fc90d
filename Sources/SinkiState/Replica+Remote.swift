import SinkiRecord
import SinkiSupport

/// One path whose live content differed between the server and the Remote tree (nil: no live record).
public struct RemoteMismatch: Sendable, Equatable {
    public var path: String
    public var server: RemoteEntry?
    public var here: RemoteEntry?
}

/// What setting one folder of the Remote tree to the server's records found (`Replica.repairRemote`).
public struct RemoteRepair: Sendable, Equatable {
    /// Paths whose live content differed between the server and the Remote tree: each a defect.
    public var mismatched: [RemoteMismatch] = []
    /// What the full comparison's rules make of those paths here (versions to apply, to send again).
    public var findings = VerifyFindings()
}

extension Replica {
    /// The change tag of the feed position applied (0: none yet): every record up to it has been read
    /// in order; the Remote tree may also hold newer ones, from the answers to this agent's own saves.
    public func feedPosition() throws -> Int64 {
        FeedToken.tag(of: try store.meta(MetaKey.feedToken)) ?? 0
    }

    /// The digests of one folder of the Remote tree (zero for a folder that never held a record).
    public func remoteFolder(_ path: String) throws -> RemoteFolder {
        try store.remoteFolder(path) ?? RemoteFolder(path: path)
    }

    /// The folders directly in `path` that ever held a record, with their digests.
    public func remoteChildren(of path: String) throws -> [RemoteFolder] { try store.remoteChildren(of: path) }

    /// Sets the rows of the Remote tree directly in `folder` to the server's `records` (every record
    /// directly in it, tombstones included, as a listing gave them), and compares the paths whose
    /// content differed with the rows here under the full comparison's rules (`compare`), which apply
    /// a newer server version, send again what the server lost, and leave local changes to the push.
    ///
    /// Rows newer than the listing (above `listedAt`, the server's position before it was read) are
    /// left alone: the feed or an acknowledgement brought them since, and the listing cannot speak
    /// for them.
    ///
    /// Only versions up to the feed position applied are compared (`readThrough`): a newer one on either
    /// side (the server moved on meanwhile, or the answer to this agent's own push came first) is on its
    /// way through the feed, and says nothing about what the feed brought.
    public func repairRemote(folder: String, server records: [Record], floor: Int64, listedAt: Int64) throws -> RemoteRepair {
        let readThrough = min(listedAt, try feedPosition())
        var theirs: [PathKey: Record] = [:]
        for record in records where PathText.same(PathText.folder(of: record.path), folder) { theirs[PathKey(record.path)] = record }
        var mine: [PathKey: RemoteEntry] = [:]
        for entry in try store.remoteEntries(directlyIn: folder) { mine[PathKey(entry.path)] = entry }
        var repair = RemoteRepair()
        var toSet: [RemoteEntry] = []
        var toForget: [String] = []
        for key in Set(theirs.keys).union(mine.keys) {
            let server = theirs[key].map(RemoteEntry.init), here = mine[key]
            let path = server?.path ?? here!.path
            if (here?.changeTag ?? 0) > readThrough || (server?.changeTag ?? 0) > readThrough { continue }
            if server?.liveContent != here?.liveContent {
                repair.mismatched.append(RemoteMismatch(path: path, server: server?.deleted == false ? server : nil,
                                                        here: here?.deleted == false ? here : nil))
            }
            if let server {
                if server != here { toSet.append(server) }
            } else {
                toForget.append(path)
            }
        }
        repair.mismatched.sort { $0.path.utf8.lexicographicallyPrecedes($1.path.utf8) }
        try store.transaction {
            try store.observeRemote(toSet, exactly: true)
            try store.forgetRemote(toForget)
        }
        repair.findings = try compare(paths: repair.mismatched.map(\.path), server: theirs, floor: floor)
        return repair
    }

    /// Counts kept across restarts of what the checks against the server repaired.
    public func digestCounts() throws -> DigestCounts {
        DigestCounts(repaired: Int(try store.meta(MetaKey.digestRepaired) ?? "") ?? 0,
                     lastRepairAt: Int64(try store.meta(MetaKey.digestRepairedAt) ?? ""),
                     lateApplied: Int(try store.meta(MetaKey.digestLate) ?? "") ?? 0)
    }

    public func saveDigestCounts(_ counts: DigestCounts) throws {
        try store.transaction {
            try store.setMeta(MetaKey.digestRepaired, String(counts.repaired))
            try store.setMeta(MetaKey.digestRepairedAt, counts.lastRepairAt.map(String.init))
            try store.setMeta(MetaKey.digestLate, String(counts.lateApplied))
        }
    }

    /// Versions of the Remote tree read after change tag `tag` that the rows here do not hold: the
    /// server's word taken in but never carried out (a record whose outcome was lost), which would
    /// leave this folder silently different while everything else agrees. Left out: paths with a local
    /// change queued (the push settles them), remote changes kept as not applied (they say why), paths
    /// waiting for `sinkid resolve`, ignored paths and roots not synced here. Returned apart
    /// (`movedAway`): versions that a later version renamed away (they or a folder above), whose old
    /// path the renamer's tombstone is to end; the caller gives that tombstone a while to come. Returns
    /// at most `limit` in all, and the highest tag looked at (the next look starts after it when fewer
    /// than `limit` came back).
    public func remoteNotHeld(after tag: Int64, limit: Int) throws -> (entries: [RemoteEntry], movedAway: [RemoteEntry], through: Int64) {
        var through = tag
        var out: [RemoteEntry] = []
        var movedAway: [RemoteEntry] = []
        var candidates: [RemoteEntry] = []
        try store.transaction {
            // Up to the feed position applied: a version a listing or a conflict brought before the feed
            // did is still on its way through it.
            let applied = try feedPosition()
            through = max(tag, min(applied, try store.database.scalar("SELECT max(change_tag) FROM remote") ?? 0))
            try notHeld(after: tag, through: through, below: nil, limit: limit, into: &candidates)
            // A rename read now moved its source's rows here; the source's version was looked at (and
            // held) before, so it is looked at again: its old path now waits for the renamer's tombstone.
            var sources: [String] = []
            try store.database.query("SELECT DISTINCT moved_from FROM remote WHERE change_tag > ? AND change_tag <= ? AND deleted = 0 AND moved_from IS NOT NULL",
                                     tag, through) { sources.append($0.text(0)) }
            var seen = Set(candidates.map(\.path))
            for source in sources where candidates.count < limit {
                var found: [RemoteEntry] = []
                try notHeld(after: -1, through: tag, below: source, limit: limit - candidates.count, into: &found)
                for entry in found where seen.insert(entry.path).inserted { candidates.append(entry) }
            }
            // Renamed away (it or its folder) by a version read since: the old path's tombstone comes
            // from the side that renamed it, after its new path; the rows here moved with the rename.
            for candidate in candidates {
                if try store.remoteMovedAway(candidate.path, after: candidate.changeTag) { movedAway.append(candidate) } else { out.append(candidate) }
            }
        }
        return (out, movedAway, candidates.count < limit ? through : (candidates.map(\.changeTag).max() ?? tag))
    }

    /// The Remote tree's versions with tags in (`after`, `through`] that the rows here do not hold, in
    /// tag order, at most `limit` (see `remoteNotHeld`); with `below`, only the live ones at that path
    /// or under it.
    private func notHeld(after: Int64, through: Int64, below: String?, limit: Int, into candidates: inout [RemoteEntry]) throws {
        try store.database.query("""
            SELECT r.path, r.change_tag, r.deleted, r.type, r.sha256, r.size, r.moved_from,
                   f.path IS NOT NULL, f.present, f.tag, f.synced_deleted, f.synced_sha256
            FROM remote r LEFT JOIN files f ON f.path = r.path
            WHERE r.change_tag > ? AND r.change_tag <= ?
              AND (? = '' OR r.deleted = 0 AND (r.path = ? OR r.path >= ? AND r.path < ?))
              AND (f.path IS NULL AND r.deleted = 0 OR f.path IS NOT NULL AND f.tag <= r.change_tag AND NOT (r.deleted = 1 AND f.present = 0))
              AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.path = r.path)
              AND NOT EXISTS (SELECT 1 FROM unapplied u WHERE u.path = r.path)
              AND NOT EXISTS (SELECT 1 FROM conflicts c WHERE c.path = r.path)
            ORDER BY r.change_tag
            """, after, through, below ?? "", below ?? "", (below ?? "") + "/", (below ?? "") + "0") { row in
            let entry = StateStore.readRemote(row)
            if row.bool(7) && row.int64(9) == entry.changeTag {
                // The same version: held when it agrees on what it is.
                let deletedHere = row.bool(10)
                if deletedHere == entry.deleted && (entry.deleted || entry.type == Record.directoryType || row.optionalText(11) == entry.contentID) { return }
            }
            guard let path = try? RecordPath(validating: entry.path), let local = locate(path),
                  !isIgnored(root: local.root.index, relative: local.relative, isDirectory: entry.type == Record.directoryType) else { return }
            if candidates.count < limit { candidates.append(entry) }
        }
    }
}

/// What the checks against the server have repaired on this state database, in all.
public struct DigestCounts: Sendable, Equatable {
    /// Paths whose copy of the server's record differed from the server's (a digest mismatch).
    public var repaired = 0
    /// When the last such path was repaired (nanoseconds since the epoch).
    public var lastRepairAt: Int64?
    /// Versions read from the server that were found never applied here, and applied then.
    public var lateApplied = 0

    public init(repaired: Int = 0, lastRepairAt: Int64? = nil, lateApplied: Int = 0) {
        self.repaired = repaired
        self.lastRepairAt = lastRepairAt
        self.lateApplied = lateApplied
    }
}

extension MetaKey {
    static let digestRepaired = "digest.repaired"
    static let digestRepairedAt = "digest.repaired.at"
    static let digestLate = "digest.late"
}
