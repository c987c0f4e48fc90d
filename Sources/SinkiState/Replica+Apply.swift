import Glibc
import SinkiLoop
import SinkiRecord
import SinkiSupport
import SinkiWatch

/// A remote change that reached the disk (for observers and `sinkid watch`).
public struct AppliedChange: Sendable, Equatable {
    /// What happened to the path, in observer terms.
    public enum Event: String, Sendable {
        case changed, deleted, merged, conflict
    }
    public var path: String
    public var event: Event
    /// Where it is on this machine.
    public var localPath: String
    public var type: String
}

/// What applying a page of remote records did.
public struct ApplyReport: Sendable {
    public var applied: [AppliedChange] = []
    /// Remote changes over local edits not yet accepted by the server: for the merge rules.
    public var conflicts: [Conflict] = []
    /// Records that could not be applied; each is kept in the `unapplied` table with why.
    public var notApplied: [String] = []
    /// Records whose content is not inline (an asset, or data left out of the feed): fetch, then
    /// apply again. They are kept as not applied until then.
    public var needContent: [Record] = []
    /// Records for paths ignored here (kept on the server, not applied).
    public var ignored = 0
    /// Entries found in directories this apply created that it did not write: local files to look at.
    public var toCheck: [LocalPath] = []
    public init() {}

    /// Adds what another report found.
    public mutating func absorb(_ other: ApplyReport) {
        applied += other.applied
        conflicts += other.conflicts
        notApplied += other.notApplied
        needContent += other.needContent
        ignored += other.ignored
        toCheck += other.toCheck
    }
}

/// One planned disk operation of a batch.
struct PlannedWrite: Sendable {
    enum Action: Sendable, Equatable { case write, symlink, mkdir, delete, adopt, rename }
    var action: Action
    var record: Record
    var path: LocalPath
    /// What was at the path when planned (nil: nothing), checked again right before replacing it.
    var expect: FileStat?
    var row: KnownFile?
    /// The observer event to report instead of changed/deleted (a conflict or merge result).
    var event: AppliedChange.Event?
    /// For a rename: the local path (below the same root) whose unchanged content becomes this one.
    var source: LocalPath?
    var sourceRow: KnownFile?
    /// Once written, the version goes to the server again as a new one (`OutboxEntry.resend`).
    var resend = false
}

/// A decision that needs no disk write, recorded with the batch: a hold, a conflict, a rebase.
private struct Settled {
    var decision: ApplyDecision
    var facts: ApplyFacts
}

extension Replica {
    /// Applies remote records in three steps: each is decided on its own (`ApplyDecision.decide`, from
    /// the row and the disk as they are now), the writes are carried out (temporary file, rename, one
    /// `syncfs` per root), and every outcome is recorded in one transaction together with `token`:
    /// a record is then applied, adopted, handed to the merge rules, or kept as not applied with why.
    /// Nothing the token moves past is lost. Writes that failed because the disk moved under them
    /// (a local edit, a folder removed, a rename's source gone) are decided again at once.
    /// `unavailable` names records whose content could not be fetched, with why.
    public func apply(_ records: [Record], token: String?, unavailable: [String: ApplyFailure] = [:]) throws -> ApplyReport {
        var report = ApplyReport()
        let started = Clock.monotonic()
        // The feed holds each path once; if a page somehow repeats one, the later version wins.
        var seen = Set<PathKey>()
        let latest = records.reversed().filter { seen.insert(PathKey($0.path)).inserted }.reversed()
        var retry = try applyOnce(Array(latest), allowRename: true, unavailable: unavailable, report: &report) {
            // A feed page is the server's word: the Remote tree moves with the token that covers it.
            if let token {
                try store.observeRemote(records)
                try store.setMeta(MetaKey.feedToken, token)
            }
        }
        if !retry.isEmpty {
            logger.info("\(retry.count) remote change(s) met a disk that moved under them; deciding them again")
            retry = try applyOnce(retry, allowRename: false, unavailable: unavailable, report: &report) {}
        }
        logger.debug("apply \(records.count): \((Clock.monotonic() - started) / 1_000_000) ms")
        return report
    }

    /// One round of decide, write, record. Returns the records whose write failed in a way that a
    /// fresh look may settle; they are already kept as not applied, so the caller may stop here.
    private func applyOnce(_ records: [Record], allowRename: Bool, unavailable: [String: ApplyFailure], report: inout ApplyReport,
                           alongside: () throws -> Void) throws -> [Record] {
        var plans: [PlannedWrite] = []
        var settled: [Settled] = []
        var batch: [PathKey: Record] = [:]
        for record in records { batch[PathKey(record.path)] = record }
        for record in records {
            var facts = try gatherFacts(record, allowRename: allowRename, batch: batch)
            facts.contentFailure = unavailable[record.path]
            let decision = ApplyDecision.decide(facts)
            if logger.isEnabled(.debug) {
                // One line per record: what a divergence in the fault suite is read from afterwards.
                let row = facts.row.map { "row \($0.present ? "present" : "absent") tag \($0.tag)\($0.hasLocalChange ? " changed" : "")" } ?? "no row"
                logger.debug("decide \(quoted(record.path)) \(record.deleted ? "tombstone" : record.kind == .directory ? "dir" : "file") tag \(record.changeTag): "
                             + "\(decision); \(row), disk \(facts.disk == nil ? "empty" : "holds it")\(facts.queued ? ", queued" : "")")
            }
            if let plan = plannedWrite(decision, facts) { plans.append(plan) } else { settled.append(Settled(decision: decision, facts: facts)) }
        }
        var again: [Record] = []
        var settledReport = ApplyReport()
        try writeRecorded(plans, report: &report, again: &again) {
            for item in settled { try recordSettled(item, report: &settledReport) }
            try alongside()
        }
        report.absorb(settledReport)
        return again
    }

    /// Carries out `plans`: noted in the journal first (a kill mid-way is recognised on restart), written
    /// and made durable, then their outcome recorded in one transaction with `alongside`; the bases of
    /// what was written are kept. Records whose write failed in a way a fresh look may settle are added
    /// to `again`.
    func writeRecorded(_ plans: [PlannedWrite], report: inout ApplyReport, again: inout [Record],
                       alongside: () throws -> Void = {}) throws {
        let journaled = plans.filter { $0.action != .adopt }.map(\.record)
        try journal(journaled)
        let results = try execute(plans, report: &report)
        try store.transaction {
            for (plan, result) in zip(plans, results) {
                if case let .failed(failure) = result, failure.decidesAgain { again.append(plan.record) }
                try record(plan, result: result, report: &report)
            }
            try store.clearJournal(journaled.map(\.path))
            try alongside()
        }
        keepBases(plans, results)
    }

    /// `writeRecorded` for callers that do not decide again (conflict outcomes: the next look does).
    func writeRecorded(_ plans: [PlannedWrite], report: inout ApplyReport) throws {
        var ignoredAgain: [Record] = []
        try writeRecorded(plans, report: &report, again: &ignoredAgain)
    }

    // MARK: Gathering the facts

    /// The facts `ApplyDecision.decide` needs about one record, read from the database and the disk.
    /// A change on disk the watcher has not reported yet is taken in first, so that it counts as the
    /// local edit it is.
    func gatherFacts(_ record: Record, allowRename: Bool = true, batch: [PathKey: Record] = [:]) throws -> ApplyFacts {
        var facts = ApplyFacts(record: record)
        let recordPath: RecordPath
        do { recordPath = try RecordPath(validating: record.path) } catch {
            facts.invalid = "refusing remote record: \(error)"
            return facts
        }
        guard let path = locate(recordPath) else { return facts }
        facts.path = path
        if isIgnored(root: path.root.index, relative: path.relative, isDirectory: record.kind == .directory) {
            facts.ignored = true
            return facts
        }
        var row = try store.file(record.path)
        facts.row = row
        if let row, row.holds(record) { return facts }
        var stat: FileStat?
        do { stat = try safeRoots[path.root.index].stat(path.relative) } catch {
            facts.blocked = ApplyFailure.from(error)
            return facts
        }
        if let found = stat, found.kind == .special {
            facts.blocked = ApplyFailure(.blocked, "\(quoted(roots[path.root.index].path + "/" + path.relative)) is a fifo, socket or device")
            return facts
        }
        if !agrees(row, stat) {
            let observed = try absorb([Observation(root: path.root.index, relative: path.relative, path: record.path, stat: stat, known: row)])
            facts.busy = observed.busy > 0
            row = try store.file(record.path)
            facts.row = row
            if let row, row.holds(record) { return facts }
        }
        facts.disk = stat
        facts.queued = try row != nil && hasLocalChange(at: record.path, for: record, disk: stat)
        facts.ownPush = try facts.queued && isOwnUnacknowledgedPush(record)
        facts.contentHere = hasContent(record)
        if stat == nil, !facts.queued {
            facts.movedSourceDeletedHere = try movedSourceDeletedHere(record, at: path)
            if allowRename, !facts.movedSourceDeletedHere { facts.renameSource = try renameSource(for: record, at: path, batch: batch) }
        }
        return facts
    }

    /// Whether the path has a local change the server has not accepted: its own outbox entry, or, for a
    /// folder here that the record makes a file, changes below it (the folder holds local work).
    func hasLocalChange(at path: String, for record: Record, disk: FileStat?) throws -> Bool {
        if try store.outboxEntry(path) != nil { return true }
        guard disk?.kind == .directory, record.kind != .directory, !record.deleted else { return false }
        return try store.hasOutbox(below: path)
    }

    /// Whether `record` renames to its path a path whose same content was deleted here and not yet
    /// sent (seen now if the watcher has not reported it yet): then the delete goes with the rename.
    private func movedSourceDeletedHere(_ record: Record, at path: LocalPath) throws -> Bool {
        guard !record.deleted, let moved = record.movedFrom, let movedPath = try? RecordPath(validating: moved),
              let source = locate(movedPath), source.root == path.root, source != path,
              var row = try store.file(moved), row.tag > 0, row.kind == record.kind,
              record.kind == .directory || row.syncedSHA256 == record.sha256 else { return false }
        if row.present {
            let stat = entry(root: source.root.index, relative: source.relative)
            guard stat == nil else { return false }
            _ = try absorb([Observation(root: source.root.index, relative: source.relative, path: moved, stat: nil, known: row)])
            guard let now = try store.file(moved) else { return false }
            row = now
        }
        // Deleted here: not sent yet, or sent and accepted after the other side renamed it.
        return try !row.present && (row.syncedDeleted || store.outboxEntry(moved) != nil)
    }

    /// The plan for a decision that writes (or adopts); nil for the others.
    private func plannedWrite(_ decision: ApplyDecision, _ facts: ApplyFacts) -> PlannedWrite? {
        guard let path = facts.path else { return nil }
        switch decision {
        case .adopt:
            return PlannedWrite(action: .adopt, record: facts.record, path: path, expect: facts.disk, row: facts.row)
        case let .write(action):
            var plan = PlannedWrite(action: action, record: facts.record, path: path, expect: facts.disk, row: facts.row)
            if action == .rename, let source = facts.renameSource {
                plan.source = source
                plan.sourceRow = try? store.file(recordPath(source))
            }
            return plan
        default:
            return nil
        }
    }

    /// A local path the record was renamed from that is here, unchanged and settled: it is renamed
    /// locally instead of writing the content again (a directory moves with everything in it).
    ///
    /// A folder is renamed whole only if nothing in it here is another version than the one the batch
    /// brings for its new path (a file changed here since the other side renamed the folder stays where
    /// it is, and its new path gets the other side's version); what the batch says nothing of goes along.
    func renameSource(for record: Record, at path: LocalPath, batch: [PathKey: Record] = [:]) throws -> LocalPath? {
        guard !record.deleted, let moved = record.movedFrom, let movedPath = try? RecordPath(validating: moved),
              let source = locate(movedPath), source.root == path.root, source != path,
              !path.isWithin(source),
              let sourceRow = try store.file(moved), sourceRow.present, sourceRow.kind == record.kind,
              record.kind == .directory || sourceRow.sha256 == record.sha256,
              // The version the other side renamed, not one written at the source after its rename.
              record.changeTag == 0 || sourceRow.tag < record.changeTag,
              try store.outboxEntry(moved) == nil,
              try record.kind != .directory || !store.hasOutbox(below: moved),
              let sourceStat = try? safeRoots[source.root.index].stat(source.relative), sourceRow.matches(sourceStat) else { return nil }
        // The batch keeps the source at its own path too (a version sent again, or made there anew):
        // renaming it away would leave that path recorded as present with nothing on disk.
        if let same = batch[PathKey(moved)], !same.deleted { return nil }
        if record.kind == .directory {
            // Everything in it must be synced, unchanged on disk, and moved by the batch as the same
            // version: a file made or changed here, or one the other side did not know of, stays at its
            // path, which is where its writer put it; the rest of the folder then moves file by file.
            let targetPrefix = record.path
            // Something the batch itself writes into the old folder is newer than the rename.
            for other in batch.values where !other.deleted && PathText.isWithin(other.path, moved) && !PathText.same(other.path, moved) {
                return nil
            }
            var rows: [PathKey: KnownFile] = [:]
            for row in try store.files(under: moved) where row.present && row.path != moved {
                guard row.tag > 0, !row.hasLocalChange,
                      let brought = batch[PathKey(targetPrefix + row.path.dropFirst(moved.count))],
                      !brought.deleted, brought.kind == row.kind, row.kind == .directory || brought.sha256 == row.sha256,
                      row.tag < brought.changeTag || brought.changeTag == 0,
                      brought.movedFrom.map({ PathText.same($0, row.path) }) ?? false else { return nil }
                rows[PathKey(row.path)] = row
            }
            // What is on disk in it, the watcher's news not waited for: nothing new, nothing changed.
            let safeRoot = safeRoots[source.root.index]
            guard let walk = try? Self.walkTree(safeRoot, root: source.root.index, relative: source.relative, inotify: nil,
                                                rules: ignores[source.root.index], logger: logger).report,
                  walk.special.isEmpty, walk.invalidNames.isEmpty else { return nil }
            var onDisk = 0
            for found in walk.entries where !TempNames.isTemporary(SafeRoot.name(of: found.relative)) {
                onDisk += 1
                guard let row = rows[PathKey(recordPath(LocalPath(source.root, found.relative)))], row.matches(found.stat) else { return nil }
            }
            guard onDisk == rows.count else { return nil }
        }
        return source
    }

    /// Whether `remote` is what this agent last pushed for its path (the server took it, the answer
    /// never arrived): then it is no conflict, just the new base for what is still queued.
    func isOwnUnacknowledgedPush(_ remote: Record) throws -> Bool {
        guard let entry = try store.outboxEntry(remote.path) else { return false }
        if remote.deleted { return entry.sentDeleted }
        return entry.sentSHA256 == remote.sha256 && !remote.sha256.isEmpty
    }

    /// Whether the local row and a remote record hold the same thing.
    func sameContent(_ local: KnownFile, _ remote: Record) -> Bool { local.sameContent(as: remote) }

    // MARK: Recording

    /// Records a decision that wrote nothing (inside the batch transaction).
    private func recordSettled(_ item: Settled, report: inout ApplyReport) throws {
        let record = item.facts.record
        switch item.decision {
        case .skip:
            // Here already, or no longer a path synced here: nothing of it is left to apply.
            if let row = item.facts.row, item.facts.path != nil {
                try store.settleUnapplied(record.path, upTo: row.tag)
            } else {
                try store.dropUnapplied(record.path)
            }
        case .ignored:
            report.ignored += 1
            try store.dropUnapplied(record.path)
        case let .hold(failure):
            try keepNotApplied(record, failure, report: &report)
        case .rebase:
            // Our own save, whose answer was lost: it is the base now; the local change stays queued.
            guard var local = item.facts.row else { return }
            local.agree(with: record)
            try store.saveFile(local)
        case .conflict:
            guard let local = item.facts.row else { return }
            report.conflicts.append(Conflict(local: local, remote: record))
            // Until its rule has settled it, the version is kept like any change not yet applied.
            try keepNotApplied(record, ApplyFailure(.conflict, "a local change meets this version; its merge rule settles it"),
                               report: &report, quiet: true)
        case .fetchContent:
            report.needContent.append(record)
            try keepNotApplied(record, ApplyFailure(.contentMissing, "its content is fetched first"), report: &report, quiet: true)
        case .followLocalDelete:
            var row = item.facts.row ?? KnownFile(path: record.path, kind: record.kind, present: false)
            row.kind = record.kind
            row.type = record.type
            row.present = false
            row.sha256 = ""
            row.agree(with: record)
            try store.saveFile(row)
            try store.enqueue(row.path)
            logger.info("\(quoted(record.path)) was renamed from \(quoted(record.movedFrom ?? "?")) elsewhere, which was deleted here: the delete follows it")
        case .adopt, .write:
            break
        }
    }

    /// Keeps remote records as not applied because of `failures` (by path).
    public func keepNotApplied(_ records: [Record], _ failures: [String: ApplyFailure]) throws {
        var report = ApplyReport()
        try store.transaction {
            for record in records {
                if let failure = failures[record.path] { try keepNotApplied(record, failure, report: &report) }
            }
        }
    }

    /// Keeps a record as not applied (logged once per version and cause, except the expected ones).
    func keepNotApplied(_ record: Record, _ failure: ApplyFailure, report: inout ApplyReport, quiet: Bool = false) throws {
        let before = try store.unapplied(record.path)
        try store.keepUnapplied(record, failure: failure, delay: { RetryDelay.after(attempts: $0, cause: failure.cause) })
        report.notApplied.append(record.path)
        let repeated = before.map { $0.record.changeTag == record.changeTag && $0.failure.cause == failure.cause } ?? false
        if !quiet && !repeated {
            logger.error("cannot apply \(quoted(record.path)) yet (\(failure.cause.rawValue)): \(failure.message); kept as not applied and retried")
        }
    }

    /// Records one operation's outcome in the database (inside the batch transaction).
    func record(_ plan: PlannedWrite, result: WriteResult, report: inout ApplyReport) throws {
        let record = plan.record
        var row = plan.row ?? KnownFile(path: record.path, kind: record.kind, present: false)
        let localPath = roots[plan.path.root.index].path + "/" + plan.path.relative
        switch result {
        case var .failed(failure):
            // The system's message may name a temporary file beside the target: say which path it was.
            if !failure.message.contains(localPath) { failure.message = "\(quoted(localPath)): " + failure.message }
            try keepNotApplied(record, failure, report: &report, quiet: failure.decidesAgain)
        case .kept:
            row.agree(with: record)
            row.present = true
            try store.saveFile(row)
            try store.enqueue(row.path)
            logger.info("kept \(quoted(localPath)): deleted remotely but it holds files changed here")
        case let .done(stat):
            if plan.action == .rename, let source = plan.source {
                let carried = try moveRows(root: plan.path.root.index, from: source.relative, to: plan.path.relative)
                if record.kind == .directory, let gone = carried.first(where: { $0.from.path == recordPath(source) })?.from, gone.tag > 0 {
                    // The old folder is gone here too. Its tombstone normally comes from the side that
                    // renamed it, but that side may have made the folder again meanwhile (a file of ours
                    // landed in it): the tombstone goes from here as well, and meets theirs as one delete.
                    var tombstone = gone
                    tombstone.present = false
                    tombstone.movedFrom = nil
                    try store.saveFile(tombstone)
                    try store.enqueue(tombstone.path)
                }
                var moved = try store.file(record.path) ?? row
                // The decision saw the source unchanged, but a program may have written it between that
                // look and the rename (the file keeps its inode, so the rename still "succeeds"). Taking
                // the stat now would record that edit as the synced version, and no scan would ever see
                // it again: such a file keeps the identity it had, and is looked at below, which finds
                // it changed and sends it. (Its ctime moved with the rename, so it is not compared.)
                var changedMeanwhile = false
                if let stat {
                    if record.kind == .directory || Self.sameFile(plan.sourceRow, stat) { moved.observe(stat) } else { changedMeanwhile = true }
                }
                moved.agree(with: record)
                moved.movedFrom = nil
                try store.saveFile(moved)
                try store.dequeue(moved.path)
                report.applied.append(AppliedChange(path: record.path, event: .changed, localPath: localPath, type: record.type))
                // A folder renamed here took along whatever was in it, also what was written there
                // since the agent last looked (its events now name the old path): look again.
                if record.kind == .directory || changedMeanwhile { report.toCheck.append(plan.path) }
                return
            }
            // The manifest of a large file here is kept: its chunks build the next version.
            if let asset = record.asset, let chunks = asset.chunks, !record.deleted { try store.saveManifest(asset.sha256, chunks: chunks) }
            if plan.action == .adopt {
                row.agree(with: record)
                try store.saveFile(row)
                // A version queued to go again still goes when another device's same content is
                // adopted: that version may be older at the server than the rename that made devices
                // move the path away (the fault suite's seed 3001).
                try store.dequeue(row.path, unlessResend: row.present)
                return
            }
            row.kind = record.kind
            row.type = record.type
            if record.deleted {
                row.present = false
                row.sha256 = ""
            } else if let stat {
                row.observe(stat)
                row.sha256 = record.kind == .directory ? "" : record.sha256
            }
            row.agree(with: record)
            try store.saveFile(row)
            if !row.present && record.deleted && plan.expect == nil && plan.row == nil {
                // A tombstone for something never here: its tag is remembered so a later create bases on it.
                return
            }
            // A version queued to go again (`OutboxEntry.resend`) still goes (see the adopt above).
            if plan.resend { try store.enqueue(row.path, resend: true) } else { try store.dequeue(row.path, unlessResend: row.present) }
            touched(row.path)
            if record.deleted && plan.expect == nil { return }
            report.applied.append(AppliedChange(path: record.path, event: plan.event ?? (record.deleted ? .deleted : .changed),
                                                localPath: localPath, type: record.type))
        }
    }

    /// The database side of a local rename: rows at `from` (and below) now live at `to`, with no
    /// shared version yet (their own records, coming next, settle that without reading anything).
    /// Returns each row as it was and as it is now.
    @discardableResult
    /// Whether `stat`, taken right after a rename, is still the file `row` describes: a rename keeps
    /// size, mtime, inode and mode (it moves ctime, so that is left out).
    static func sameFile(_ row: KnownFile?, _ stat: FileStat) -> Bool {
        guard let row, row.present, row.kind == KnownFile.kind(of: stat.kind) else { return false }
        return row.size == stat.size && row.mtime == stat.mtime && row.inode == stat.inode && row.mode == stat.mode
    }

    func moveRows(root: Int, from: String, to: String) throws -> [(from: KnownFile, to: KnownFile)] {
        let fromPath = recordPath(root: root, relative: from)
        let toPath = recordPath(root: root, relative: to)
        var out: [(from: KnownFile, to: KnownFile)] = []
        for row in try store.files(under: fromPath) where row.present {
            var moved = row
            moved.path = toPath + row.path.dropFirst(fromPath.count)
            moved.tag = 0
            moved.syncedSHA256 = nil
            moved.syncedDeleted = false
            moved.movedFrom = nil
            if let existing = try store.file(moved.path) {
                moved.tag = existing.tag
                moved.syncedSHA256 = existing.syncedSHA256
                moved.syncedDeleted = existing.syncedDeleted
            }
            try store.saveFile(moved)
            try store.removeFile(row.path)
            // Never a present row with a change nobody will send: its own record, if one comes, adopts it.
            if moved.hasLocalChange { try store.enqueue(moved.path) }
            out.append((row, moved))
        }
        return out
    }

    /// Largest content a record may carry inline (the server's default limit): inflating allocates the
    /// declared size, so a hostile record declaring more is refused before any memory is taken.
    static let maxInlineBytes: Int64 = 64 << 20
    /// zlib never expands more than about 1,032 to 1: data declaring a size far beyond that is not
    /// what it says, and is refused without inflating it.
    static let maxInflateRatio: Int64 = 1032

    /// The record's content, inflated (to no more than its declared size) and checked against its
    /// size and name (`ContentID`). The server stores inline content as given: this is where it is checked.
    static func content(of record: Record) throws -> [UInt8] {
        let data = record.data ?? Deflate.compress([])
        guard record.size <= maxInlineBytes, record.size <= Int64(data.count) * maxInflateRatio + 64 else {
            throw ApplyFailure(.invalid, "\(quoted(record.path)) declares \(record.size) bytes inline for \(data.count) bytes of data; "
                               + "more than \(maxInlineBytes) bytes, or more than zlib can make of them, is never inflated")
        }
        let bytes = try Deflate.decompress(data, expectedSize: Int(record.size))
        let digest = ContentID.of(bytes)
        guard digest == record.sha256 else {
            throw ContentMismatch(path: record.path, expected: record.sha256, actual: digest)
        }
        return bytes
    }
}

/// Remote content whose hash is not the one its record declares; it is never applied.
public struct ContentMismatch: Error, Sendable, CustomStringConvertible {
    public var path: String
    public var expected: String
    public var actual: String
    public var description: String { "content of \(quoted(path)) hashes to \(actual.prefix(16))…, record says \(expected.prefix(16))…" }
}

extension Replica {
    /// Indices of records whose content is neither inline nor already here (the feed leaves out the
    /// content of this device's own records).
    public func missingContent(_ records: [Record]) throws -> [Int] {
        var out: [Int] = []
        for (index, record) in records.enumerated() where !record.deleted && record.kind != .directory && record.data == nil && record.size > 0 && record.asset == nil {
            if let row = try store.file(record.path), row.present, row.sha256 == record.sha256 { continue }
            if try isOwnUnacknowledgedPush(record) { continue }
            out.append(index)
        }
        return out
    }

    func recordPath(_ path: LocalPath) -> String { roots[path.root.index].name + "/" + path.relative }
}

extension Replica {
    /// Remote changes not applied that are due now, soonest first.
    public func dueUnapplied(limit: Int) throws -> [UnappliedChange] { try store.dueUnapplied(now: Clock.now(), limit: limit) }

    /// When the next change not applied is due; nil when none waits.
    public func nextUnappliedAttempt() throws -> Int64? { try store.nextUnappliedAttempt() }

    /// Makes the changes not applied at or below `path` (all when nil) due now; returns their paths.
    public func makeUnappliedDue(under path: String?, includingInvalid: Bool = true) throws -> [String] {
        try store.makeUnappliedDue(under: path, includingInvalid: includingInvalid)
    }
}
