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
    /// `Replica.savedTotal` once these were counted.
    public var savedTotal = 0
    /// Pushes the server refused as stale: merge them like remote changes.
    public var conflicts: [Conflict] = []
    public var refused: [String] = []
    /// Renames the server refused because their source no longer holds the content there: (path, source).
    public var movesWithoutSource: [(path: String, source: String)] = []
    /// Large files whose chunks the server lacked: uploaded again, then pushed.
    public var reupload: [String] = []
    public init() {}
}

/// An outbox entry chosen for the next batch, with what building its record needs.
struct PushJob: Sendable {
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

/// What one walk through the outbox chose for a batch.
struct PushSelection {
    var jobs: [PushJob] = []
    /// Where the next walk goes on from; nil when this one reached the end of the outbox.
    var next: OutboxPosition?
    /// Entries looked at.
    var scanned = 0
    /// Entries removed as having nothing to send: a tombstone held behind one of them (already
    /// passed) may be free now.
    var removed = 0
    /// Entries whose record waits for their upload to finish (which pumps the push again).
    var uploading = 0
}

extension Replica {
    /// Builds the next batch to push from the outbox: at most `limit` records and about `maxBytes`
    /// of content, reading each file as it is now (a file that changed since it was hashed is sent
    /// as it is now). Paths in `excluding` are in flight already.
    ///
    /// Empty only when nothing can be sent now: entries held back (in flight, waiting for their
    /// upload, in a stopped root, or held behind those: `StateStore.heldBack`) are walked past page
    /// by page, so a batch's cost follows the entries it passes, never the size of the outbox.
    public func nextBatch(limit: Int, maxBytes: Int, excluding: Set<String>, excludingRoots: Set<Int> = []) throws -> [Outgoing] {
        let started = Clock.monotonic()
        var position = OutboxPosition.start
        var scanned = 0, uploading = 0
        var out: [Outgoing] = []
        while out.isEmpty {
            let selection = try selectJobs(limit: limit, after: position, excluding: excluding, excludingRoots: excludingRoots)
            scanned += selection.scanned
            uploading += selection.uploading
            if selection.jobs.isEmpty && selection.removed > 0 {
                // What was removed may have held back a tombstone this walk already passed: walk again
                // (each such walk removes something, so this ends).
                position = .start
                continue
            }
            out = try build(selection.jobs, maxBytes: maxBytes)
            guard let next = selection.next else { break }
            position = next
        }
        if logger.isEnabled(.debug) {
            for item in out {
                let record = item.record
                let what = record.deleted ? "tombstone" : record.kind == .directory ? "dir" : record.movedFrom != nil ? "move from \(quoted(record.movedFrom ?? ""))" : "file"
                logger.debug("push \(quoted(record.path)) \(what) base \(record.baseTag)")
            }
        }
        if scanned > 0 && logger.isEnabled(.debug) {
            // What a batch carries: renames travel as their source's name, never as bytes again.
            let renamed = out.count { $0.record.movedFrom != nil }
            let bytes = out.reduce(0) { $0 + ($1.record.data?.count ?? 0) }
            logger.debug("nextBatch \(out.count) of \(scanned) looked at (\(renamed) renamed, \(bytes) bytes of content): \((Clock.monotonic() - started) / 1_000_000) ms")
        }
        // Nothing in flight and no upload under way: nothing will pump again by itself.
        if out.isEmpty && excluding.isEmpty && uploading == 0 { try sayWhatIsHeld(excludingRoots: excludingRoots) }
        // Tombstones deepest first so a directory's follows its contents'; saves parents first.
        return out.sorted { a, b in
            if a.record.deleted != b.record.deleted { return !a.record.deleted }
            if a.record.deleted { return a.record.path.utf8.count > b.record.path.utf8.count }
            return a.record.path < b.record.path
        }
    }

    /// Walks the outbox in push order from `position`, a page at a time, until `limit` entries can
    /// be sent or the outbox ends. Entries with nothing to send are removed on the way.
    func selectJobs(limit: Int, after position: OutboxPosition, excluding: Set<String>, excludingRoots: Set<Int>) throws -> PushSelection {
        var selection = PushSelection()
        var position = position
        while selection.jobs.count < limit {
            let page = try store.outboxPage(after: position, limit: limit)
            for (entry, row) in page {
                selection.scanned += 1
                position = OutboxPosition(after: entry)
                switch try pushJob(entry, row, excluding: excluding, excludingRoots: excludingRoots) {
                case let .send(job): selection.jobs.append(job)
                case .removed: selection.removed += 1
                case .uploading: selection.uploading += 1
                case .later: break
                }
                if selection.jobs.count == limit {
                    selection.next = position
                    return selection
                }
            }
            if page.count < limit { return selection }
        }
        selection.next = position
        return selection
    }

    enum PushChoice {
        case send(PushJob)
        /// Nothing to send: the entry is gone from the outbox.
        case removed
        /// Not now: its record waits for its upload.
        case uploading
        /// Not now: in flight, in a stopped root, or below a folder whose new version is in flight.
        case later
    }

    /// What to do with one outbox entry (entries held behind others never get here: `outboxPage` leaves them out).
    func pushJob(_ entry: OutboxEntry, _ row: KnownFile?, excluding: Set<String>, excludingRoots: Set<Int>) throws -> PushChoice {
        if excluding.contains(entry.path) { return .later }
        if let row, !row.present, row.tag == 0 {
            // Gone before the server ever saw it, and not in flight (excluded above): nothing to send.
            try store.removeFile(row.path)
            try store.dequeue(entry.path)
            return .removed
        }
        guard let row, let path = try? RecordPath(validating: entry.path),
              let local = locate(path), row.hasLocalChange || entry.resend else {
            try store.dequeue(entry.path)
            return .removed
        }
        let (root, relative) = (local.root.index, local.relative)
        if excludingRoots.contains(root) { return .later }
        if row.present && Self.isBelow(entry.path, anyOf: excluding) { return .later }
        let moveSource = row.present ? row.movedFrom : nil
        var asset: Asset?
        if row.present && row.kind == .file && moveSource == nil && row.size > inlineLimit {
            // Its record waits for the upload of exactly this content (the agent's uploads).
            guard let finished = try finishedAsset(for: row) else { return .uploading }
            asset = finished
        }
        let cached = row.present && row.kind != .directory && moveSource == nil && asset == nil ? takeCached(row)?.data : nil
        return .send(PushJob(entry: entry, row: row, root: root, relative: relative, cached: cached, moveSource: moveSource, asset: asset))
    }

    /// Whether a folder above `path` is in `paths`. A save below a folder whose new version is in
    /// flight waits for it: batches in flight may be committed in either order, and a peer must get
    /// the folder first (where it was a file, nothing can be written in it before). Every folder
    /// above is looked at, so a path deeper below one in flight waits too.
    static func isBelow(_ path: String, anyOf paths: Set<String>) -> Bool {
        var end = path.endIndex
        while let slash = path[..<end].lastIndex(of: "/") {
            if paths.contains(String(path[..<slash])) { return true }
            end = slash
        }
        return false
    }

    /// Reads and compresses what `jobs` send (on every core) and notes what is being sent; at most
    /// about `maxBytes` of content. Files busy or gone since they were queued are left for later.
    func build(_ jobs: [PushJob], maxBytes: Int) throws -> [Outgoing] {
        if jobs.isEmpty { return [] }
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
                    // The content's name (`ContentID`): the manifest's hash above 256 KiB, else the SHA-256.
                    record.sha256 = job.row.sha256
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
        return out
    }

    /// An empty batch with nothing in flight while entries wait: they are held behind entries that
    /// cannot go now (refused, or in a conflict waiting for `sinkid resolve`). Said once per distinct
    /// hold, so a push never stops with nothing said.
    func sayWhatIsHeld(excludingRoots: Set<Int>) throws {
        let held = try store.heldEntries(limit: 100).filter { entry in
            guard let path = try? RecordPath(validating: entry.path), let root = locate(path)?.root.index else { return true }
            return !excludingRoots.contains(root)
        }
        guard let first = held.first else {
            heldWarning = nil
            return
        }
        let note = "\(held.count) \(first.path)"
        if heldWarning == note { return }
        heldWarning = note
        logger.warning("\(held.count)\(held.count == 100 ? " or more" : "") local change(s) wait for others that cannot be sent now "
                       + "(\(quoted(first.path)) waits for \(quoted(first.waitsFor))); sinkid status lists what is refused or in conflict")
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
            // What the server answered is what it now holds: the Remote tree learns it with the rows.
            try store.observeRemote(results.compactMap { result in
                switch result.status {
                case .saved, .conflict: return result.record
                case .refused: return nil
                }
            })
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
                    if outgoing.record.asset != nil { try store.removeChunkUpload(path) }
                    agreed.append(saved)
                    if row.hasLocalChange {
                        // Changed again while in flight: the newer change stays queued (queued again if
                        // something took its entry meanwhile, as a folder made again for a remote file does).
                        if try store.outboxEntry(path) == nil { try store.enqueue(path) }
                        continue
                    }
                    try store.dequeue(path, ifGeneration: outgoing.generation)
                    report.saved += 1
                case .conflict:
                    guard let remote = result.record else { continue }
                    report.conflicts.append(Conflict(local: row, remote: remote))
                case .refused where result.problem?.code == ProblemKind.moveSourceGone.code:
                    // The server no longer has the source's content: deleted there (the delete then
                    // follows the rename) or changed (the bytes go next time). The agent asks which.
                    if let source = outgoing.record.movedFrom { report.movesWithoutSource.append((path, source)) }
                case .refused where result.problem?.code == ProblemKind.chunksMissing.code:
                    // The server lacks chunks the manifest names (removed as unreferenced while the record
                    // waited, say): the upload runs again and sends what is missing; the entry stays queued.
                    logger.info("the server lacks chunks of \(quoted(path)); uploading them again")
                    try store.removeChunkUpload(path)
                    report.reupload.append(path)
                case .refused:
                    let reason = result.problem?.description ?? "refused"
                    logger.error("server refused \(quoted(path)): \(reason)")
                    // An asset the server does not take (its upload expired, say) is uploaded anew on retry.
                    if outgoing.record.asset != nil { try store.removeChunkUpload(path) }
                    try store.refuse(path, reason: reason)
                    report.refused.append(path)
                }
            }
        }
        keepBases(agreed)
        savedTotal += report.saved
        report.savedTotal = savedTotal
        return report
    }
}

extension Replica {
    /// Settles a rename the server refused because its source no longer holds the content there.
    /// `source` is the server's record at the source now. If another device deleted the version this
    /// agent renamed, the delete follows the rename: the renamed file goes too, unless it changed here
    /// since or is not the file renamed but a new one with the same bytes (then it is sent as a new
    /// file, as it is whenever the source holds other content).
    /// Returns true when the renamed file was deleted.
    public func settleMoveWithoutSource(path: String, source: Record?) throws -> Bool {
        guard var row = try store.file(path) else { return false }
        let movedFrom = row.movedFrom
        row.movedFrom = nil
        // (The delete was another device's: this agent's own tombstone for a rename's source waits until
        // the new path is accepted. Its row here may already agree with that tombstone.)
        guard let source, source.deleted, source.device != device, movedFrom == source.path, row.present,
              let recordPath = try? RecordPath(validating: path), let local = locate(recordPath),
              let stat = entry(root: local.root.index, relative: local.relative), row.matches(stat),
              let gone = try store.file(source.path), !gone.present, gone.tag > 0, gone.tag <= source.changeTag,
              // Only a file that is the one renamed (its inode and mtime, which a rename keeps): a new
              // file whose bytes equal a vanished one's was sent as a rename to spare the upload, but
              // it is the user's new file, and a delete elsewhere of the other says nothing of it
              // (the fault suite's seed 4019).
              row.kind == .directory || (gone.syncedSHA256 == row.sha256 && gone.inode == stat.inode && gone.mtime == stat.mtime) else {
            try store.saveFile(row)
            return false
        }
        // Deleted elsewhere after this agent last saw it, and renamed here without a change.
        let plan = PlannedWrite(action: .delete, record: Record(path: path, type: row.type, deleted: true, device: source.device),
                                path: local, expect: stat, row: row)
        var report = ApplyReport()
        let results = try execute([plan], report: &report)
        guard case .done = results.first else {
            try store.saveFile(row)
            return false
        }
        try store.transaction {
            if row.tag > 0 {
                // The rename replaced a version the server holds at this path: its delete goes there too.
                var gone = row
                gone.present = false
                gone.sha256 = ""
                try store.saveFile(gone)
                try store.enqueue(path)
            } else {
                try store.removeFile(path)
                try store.dequeue(path)
            }
        }
        logger.info("\(quoted(path)) was renamed here from \(quoted(source.path)), which \(source.device) deleted meanwhile: the delete follows the rename")
        return true
    }
}
