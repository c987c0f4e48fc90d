import Glibc
import SinkiLoop
import SinkiRecord
import SinkiSupport

/// A record on its way to the server, with the outbox generation it was built from.
public struct Outgoing: Sendable, Equatable {
    public var record: Record
    public var generation: Int64
}

/// What the server's answer to a push left to do.
public struct AcknowledgeReport: Sendable {
    public var saved = 0
    /// Pushes the server refused as stale: merge them like remote changes.
    public var conflicts: [Conflict] = []
    public var refused: [String] = []
    public init() {}
}

extension Replica {
    /// Builds the next batch to push from the outbox: at most `limit` records and about `maxBytes`
    /// of content, reading each file as it is now (a file that changed since it was hashed is sent
    /// as it is now). Paths in `excluding` are in flight already.
    public func nextBatch(limit: Int, maxBytes: Int, excluding: Set<String>, excludingRoots: Set<Int> = []) throws -> [Outgoing] {
        let started = Clock.monotonic()
        let entries = try store.outboxWithFiles(limit: limit, excluding: excluding)
        if entries.isEmpty { return [] }
        defer { logger.debug("nextBatch \(entries.count): \((Clock.monotonic() - started) / 1_000_000) ms") }
        struct Job: Sendable {
            var entry: OutboxEntry
            var row: KnownFile
            var root: Int
            var relative: String
            var cached: [UInt8]?
            /// A rename the server can complete from content it holds.
            var moveSource: String?
            /// A large file's finished upload (it travels as an asset, never inline).
            var asset: Asset?
        }
        var jobs: [Job] = []
        for (entry, row) in entries {
            if let row, !row.present, row.tag == 0 {
                // Gone before the server ever saw it, and not in flight (excluded above): nothing to send.
                try store.removeFile(row.path)
                try store.dequeue(entry.path)
                continue
            }
            guard let row, let path = try? RecordPath(validating: entry.path),
                  let (root, relative) = locate(path), row.hasLocalChange else {
                try store.dequeue(entry.path)
                continue
            }
            if excludingRoots.contains(root) { continue }
            // A directory's tombstone waits until those of its contents are accepted: a peer that
            // got it first could not remove the directory, and would keep it.
            if try !row.present && row.kind == .directory && store.hasOutbox(below: entry.path) { continue }
            // A rename's source keeps its content on the server until the new path has copied it.
            if try !row.present && store.isPendingMoveSource(entry.path) { continue }
            let moveSource = row.present ? row.movedFrom : nil
            var asset: Asset?
            if row.present && row.kind == .file && moveSource == nil && row.size > inlineLimit {
                // Its record waits for the upload of exactly this content (the agent's uploads).
                guard let finished = try finishedAsset(for: row) else { continue }
                asset = finished
            }
            let cached = row.present && row.kind != .directory && moveSource == nil && asset == nil ? takeCached(row)?.data : nil
            jobs.append(Job(entry: entry, row: row, root: root, relative: relative, cached: cached, moveSource: moveSource, asset: asset))
        }
        let safeRoots = self.safeRoots
        let device = self.device
        let inlineLimit = self.inlineLimit
        // Reading and compressing is the costly part of a push: do it on every core.
        let built: [Result<(Record, FileContent?), SafeRootError>] = Blocking.map(jobs) { job in
            Result { () throws(SafeRootError) in
                var record = Record(path: job.entry.path, type: job.row.type.isEmpty ? Record.defaultType : job.row.type,
                                    baseTag: job.row.tag, mode: job.row.mode, modifiedAt: job.row.mtime, device: device)
                if let source = job.moveSource {
                    // Renamed: the server copies the content it holds at the source; nothing is read.
                    record.movedFrom = source
                    record.size = job.row.kind == .directory ? 0 : job.row.size
                    record.sha256 = job.row.sha256
                    if job.row.kind == .directory { record.type = Record.directoryType }
                    return (record, nil)
                }
                if !job.row.present {
                    record.deleted = true
                    record.mode = 0
                    return (record, nil)
                }
                if job.row.kind == .directory {
                    record.type = Record.directoryType
                    return (record, nil)
                }
                if let asset = job.asset {
                    record.asset = asset
                    record.size = asset.size
                    record.sha256 = asset.sha256
                    return (record, nil)
                }
                if let cached = job.cached {
                    record.data = cached
                    record.size = job.row.size
                    record.sha256 = job.row.sha256
                    return (record, nil)
                }
                if let now = try safeRoots[job.root].stat(job.relative), now.kind == .file, now.size > inlineLimit {
                    // Grew past the inline limit since it was hashed: never read whole; looked at again.
                    throw SafeRootError.system(SystemError("read", errno: EFBIG, path: roots[job.root].path + "/" + job.relative))
                }
                let content = try ContentReader.read(safeRoots[job.root], job.relative, keepBytes: true)
                let bytes = content.bytes ?? []
                record.data = Deflate.compressForSending(bytes)
                record.size = Int64(bytes.count)
                record.sha256 = content.sha256
                record.mode = content.stat.mode
                record.modifiedAt = content.stat.mtime
                if content.stat.kind == .symlink { record.type = Record.symlinkType }
                return (record, content)
            }
        }
        var out: [Outgoing] = []
        var bytes = 0
        try store.transaction {
            for (job, result) in zip(jobs, built) {
                switch result {
                case let .success((_, content)) where content?.busy == true:
                    // Being written again: sent once it is closed or quiet, never half-done.
                    unstable.append((job.root, job.relative))
                case let .success((record, content)):
                    if let content, !content.sha256.isEmpty, content.sha256 != job.row.sha256 || !job.row.matches(content.stat) {
                        // Changed since it was hashed: the database follows what is being sent.
                        var row = job.row
                        row.observe(content.stat)
                        row.sha256 = content.sha256
                        try store.saveFile(row)
                    }
                    if content?.unstable == true { unstable.append((job.root, job.relative)) }
                    if !out.isEmpty && bytes + (record.data?.count ?? 0) > maxBytes { continue }
                    bytes += record.data?.count ?? 0
                    try store.markSent(record.path, sha256: record.deleted ? nil : record.sha256, deleted: record.deleted)
                    out.append(Outgoing(record: record, generation: job.entry.generation))
                case let .failure(error):
                    if error.errno == ENOENT {
                        // Deleted since it was queued: its delete event brings it back as a tombstone.
                        continue
                    }
                    if error.errno == EFBIG {
                        unstable.append((job.root, job.relative))
                        continue
                    }
                    logger.warning("cannot read \(error); will retry")
                }
            }
        }
        // Tombstones deepest first so a directory's follows its contents'; saves parents first.
        return out.sorted { a, b in
            if a.record.deleted != b.record.deleted { return !a.record.deleted }
            if a.record.deleted { return a.record.path.utf8.count > b.record.path.utf8.count }
            return a.record.path < b.record.path
        }
    }

    /// Takes in the server's answer to a push.
    public func acknowledge(_ sent: [Outgoing], _ results: [ModifyResult]) throws -> AcknowledgeReport {
        var report = AcknowledgeReport()
        let started = Clock.monotonic()
        defer { logger.debug("acknowledge \(sent.count): \((Clock.monotonic() - started) / 1_000_000) ms") }
        guard results.count == sent.count else {
            logger.error("server answered \(results.count) results for \(sent.count) records; will push again")
            return report
        }
        var agreed: [Record] = []
        try store.transaction {
            for (outgoing, result) in zip(sent, results) {
                let path = outgoing.record.path
                guard var row = try store.file(path) else { continue }
                switch result.status {
                case .saved:
                    var saved = outgoing.record
                    saved.changeTag = result.record?.changeTag ?? 0
                    guard saved.changeTag > 0 else {
                        logger.error("server saved \(quoted(path)) without a changeTag; will push again")
                        continue
                    }
                    row.agree(with: saved)
                    row.movedFrom = nil
                    try store.saveFile(row)
                    // The record names the upload now: it is no longer in flight.
                    if outgoing.record.asset != nil { try store.removeTusUpload(path: path, endpoint: uploadEndpoint) }
                    agreed.append(saved)
                    if row.hasLocalChange {
                        // Changed again while in flight: the newer change stays queued.
                        continue
                    }
                    try store.dequeue(path, ifGeneration: outgoing.generation)
                    report.saved += 1
                case .conflict:
                    guard let remote = result.record else { continue }
                    report.conflicts.append(Conflict(local: row, remote: remote))
                case .refused where result.problem?.code == ProblemKind.moveSourceGone.code:
                    // The server no longer has the source's content: send the bytes next time.
                    row.movedFrom = nil
                    try store.saveFile(row)
                case .refused:
                    let reason = result.problem?.description ?? "refused"
                    logger.error("server refused \(quoted(path)): \(reason)")
                    // An asset the server does not take (its upload expired, say) is uploaded anew on retry.
                    if outgoing.record.asset != nil { try store.removeTusUpload(path: path, endpoint: uploadEndpoint) }
                    try store.refuse(path, reason: reason)
                    report.refused.append(path)
                }
            }
        }
        keepBases(agreed)
        return report
    }
}
