import SinkiRecord
import SinkiSupport

/// What comparing a page of the server's records with the rows here found and repaired.
public struct VerifyFindings: Sendable, Equatable {
    /// Server versions not here (or not the ones here): applied through the normal path, so that a
    /// local change meets them as a conflict for its merge rule. Deletes whose tombstones the server
    /// no longer keeps come as tombstones made here, for files unchanged since they were synced.
    public var toApply: [Record] = []
    /// Local versions the server lacks (or holds older than agreed): queued to be sent again.
    public var requeued: [String] = []
    /// Every path that differed, for the report.
    public var differing: [String] = []

    public init() {}

    public mutating func absorb(_ other: VerifyFindings) {
        toApply += other.toApply
        requeued += other.requeued
        differing += other.differing
    }
}

extension Replica {
    /// Compares one page of the server's records for root `root` (`records`, in bytewise path order,
    /// the page after `after` and through `last`; `last` nil: to the end of the root) with the rows
    /// here, and repairs what needs no server: local versions the server lacks are queued again, rows
    /// left over are forgotten. `floor` is the server's history floor: a synced file the server has no
    /// record of was deleted elsewhere if its version is at or below it (the tombstone was purged), or
    /// lost by the server if above (it is sent again). Paths with a local change queued are left to
    /// the push, which meets any newer version as a conflict; paths waiting for `sinkid resolve` are
    /// left to it.
    ///
    /// Versions the feed has yet to bring (above `appliedUpTo`, the feed position applied) are no
    /// difference, nor is a row newer than the listing (above `listedAt`, where the server stood before
    /// it was read): both are settled by the feed and the push without a comparison's help.
    public func compare(root: Int, server records: [Record], after: String, through last: String?, floor: Int64,
                        appliedUpTo: Int64 = .max, listedAt: Int64 = .max) throws -> VerifyFindings {
        let name = roots[root].name
        let rows = try store.files(root: name, after: after, through: last)
        var local: [PathKey: KnownFile] = [:]
        for row in rows { local[PathKey(row.path)] = row }
        var findings = VerifyFindings()
        var seen = Set<PathKey>()
        try store.transaction {
            try store.observeRemote(records.filter { PathText.isWithin($0.path, name) })
            for record in records where PathText.isWithin(record.path, name) {
                let key = PathKey(record.path)
                seen.insert(key)
                let row = local[key]
                if record.changeTag > appliedUpTo && (row?.tag ?? 0) < record.changeTag { continue }
                if let row, row.tag > listedAt { continue }
                try compare(server: record, local: row, into: &findings)
            }
            for row in rows where !seen.contains(PathKey(row.path)) && row.tag <= listedAt {
                try compare(server: nil, local: row, floor: floor, into: &findings)
            }
        }
        return findings
    }

    /// Compares the rows at `paths` with the server's records there (`server`, keyed by path; a path
    /// it lacks has no record there) under the same rules as a listing page.
    func compare(paths: [String], server: [PathKey: Record], floor: Int64) throws -> VerifyFindings {
        var findings = VerifyFindings()
        try store.transaction {
            for path in paths { try compare(server: server[PathKey(path)], local: try store.file(path), floor: floor, into: &findings) }
        }
        return findings
    }

    private func compare(server: Record?, local: KnownFile?, floor: Int64 = 0, into findings: inout VerifyFindings) throws {
        let path = server?.path ?? local?.path ?? ""
        if try store.conflict(path) != nil { return }
        let queued = try store.outboxEntry(path) != nil
        switch (server, local) {
        case let (record?, row?):
            if queued { return }
            if row.tag > record.changeTag {
                // The server holds an older version than the one agreed with it: it lost ours. Ours goes
                // again, based on what it has.
                var again = row
                again.agree(with: record)
                if again.hasLocalChange {
                    try store.saveFile(again)
                    try store.enqueue(path)
                    findings.requeued.append(path)
                } else {
                    try store.saveFile(again)
                }
                findings.differing.append(path)
            } else if !row.holds(record) {
                findings.toApply.append(record)
                findings.differing.append(path)
            } else if row.hasLocalChange {
                try store.enqueue(path)
                findings.requeued.append(path)
                findings.differing.append(path)
            }
        case let (record?, nil):
            if !record.deleted {
                findings.toApply.append(record)
                findings.differing.append(path)
            }
        case let (nil, row?):
            if queued { return }
            if row.tag == 0 {
                if row.present {
                    try store.enqueue(path)
                    findings.requeued.append(path)
                    findings.differing.append(path)
                }
            } else if !row.present {
                // A tombstone the server no longer keeps: nothing here to sync.
                try store.removeFile(path)
            } else if row.tag <= floor && !row.hasLocalChange {
                // Deleted elsewhere long ago; the server purged the tombstone. Deleted here the same way.
                findings.toApply.append(Record(path: path, type: row.type, deleted: true, changeTag: row.tag,
                                               baseTag: row.tag, device: "the server (tombstone purged)"))
                findings.differing.append(path)
            } else {
                // The server lost it (or, with a local edit, it was deleted elsewhere and the edit wins):
                // sent again as a new file.
                var again = row
                again.tag = 0
                again.syncedSHA256 = nil
                again.syncedDeleted = false
                try store.saveFile(again)
                try store.enqueue(path)
                findings.requeued.append(path)
                findings.differing.append(path)
            }
        case (nil, nil):
            break
        }
    }

    /// After tombstones made here for deletes the server purged were applied: their rows stand for
    /// nothing on the server, so a later file at the path is sent as new (based on no version).
    public func forgetPurged(_ records: [Record]) throws {
        try store.transaction {
            for record in records where record.deleted && record.device == "the server (tombstone purged)" {
                if let row = try store.file(record.path), !row.present, try store.outboxEntry(record.path) == nil {
                    try store.removeFile(record.path)
                }
            }
        }
    }
}

/// A path compared byte for byte: Swift's `String` equality treats canonically equivalent names
/// (NFC and NFD) as one, where the disk and the server keep them apart.
struct PathKey: Hashable {
    let bytes: [UInt8]
    init(_ path: String) { bytes = Array(path.utf8) }
}

/// The outcome of a full comparison, as the state database keeps it between runs (for status).
public struct VerifyRecord: Sendable, Equatable {
    public var finishedAt: Int64
    /// `same`, `repaired` or `failed`.
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
    /// "1" while an agent runs on this database; found at start, the last run did not stop cleanly.
    static let running = "agent.running"
}

extension Replica {
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

    /// Notes that an agent runs on this database; true when the previous run did not stop cleanly
    /// (killed, or the machine lost power): then what it was doing may have been cut off.
    /// When `sinkid pause` paused this agent, if it is paused: a pause outlives a restart.
    public func pausedSince() throws -> Int64? {
        try store.meta(MetaKey.pausedSince).flatMap { Int64($0) }
    }

    /// Keeps the pause (nil: resumed) for the next start.
    public func setPausedSince(_ since: Int64?) throws {
        try store.setMeta(MetaKey.pausedSince, since.map(String.init))
    }

    public func markRunning() throws -> Bool {
        let unclean = try store.meta(MetaKey.running) == "1"
        try store.setMeta(MetaKey.running, "1")
        return unclean
    }

    /// Notes a clean stop.
    public func markStopped() throws { try store.setMeta(MetaKey.running, "0") }

    /// Sets the feed position to `token` when none is kept (after the server forgot the old one and
    /// a full comparison stood in for the history it no longer has).
    public func adoptFeedPosition(_ token: String) throws {
        if try store.meta(MetaKey.feedToken) == nil { try store.setMeta(MetaKey.feedToken, token) }
    }
}

extension StatusQueries {
    /// The last full comparison with the server, if any ran.
    public static func lastVerify(_ database: SQLiteDatabase) throws -> VerifyRecord? {
        var values: [String: String] = [:]
        try database.query("SELECT key, value FROM meta WHERE key LIKE 'verify.%'") { values[$0.text(0)] = $0.text(1) }
        guard let at = values[MetaKey.verifyAt].flatMap({ Int64($0) }), let result = values[MetaKey.verifyResult] else { return nil }
        let differing = values[MetaKey.verifyDiffering].map { $0.split(separator: "\n").map(String.init) } ?? []
        return VerifyRecord(finishedAt: at, result: result, repaired: values[MetaKey.verifyRepaired].flatMap { Int($0) } ?? 0,
                            differing: differing, detail: values[MetaKey.verifyDetail])
    }
}
