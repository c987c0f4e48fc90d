import CSystemShim
import Glibc
import SinkiLoop
import SinkiRecord
import SinkiSupport
import SinkiWatch

/// The outcome of one planned operation.
enum WriteResult: Sendable {
    case done(FileStat?)
    /// A directory kept because it still holds something.
    case kept
    case failed(ApplyFailure)
}

/// A file write of a batch, with the parent folder the executor opened for it.
private struct FileJob: Sendable {
    var index: Int
    var parent: Int32
    var parentPath: String
    var name: String
    /// The folder is watched: the write's events come, and are expected as the agent's own.
    var watched: Bool
}

/// The folders a batch opened and made, shared by its steps.
private struct OpenedFolders {
    /// By root and folder, compared by bytes (NFC and NFD spellings are two folders).
    var parents: [PathKey: FileDescriptor] = [:]
    /// Folders the batch created (their watches and rows are added once the batch is written).
    var made: [LocalPath] = [] {
        didSet { madeSet = Set(made) }
    }
    private(set) var madeSet = Set<LocalPath>()
    var touchedRoots = Set<RootID>()

    /// Whether what happens at `path` is seen by the watcher: not inside a folder this batch made,
    /// which has no watch until the batch is written (an echo expected there would never come, and
    /// would stay to hide someone else's event at that path).
    func isWatched(_ path: LocalPath) -> Bool {
        let folder = path.folderPrefix
        return folder.isEmpty || !madeSet.contains(LocalPath(path.root, String(folder.dropLast())))
    }
}

extension Replica {
    /// Runs the planned operations: renames first (shallow first), then deletes (deepest first, so a
    /// folder whose contents go is empty when its turn comes, and a folder replaced by a file is gone
    /// before the file is written), then new folders, then files on every core; then one `syncfs` per
    /// root touched. Each result is `.done`, `.kept` or a typed failure; nothing here records anything.
    func execute(_ plans: [PlannedWrite], report: inout ApplyReport) throws -> [WriteResult] {
        var results = [WriteResult](repeating: .done(nil), count: plans.count)
        var folders = OpenedFolders()
        var fileJobs: [FileJob] = []
        let startedWrites = Clock.monotonic()
        for index in Self.executionOrder(plans) {
            let plan = plans[index]
            do throws(SafeRootError) {
                switch plan.action {
                case .adopt:
                    continue
                case .rename:
                    let directory = try parent(of: plan, in: &folders)
                    results[index] = renameLocally(plan, into: directory, targetWatched: folders.isWatched(plan.path))
                case .delete:
                    results[index] = try delete(plan, folders: &folders)
                case .mkdir:
                    let directory = try parent(of: plan, in: &folders)
                    results[index] = makeDirectory(plan, in: directory, folders: &folders)
                case .write, .symlink:
                    let directory = try parent(of: plan, in: &folders)
                    fileJobs.append(FileJob(index: index, parent: directory.raw, parentPath: directory.path, name: plan.path.name,
                                            watched: folders.isWatched(plan.path)))
                }
            } catch {
                results[index] = .failed(failure(error, plan: plan))
            }
        }
        for (index, outcome) in writeFiles(fileJobs, plans: plans) {
            if case let .failed(failure) = outcome, failure.cause == .permission || failure.cause == .io,
               let job = fileJobs.first(where: { $0.index == index }), Self.folderDeleted(job.parent) {
                // O_TMPFILE in a folder removed meanwhile answers EPERM: the folder is gone, not forbidden.
                results[index] = .failed(ApplyFailure(.folderGone, "the folder of \(quoted(plans[index].record.path)) was removed meanwhile"))
            } else {
                results[index] = outcome
            }
        }
        withExtendedLifetime(folders.parents) {}
        let written = Clock.monotonic()
        defer { logger.debug("apply: writes \((written - startedWrites) / 1_000_000) ms, syncfs \((Clock.monotonic() - written) / 1_000_000) ms") }
        // Durability is paid once per batch, before the database says the batch is here.
        for root in folders.touchedRoots {
            do { try safeRoots[root.index].syncFileSystem() } catch { logger.warning("\(error)") }
        }
        try recordMadeDirectories(folders.made)
        watchNewDirectories(folders.made, report: &report)
        return results
    }

    /// The order operations run in (see `execute`).
    private static func executionOrder(_ plans: [PlannedWrite]) -> [Int] {
        func rank(_ action: PlannedWrite.Action) -> Int {
            switch action {
            case .adopt: return 0
            case .rename: return 1
            case .delete: return 2
            case .mkdir: return 3
            case .write, .symlink: return 4
            }
        }
        return plans.indices.sorted { a, b in
            let left = plans[a], right = plans[b]
            if rank(left.action) != rank(right.action) { return rank(left.action) < rank(right.action) }
            let leftDepth = left.path.relative.utf8.count, rightDepth = right.path.relative.utf8.count
            switch left.action {
            case .delete: return leftDepth != rightDepth ? leftDepth > rightDepth : a < b
            case .mkdir, .rename: return leftDepth != rightDepth ? leftDepth < rightDepth : a < b
            default: return a < b
            }
        }
    }

    /// The open folder holding the plan's path, made when missing (except for a delete).
    private func parent(of plan: PlannedWrite, in folders: inout OpenedFolders) throws(SafeRootError) -> FileDescriptor {
        let key = PathKey("\(plan.path.root.index)/" + plan.path.folderPrefix)
        if let open = folders.parents[key] { return open }
        var made: [String] = []
        let echoes = self.echoes
        let root = plan.path.root
        // Only the first folder made on the way is seen by a watch (its parent's); those below it are not.
        var expected: String?
        let before = folders
        let opened = try safeRoots[root.index].openParent(of: plan.path.relative, create: !plan.record.deleted, made: &made,
                                                          willMake: { folder in
                                                              guard expected == nil, before.isWatched(LocalPath(root, folder)) else { return }
                                                              expected = folder
                                                              echoes?.expect(root: root.index, relative: folder, .directoryMade)
                                                          },
                                                          didNotMake: { folder in
                                                              if folder == expected { echoes?.cancel(root: root.index, relative: folder, .directoryMade) }
                                                          })
        for directory in made { folders.made.append(LocalPath(root, directory)) }
        folders.parents[key] = opened
        folders.touchedRoots.insert(root)
        return opened
    }

    /// The typed failure for an error of the folder-level steps.
    private func failure(_ error: SafeRootError, plan: PlannedWrite) -> ApplyFailure {
        if error.errno == ENOENT || error.errno == ENOTDIR {
            return ApplyFailure(.folderGone, "the folder of \(quoted(plan.record.path)) went away meanwhile: \(error)")
        }
        return ApplyFailure.from(error)
    }

    /// Whether the open folder `fd` was removed (it has no name left).
    static func folderDeleted(_ fd: Int32) -> Bool {
        var info = Glibc.stat()
        return fstat(fd, &info) == 0 && info.st_nlink == 0
    }

    private func delete(_ plan: PlannedWrite, folders: inout OpenedFolders) throws(SafeRootError) -> WriteResult {
        guard plan.expect != nil else { return .done(nil) }
        let directory: FileDescriptor
        do { directory = try parent(of: plan, in: &folders) } catch let error where error.errno == ENOENT { return .done(nil) }
        let name = plan.path.name
        guard (try? FileDescriptor.statEntry(parent: directory.raw, parentPath: directory.path, name: name)) != nil else {
            return .done(nil) // gone already (renamed away earlier in this batch)
        }
        let echo: EchoFilter.Kind = plan.expect?.kind == .directory ? .directoryGone : .fileGone
        let root = plan.path.root.index
        echoes?.expect(root: root, relative: plan.path.relative, echo)
        do {
            let removed = try DiskWriter.remove(parent: directory.raw, parentPath: directory.path, name: name,
                                                expect: plan.row?.present == true ? plan.expect : nil)
            if !removed { echoes?.cancel(root: root, relative: plan.path.relative, echo) }
            return removed ? .done(nil) : .kept
        } catch {
            echoes?.cancel(root: root, relative: plan.path.relative, echo)
            return .failed(ApplyFailure.from(error))
        }
    }

    private func makeDirectory(_ plan: PlannedWrite, in directory: FileDescriptor, folders: inout OpenedFolders) -> WriteResult {
        let fresh = plan.expect?.kind != .directory
        let root = plan.path.root.index
        let echoes = folders.isWatched(plan.path) ? self.echoes : nil
        if fresh { echoes?.expect(root: root, relative: plan.path.relative, .directoryMade) }
        do {
            var madeIt = false
            let stat = try DiskWriter.makeDirectory(parent: directory.raw, parentPath: directory.path, name: plan.path.name,
                                                    mode: plan.record.mode, replacing: plan.expect, made: &madeIt) {
                echoes?.expect(root: root, relative: plan.path.relative, .fileGone)
            }
            // Already there (made meanwhile by someone else): no event of ours will come.
            if fresh && !madeIt { echoes?.cancel(root: root, relative: plan.path.relative, .directoryMade) }
            if fresh { folders.made.append(plan.path) }
            return .done(stat)
        } catch {
            if fresh { echoes?.cancel(root: root, relative: plan.path.relative, .directoryMade) }
            return .failed(ApplyFailure.from(error))
        }
    }

    /// Writes the batch's files, those of one folder on one thread (creating entries in a folder takes
    /// its lock, so two threads in one folder mostly wait for each other), the folders on every core.
    private func writeFiles(_ jobs: [FileJob], plans: [PlannedWrite]) -> [(Int, WriteResult)] {
        if jobs.isEmpty { return [] }
        var byDirectory: [Int32: [FileJob]] = [:]
        for job in jobs { byDirectory[job.parent, default: []].append(job) }
        let groups = Array(byDirectory.values)
        let moving = Self.downloadMovers(jobs, plans: plans)
        let downloads = downloadsDirectory
        let echoes = self.echoes
        let outcomes: [[WriteResult]] = Blocking.map(groups) { group in
            group.map { job in
                Self.writeFile(job, plan: plans[job.index], downloads: downloads, move: moving.contains(job.index), echoes: job.watched ? echoes : nil)
            }
        }
        var out: [(Int, WriteResult)] = []
        for (group, results) in zip(groups, outcomes) {
            for (job, outcome) in zip(group, results) { out.append((job.index, outcome)) }
        }
        return out
    }

    /// A download is renamed into place by the last path that needs it; any other copies it.
    private static func downloadMovers(_ jobs: [FileJob], plans: [PlannedWrite]) -> Set<Int> {
        var movers = Set<Int>()
        var claimed = Set<String>()
        for job in jobs.reversed() where isAssetContent(plans[job.index].record) {
            if let asset = plans[job.index].record.asset, claimed.insert(asset.sha256).inserted { movers.insert(job.index) }
        }
        return movers
    }

    /// One file (or symlink) written from its record's content or its checked download.
    private static func writeFile(_ job: FileJob, plan: PlannedWrite, downloads: String, move: Bool, echoes: EchoFilter?) -> WriteResult {
        let root = plan.path.root.index, relative = plan.path.relative
        do {
            if plan.action == .write, isAssetContent(plan.record), let asset = plan.record.asset {
                if let wrong = try contentProblem(plan.record, asset: asset, downloads: downloads) { return .failed(ApplyFailure(.invalid, wrong)) }
                let stat = try DiskWriter.placeFile(sourceDirectory: downloads, sourceName: asset.sha256, move: move, parent: job.parent,
                                                    parentPath: job.parentPath, name: job.name, mode: plan.record.mode,
                                                    modifiedAt: plan.record.modifiedAt, expect: plan.expect) {
                    echoes?.expect(root: root, relative: relative, .fileIn)
                }
                return .done(stat)
            }
            let bytes = try content(of: plan.record)
            if plan.action == .symlink {
                echoes?.expect(root: root, relative: relative, .fileIn)
                return .done(try DiskWriter.writeSymlink(parent: job.parent, parentPath: job.parentPath, name: job.name, target: bytes,
                                                         expect: plan.expect))
            }
            let folder = plan.path.folderPrefix
            return .done(try DiskWriter.writeFile(parent: job.parent, parentPath: job.parentPath, name: job.name, bytes: bytes,
                                                  mode: plan.record.mode, modifiedAt: plan.record.modifiedAt, expect: plan.expect) { inode in
                echoes?.expect(root: root, relative: relative, .fileIn)
                if let inode { echoes?.expect(root: root, relative: folder + "#\(inode)", .anonymous) }
            })
        } catch let error as SystemError where error.call == "open" && error.errno == ENOENT && error.path?.hasPrefix(downloads) == true {
            echoes?.cancel(root: root, relative: relative, .fileIn)
            return .failed(ApplyFailure(.contentMissing, "its download went away before it was placed: \(error)"))
        } catch {
            echoes?.cancel(root: root, relative: relative, .fileIn)
            return .failed(ApplyFailure.from(error))
        }
    }

    /// What is wrong with a downloaded asset as the content of `record`; nil when nothing is. An upload
    /// asset was checked whole as it arrived, a manifest's chunks one by one: what is left is that the
    /// record names that content. Above 256 KiB its identity is the manifest's hash; a smaller file sent
    /// as chunks (an agent with a lower inline limit) is read back and hashed, which costs nothing.
    static func contentProblem(_ record: Record, asset: Asset, downloads: String) throws -> String? {
        guard asset.isManifest else { return nil }
        if ContentID.isManifest(size: record.size) {
            return record.sha256 == asset.sha256 ? nil : "\(quoted(record.path)) names content \(record.sha256.prefix(16))…, its manifest is \(asset.sha256.prefix(16))…"
        }
        let bytes = try FileDescriptor.open(downloads + "/" + asset.sha256, flags: O_RDONLY).readAll(sizeHint: Int(record.size))
        return ContentID.of(bytes) == record.sha256 ? nil : "the chunks of \(quoted(record.path)) do not make the content its record names"
    }

    /// Renames `plan.source` to the plan's path (never replacing anything), telling the watcher to
    /// expect both events and moving a directory's watches along.
    private func renameLocally(_ plan: PlannedWrite, into directory: FileDescriptor, targetWatched: Bool) -> WriteResult {
        guard let source = plan.source, let sourceRow = plan.sourceRow else {
            return .failed(ApplyFailure(.io, "bug: a rename without a source"))
        }
        let root = plan.path.root.index, name = plan.path.name
        var made: [String] = []
        guard let sourceParent = try? safeRoots[root].openParent(of: source.relative, create: false, made: &made) else {
            // Its folder went first in this batch, renamed with it inside: same inode, done.
            if let there = try? FileDescriptor.statEntry(parent: directory.raw, parentPath: directory.path, name: name),
               there.inode == sourceRow.inode {
                return .done(there)
            }
            return .failed(ApplyFailure(.sourceGone, "the folder of \(quoted(source.relative)) went away; the content is written instead"))
        }
        let isDirectory = plan.record.kind == .directory
        let targetEchoes = targetWatched ? echoes : nil
        echoes?.expect(root: root, relative: source.relative, .movedAway)
        targetEchoes?.expect(root: root, relative: plan.path.relative, isDirectory ? .directoryMade : .fileIn)
        if sinki_rename_noreplace(sourceParent.raw, source.name, directory.raw, name) != 0 {
            let code = errno
            echoes?.cancel(root: root, relative: source.relative, .movedAway)
            targetEchoes?.cancel(root: root, relative: plan.path.relative, isDirectory ? .directoryMade : .fileIn)
            // Already moved by the rename of a directory above it in this batch: same inode, done.
            if code == ENOENT, let there = try? FileDescriptor.statEntry(parent: directory.raw, parentPath: directory.path, name: name),
               there.inode == sourceRow.inode {
                return .done(there)
            }
            if code == ENOENT { return .failed(ApplyFailure(.sourceGone, "\(quoted(source.relative)) went away; the content is written instead")) }
            if code == EEXIST { return .failed(ApplyFailure(.changedHere, "something appeared at \(quoted(plan.path.relative)) meanwhile")) }
            return .failed(ApplyFailure.from(SystemError("rename", errno: code, path: roots[root].path + "/" + source.relative)))
        }
        if isDirectory { inotify?.renameWatches(root: root, from: source.relative, to: plan.path.relative) }
        guard let stat = try? FileDescriptor.statEntry(parent: directory.raw, parentPath: directory.path, name: name) else {
            return .failed(ApplyFailure(.changedHere, "\(quoted(plan.path.relative)) vanished right after its rename"))
        }
        return .done(stat)
    }

    /// Rows for the folders a batch made (a folder removed here and made again for a remote file in
    /// it is present again: its tombstone no longer goes to the server).
    private func recordMadeDirectories(_ made: [LocalPath]) throws {
        if made.isEmpty { return }
        try store.transaction {
            for folder in made {
                let path = recordPath(folder)
                guard let stat = try safeRoots[folder.root.index].stat(folder.relative), stat.kind == .directory else { continue }
                let existing = try store.file(path)
                if let existing, existing.present { continue }
                var row = existing ?? KnownFile(path: path, kind: .directory, present: true, type: Record.directoryType)
                row.kind = .directory
                row.type = Record.directoryType
                row.sha256 = ""
                row.observe(stat)
                try store.saveFile(row)
                // A folder made to hold a remote file is a folder here like any other: sent unless the
                // server has it as it is (its own record in this batch, if any, takes the entry back out;
                // one that comes later meets it as the same content). An entry already queued stays:
                // its push may be in flight.
                if row.hasLocalChange {
                    try store.enqueue(path)
                } else if let existing, existing.tag > 0, try store.outboxEntry(path) != nil {
                    // Made again over this agent's own tombstone, not yet accepted (the folder was
                    // removed or renamed away here). Devices that followed that rename moved the folder
                    // away too and wait for the tombstone, which will now never be sent: the folder
                    // goes once more as a new version instead (the fault suite's seed 904).
                    try store.enqueue(path, resend: true)
                }
            }
        }
    }

    /// Directories this apply made get their watch here (their creation event was dropped as our own
    /// echo); what happened in them before that is looked at (`report.toCheck`).
    private func watchNewDirectories(_ made: [LocalPath], report: inout ApplyReport) {
        guard let inotify, !made.isEmpty else { return }
        let madeSet = Set(made)
        for folder in made {
            guard let directory = try? safeRoots[folder.root.index].open(folder.relative, flags: O_RDONLY | O_DIRECTORY) else { continue }
            do { try inotify.watch(directory, root: folder.root.index, relative: folder.relative) } catch {
                logger.warning("cannot watch \(directory.path): \(error)")
            }
            // Until the watch was placed, nothing in it was seen: what was made, changed, renamed away or
            // removed there meanwhile is looked at now, the outermost new folder walked whole.
            let parent = LocalPath(folder.root, String(folder.folderPrefix.dropLast()))
            if folder.folderPrefix.isEmpty || !madeSet.contains(parent) { report.toCheck.append(folder) }
        }
    }
}
