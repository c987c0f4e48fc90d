import Glibc
import SinkiLoop
import SinkiRecord
import SinkiSupport
import SinkiWatch
import CSystemShim

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
    /// Records refused by the safety floor, with why.
    public var refused: [String] = []
    /// Records whose content is not inline (an asset, or data left out of the feed): fetch, then
    /// apply again.
    public var needContent: [Record] = []
    /// Records for paths ignored here (kept on the server, not applied).
    public var ignored = 0
    /// Entries found in directories this apply created that it did not write: local files to look at.
    public var toCheck: [(root: Int, relative: String)] = []
    public init() {}
}

/// One planned disk operation of a batch.
struct PlannedWrite: Sendable {
    enum Action: Sendable { case write, symlink, mkdir, delete, adopt, rename }
    var action: Action
    var record: Record
    var root: Int
    var relative: String
    /// What was at the path when planned (nil: nothing), checked again right before replacing it.
    var expect: FileStat?
    var row: KnownFile?
    /// The observer event to report instead of changed/deleted (a conflict or merge result).
    var event: AppliedChange.Event?
    /// For a rename: the local path (below the same root) whose unchanged content becomes this one.
    var source: String?
    var sourceRow: KnownFile?
}

extension Replica {
    /// Applies remote records: clean paths are written (temporary file, rename), the batch is made
    /// durable with one `syncfs`, then recorded in the database together with `token`. Paths with
    /// a local change the server has not accepted come back as conflicts; nothing is overwritten.
    public func apply(_ records: [Record], token: String?) throws -> ApplyReport {
        var report = ApplyReport()
        var plans: [PlannedWrite] = []
        var seen = Set<String>()
        let started = Clock.monotonic()
        // The feed holds each path once; if a page somehow repeats one, the later version wins.
        for record in records.reversed() where seen.insert(record.path).inserted {
            if let plan = try plan(record, into: &report) { plans.append(plan) }
        }
        plans.reverse()
        let planned = Clock.monotonic()
        let executed = try writeRecorded(plans, report: &report) {
            if let token { try store.setMeta(MetaKey.feedToken, token) }
        }
        let committed = Clock.monotonic()
        func ms(_ from: Int64, _ to: Int64) -> String { String((to - from) / 1_000_000) }
        logger.debug("apply \(records.count): plan \(ms(started, planned)) ms, write+sync \(ms(planned, executed)) ms, commit \(ms(executed, committed)) ms")
        return report
    }

    /// Carries out `plans`: noted in the journal first (a kill mid-way is recognised on restart), written
    /// and made durable, then their outcome recorded in one transaction with `alongside`; the bases of
    /// what was written are kept. Returns when the writes were durable, for the apply's timing line.
    @discardableResult
    func writeRecorded(_ plans: [PlannedWrite], report: inout ApplyReport, alongside: () throws -> Void = {}) throws -> Int64 {
        let journaled = plans.filter { $0.action != .adopt }.map(\.record)
        try journal(journaled)
        let results = try execute(plans, report: &report)
        let executed = Clock.monotonic()
        try store.transaction {
            for (plan, result) in zip(plans, results) {
                try record(plan, result: result, report: &report)
            }
            try store.clearJournal(journaled.map(\.path))
            try alongside()
        }
        keepBases(plans, results)
        return executed
    }

    /// Decides what to do with one record, or files it as refused, conflicting or needing content.
    private func plan(_ record: Record, into report: inout ApplyReport) throws -> PlannedWrite? {
        let path: RecordPath
        do { path = try RecordPath(validating: record.path) } catch {
            logger.error("refusing remote record: \(error)")
            report.refused.append(record.path)
            return nil
        }
        guard let (root, relative) = locate(path) else { return nil }
        if isIgnored(root: root, relative: relative, isDirectory: record.kind == .directory) {
            report.ignored += 1
            return nil
        }
        var row = try store.file(record.path)
        if let row, record.changeTag > 0, row.tag >= record.changeTag { return nil }
        let stat: FileStat?
        do { stat = try safeRoots[root].stat(relative) } catch {
            logger.error("refusing remote record \(quoted(record.path)): \(error)")
            report.refused.append(record.path)
            return nil
        }
        // Something changed on disk that the watcher has not reported yet: take it in first, so
        // that it counts as the local edit it is.
        let onDisk = stat.map { $0.kind != .special } ?? false
        let rowMatches: Bool
        if let row { rowMatches = row.present ? (stat.map { row.matches($0) } ?? false) : !onDisk } else { rowMatches = !onDisk }
        if !rowMatches {
            _ = try absorb([Observation(root: root, relative: relative, path: record.path, stat: onDisk ? stat : nil, known: row)])
            row = try store.file(record.path)
        }
        let pending = try store.outboxEntry(record.path) != nil
        if pending, var local = row {
            if sameContent(local, record) {
                return PlannedWrite(action: .adopt, record: record, root: root, relative: relative, expect: stat, row: local)
            }
            if try isOwnUnacknowledgedPush(record) {
                // Our own save, whose answer was lost: it is the base now; the local change stays queued.
                local.agree(with: record)
                try store.saveFile(local)
                return nil
            }
            report.conflicts.append(Conflict(local: local, remote: record))
            return nil
        }
        if record.deleted {
            return PlannedWrite(action: .delete, record: record, root: root, relative: relative, expect: stat, row: row)
        }
        if stat == nil, let rename = try renamePlan(record, root: root, relative: relative, row: row) { return rename }
        switch record.kind {
        case .directory:
            return PlannedWrite(action: .mkdir, record: record, root: root, relative: relative, expect: stat, row: row)
        case .symlink, .file:
            if let row, row.present, stat != nil, row.sha256 == record.sha256, row.kind == record.kind, !record.sha256.isEmpty {
                // Same content already here (both sides made it): agree without writing.
                return PlannedWrite(action: .adopt, record: record, root: root, relative: relative, expect: stat, row: row)
            }
            if !hasContent(record) {
                report.needContent.append(record)
                return nil
            }
            return PlannedWrite(action: record.kind == .symlink ? .symlink : .write, record: record, root: root,
                                relative: relative, expect: stat, row: row)
        }
    }

    /// A record renamed from a path that is here, unchanged and settled: rename it locally instead of
    /// writing the content again (a directory moves with everything in it).
    func renamePlan(_ record: Record, root: Int, relative: String, row: KnownFile?) throws -> PlannedWrite? {
        guard !record.deleted, let source = record.movedFrom, let sourcePath = try? RecordPath(validating: source),
              let (sourceRoot, sourceRelative) = locate(sourcePath), sourceRoot == root, sourceRelative != relative,
              !relative.hasPrefix(sourceRelative + "/"),
              let sourceRow = try store.file(source), sourceRow.present, sourceRow.kind == record.kind,
              record.kind == .directory || sourceRow.sha256 == record.sha256,
              try store.outboxEntry(source) == nil,
              try record.kind != .directory || !store.hasOutbox(below: source),
              let sourceStat = try? safeRoots[root].stat(sourceRelative), sourceRow.matches(sourceStat) else { return nil }
        return PlannedWrite(action: .rename, record: record, root: root, relative: relative, expect: nil, row: row,
                            source: sourceRelative, sourceRow: sourceRow)
    }

    /// Whether `remote` is what this agent last pushed for its path (the server took it, the answer
    /// never arrived): then it is no conflict, just the new base for what is still queued.
    func isOwnUnacknowledgedPush(_ remote: Record) throws -> Bool {
        guard let entry = try store.outboxEntry(remote.path) else { return false }
        if remote.deleted { return entry.sentDeleted }
        return entry.sentSHA256 == remote.sha256 && !remote.sha256.isEmpty
    }

    /// Whether the local row and a remote record hold the same thing.
    func sameContent(_ local: KnownFile, _ remote: Record) -> Bool {
        if !local.present { return remote.deleted }
        if remote.deleted { return false }
        if local.kind != remote.kind { return false }
        return local.kind == .directory || local.sha256 == remote.sha256
    }

    /// The outcome of one planned operation.
    enum WriteResult: Sendable {
        case done(FileStat?)
        /// A directory kept because it still holds something.
        case kept
        case failed(String)
    }

    /// Runs the planned operations (directories first, files on every core, deletes deepest first),
    /// then one `syncfs` per root touched.
    func execute(_ plans: [PlannedWrite], report: inout ApplyReport) throws -> [WriteResult] {
        var results = [WriteResult](repeating: .done(nil), count: plans.count)
        var parents: [String: FileDescriptor] = [:]
        var madeDirectories: [(Int, String)] = []
        func parent(_ plan: PlannedWrite) throws(SafeRootError) -> FileDescriptor {
            let key = "\(plan.root)/" + SafeRoot.folderPrefix(of: plan.relative)
            if let open = parents[key] { return open }
            var made: [String] = []
            let echoes = self.echoes
            let opened = try safeRoots[plan.root].openParent(of: plan.relative, create: !plan.record.deleted, made: &made) { directory in
                echoes?.expect(root: plan.root, relative: directory, .directoryMade)
            }
            for directory in made { madeDirectories.append((plan.root, directory)) }
            parents[key] = opened
            return opened
        }
        func name(_ plan: PlannedWrite) -> String { SafeRoot.name(of: plan.relative) }
        let order = plans.indices.sorted { a, b in
            let left = plans[a], right = plans[b]
            func rank(_ action: PlannedWrite.Action) -> Int {
                switch action {
                case .adopt: return 0
                case .mkdir, .rename: return 1
                case .write, .symlink: return 2
                case .delete: return 3
                }
            }
            if rank(left.action) != rank(right.action) { return rank(left.action) < rank(right.action) }
            if left.action == .delete { return left.relative.utf8.count > right.relative.utf8.count }
            if left.action == .mkdir || left.action == .rename { return left.relative.utf8.count < right.relative.utf8.count }
            return a < b
        }
        // Parents are opened here, on this executor; the writes themselves fan out below.
        struct FileJob: Sendable {
            var index: Int
            var parent: Int32
            var parentPath: String
            var name: String
        }
        var fileJobs: [FileJob] = []
        var touchedRoots = Set<Int>()
        let startedWrites = Clock.monotonic()
        for index in order {
            let plan = plans[index]
            do throws(SafeRootError) {
                switch plan.action {
                case .adopt:
                    continue
                case .mkdir:
                    let directory = try parent(plan)
                    touchedRoots.insert(plan.root)
                    let fresh = plan.expect == nil
                    if fresh { echoes?.expect(root: plan.root, relative: plan.relative, .directoryMade) }
                    do {
                        results[index] = .done(try DiskWriter.makeDirectory(parent: directory.raw, parentPath: directory.path,
                                                                           name: name(plan), mode: plan.record.mode))
                        if fresh { madeDirectories.append((plan.root, plan.relative)) }
                    } catch {
                        if fresh { echoes?.cancel(root: plan.root, relative: plan.relative, .directoryMade) }
                        results[index] = .failed("\(error)")
                    }
                case .write, .symlink:
                    let directory = try parent(plan)
                    touchedRoots.insert(plan.root)
                    fileJobs.append(FileJob(index: index, parent: directory.raw, parentPath: directory.path, name: name(plan)))
                case .rename:
                    let directory = try parent(plan)
                    touchedRoots.insert(plan.root)
                    results[index] = renameLocally(plan, into: directory, name: name(plan))
                case .delete:
                    guard plan.expect != nil else { continue }
                    let directory: FileDescriptor
                    do { directory = try parent(plan) } catch let error where error.errno == ENOENT { continue }
                    touchedRoots.insert(plan.root)
                    guard (try? FileDescriptor.statEntry(parent: directory.raw, parentPath: directory.path, name: name(plan))) != nil else {
                        results[index] = .done(nil) // gone already (renamed away earlier in this batch)
                        continue
                    }
                    let echo: EchoFilter.Kind = plan.expect?.kind == .directory ? .directoryGone : .fileGone
                    echoes?.expect(root: plan.root, relative: plan.relative, echo)
                    do {
                        let removed = try DiskWriter.remove(parent: directory.raw, parentPath: directory.path, name: name(plan),
                                                            expect: plan.row?.present == true ? plan.expect : nil)
                        results[index] = removed ? .done(nil) : .kept
                        if !removed { echoes?.cancel(root: plan.root, relative: plan.relative, echo) }
                    } catch {
                        echoes?.cancel(root: plan.root, relative: plan.relative, echo)
                        results[index] = .failed("\(error)")
                    }
                }
            } catch {
                results[index] = .failed("\(error)")
            }
        }
        let echoes = self.echoes
        // Files in one directory are written by one thread: creating entries in a directory takes
        // its lock, so two threads in one directory mostly wait for each other.
        var byDirectory: [Int32: [FileJob]] = [:]
        for job in fileJobs { byDirectory[job.parent, default: []].append(job) }
        let groups = Array(byDirectory.values)
        // A download is renamed into place by the last path that needs it; any other copies it.
        var downloadUses: [String: Int] = [:]
        for job in fileJobs where plans[job.index].record.data == nil && plans[job.index].record.asset != nil {
            downloadUses[plans[job.index].record.sha256, default: 0] += 1
        }
        var movesDownload = Set<Int>()
        for job in fileJobs.reversed() where plans[job.index].record.data == nil && plans[job.index].record.asset != nil {
            let sha = plans[job.index].record.sha256
            if downloadUses[sha] != nil {
                movesDownload.insert(job.index)
                downloadUses[sha] = nil
            }
        }
        let downloads = downloadsDirectory, moving = movesDownload
        let outcomes: [[WriteResult]] = Blocking.map(groups) { group in
            group.map { job in
                let plan = plans[job.index]
                do {
                    if plan.action == .write, plan.record.data == nil, plan.record.asset != nil {
                        let stat = try DiskWriter.placeFile(sourceDirectory: downloads, sourceName: plan.record.sha256,
                                                            move: moving.contains(job.index), parent: job.parent,
                                                            parentPath: job.parentPath, name: job.name, mode: plan.record.mode,
                                                            modifiedAt: plan.record.modifiedAt, expect: plan.expect) {
                            echoes?.expect(root: plan.root, relative: plan.relative, .fileIn)
                        }
                        return .done(stat)
                    }
                    let bytes = try Self.content(of: plan.record)
                    let stat: FileStat
                    if plan.action == .symlink {
                        echoes?.expect(root: plan.root, relative: plan.relative, .fileIn)
                        stat = try DiskWriter.writeSymlink(parent: job.parent, parentPath: job.parentPath, name: job.name, target: bytes,
                                                           expect: plan.expect)
                    } else {
                        let directory = SafeRoot.folderPrefix(of: plan.relative)
                        stat = try DiskWriter.writeFile(parent: job.parent, parentPath: job.parentPath, name: job.name, bytes: bytes,
                                                        mode: plan.record.mode, modifiedAt: plan.record.modifiedAt, expect: plan.expect) { inode in
                            echoes?.expect(root: plan.root, relative: plan.relative, .fileIn)
                            if let inode { echoes?.expect(root: plan.root, relative: directory + "#\(inode)", .anonymous) }
                        }
                    }
                    return .done(stat)
                } catch {
                    echoes?.cancel(root: plan.root, relative: plan.relative, .fileIn)
                    return .failed("\(error)")
                }
            }
        }
        for (group, results2) in zip(groups, outcomes) {
            for (job, outcome) in zip(group, results2) { results[job.index] = outcome }
        }
        withExtendedLifetime(parents) {}
        let written = Clock.monotonic()
        defer { logger.debug("apply: writes \((written - startedWrites) / 1_000_000) ms, syncfs \((Clock.monotonic() - written) / 1_000_000) ms") }
        // Durability is paid once per batch, before the database says the batch is here.
        for root in touchedRoots {
            do { try safeRoots[root].syncFileSystem() } catch { logger.warning("\(error)") }
        }
        try store.transaction {
            for (root, relative) in madeDirectories {
                let path = recordPath(root: root, relative: relative)
                guard try store.file(path) == nil, let stat = try safeRoots[root].stat(relative) else { continue }
                var row = KnownFile(path: path, kind: .directory, present: true, type: Record.directoryType)
                row.observe(stat)
                try store.saveFile(row)
            }
        }
        watchNewDirectories(madeDirectories, plans: plans, report: &report)
        return results
    }

    /// Renames `plan.source` to the plan's path (never replacing anything), telling the watcher to
    /// expect both events and moving a directory's watches along.
    private func renameLocally(_ plan: PlannedWrite, into directory: FileDescriptor, name: String) -> WriteResult {
        guard let source = plan.source, let sourceRow = plan.sourceRow else { return .failed("bug: rename without a source") }
        var made: [String] = []
        guard let sourceParent = try? safeRoots[plan.root].openParent(of: source, create: false, made: &made) else {
            return .failed("cannot open the folder of \(quoted(source))")
        }
        let sourceName = SafeRoot.name(of: source)
        let isDirectory = plan.record.kind == .directory
        echoes?.expect(root: plan.root, relative: source, .movedAway)
        echoes?.expect(root: plan.root, relative: plan.relative, isDirectory ? .directoryMade : .fileIn)
        if sinki_rename_noreplace(sourceParent.raw, sourceName, directory.raw, name) != 0 {
            let code = errno
            echoes?.cancel(root: plan.root, relative: source, .movedAway)
            echoes?.cancel(root: plan.root, relative: plan.relative, isDirectory ? .directoryMade : .fileIn)
            // Already moved by the rename of a directory above it in this batch: same inode, done.
            if code == ENOENT, let there = try? FileDescriptor.statEntry(parent: directory.raw, parentPath: directory.path, name: name),
               there.inode == sourceRow.inode {
                return .done(there)
            }
            return .failed("rename \(quoted(source)): \(SystemError("rename", errno: code).message)")
        }
        if isDirectory { inotify?.renameWatches(root: plan.root, from: source, to: plan.relative) }
        guard let stat = try? FileDescriptor.statEntry(parent: directory.raw, parentPath: directory.path, name: name) else {
            return .failed("\(quoted(plan.relative)) vanished right after its rename")
        }
        return .done(stat)
    }

    /// Directories this apply made get their watch here (their creation event was dropped as our own
    /// echo); anything in them the apply did not write was made locally meanwhile: look at it.
    private func watchNewDirectories(_ made: [(Int, String)], plans: [PlannedWrite], report: inout ApplyReport) {
        guard let inotify, !made.isEmpty else { return }
        var written = Set<String>()
        for plan in plans { written.insert("\(plan.root)/" + plan.relative) }
        for (root, relative) in made {
            guard let directory = try? safeRoots[root].open(relative, flags: O_RDONLY | O_DIRECTORY) else { continue }
            do { try inotify.watch(directory, root: root, relative: relative) } catch {
                logger.warning("cannot watch \(directory.path): \(error)")
            }
            guard let listing = try? directory.listDirectory() else { continue }
            for name in listing.names where !TempNames.isTemporary(name) {
                let child = relative + "/" + name
                if !written.contains("\(root)/" + child) && !made.contains(where: { $0.0 == root && $0.1 == child }) {
                    report.toCheck.append((root, child))
                }
            }
        }
    }

    /// The database side of a local rename: rows at `from` (and below) now live at `to`, with no
    /// shared version yet (their own records, coming next, settle that without reading anything).
    func moveRows(root: Int, from: String, to: String) throws {
        let fromPath = recordPath(root: root, relative: from)
        let toPath = recordPath(root: root, relative: to)
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
        }
    }

    /// The record's content, inflated and checked against its size and hash.
    static func content(of record: Record) throws -> [UInt8] {
        let bytes = try Deflate.decompress(record.data ?? Deflate.compress([]), expectedSize: Int(record.size))
        let digest = Digest.sha256Hex(bytes)
        guard digest == record.sha256 else {
            throw ContentMismatch(path: record.path, expected: record.sha256, actual: digest)
        }
        return bytes
    }

    /// Records one operation's outcome in the database (inside the batch transaction).
    func record(_ plan: PlannedWrite, result: WriteResult, report: inout ApplyReport) throws {
        let record = plan.record
        var row = plan.row ?? KnownFile(path: record.path, kind: record.kind, present: false)
        let localPath = roots[plan.root].path + "/" + plan.relative
        switch result {
        case let .failed(reason):
            // Not applied: the database keeps the old state so the record is tried again when the
            // path next changes; the feed moves on.
            logger.error("cannot apply \(quoted(record.path)): \(reason)")
            report.refused.append(record.path)
            return
        case .kept:
            row.agree(with: record)
            row.present = true
            try store.saveFile(row)
            try store.enqueue(row.path)
            logger.info("kept \(quoted(localPath)): deleted remotely but it holds files changed here")
            return
        case let .done(stat):
            if plan.action == .rename, let source = plan.source {
                try moveRows(root: plan.root, from: source, to: plan.relative)
                var moved = try store.file(record.path) ?? row
                if let stat { moved.observe(stat) }
                moved.agree(with: record)
                moved.movedFrom = nil
                try store.saveFile(moved)
                try store.dequeue(moved.path)
                report.applied.append(AppliedChange(path: record.path, event: .changed, localPath: localPath, type: record.type))
                return
            }
            if plan.action == .adopt {
                row.agree(with: record)
                try store.saveFile(row)
                try store.dequeue(row.path)
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
            if !row.present && record.deleted && plan.expect == nil && plan.row == nil {
                // A tombstone for something never here: remember its tag so a later create bases on it.
                try store.saveFile(row)
                return
            }
            try store.saveFile(row)
            try store.dequeue(row.path)
            touched(row.path)
            if record.deleted && plan.expect == nil { return }
            report.applied.append(AppliedChange(path: record.path, event: plan.event ?? (record.deleted ? .deleted : .changed),
                                                localPath: localPath, type: record.type))
        }
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
}
