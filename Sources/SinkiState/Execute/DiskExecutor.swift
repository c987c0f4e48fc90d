import CSystemShim
import Glibc
import SinkiLoop
import SinkiRecord
import SinkiSupport

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
    /// Folders the batch created (they get their watch once the batch is written).
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

/// The executor's disk half: carries out a batch of disk operations below the roots (renames, deletes,
/// folders, then files on every core), each only if the disk still holds what was planned against,
/// and makes the batch durable with one `syncfs` per root. It records nothing: `Outcomes` does.
struct DiskExecutor {
    let context: ReplicaContext

    /// What a batch did besides its results: folders it made (watched now), and entries in them it did
    /// not write, to be looked at.
    struct Effects {
        var toCheck: [LocalPath] = []
    }

    /// Runs `ops`: new folders first (shallow first: a rename or a file may go into one), then renames
    /// (shallow first), then removes (deepest first, so a folder whose contents go is empty when its turn
    /// comes, and a folder replaced by a file is gone before the file is written), then files on every
    /// core; then one `syncfs` per root touched.
    func run(_ ops: [DiskOp], effects: inout Effects) -> [DiskResult] {
        var results = [DiskResult](repeating: .done(nil), count: ops.count)
        var folders = OpenedFolders()
        var fileJobs: [FileJob] = []
        for index in Self.order(ops) {
            let op = ops[index]
            do throws(SafeRootError) {
                switch op.action {
                case let .rename(from, expect):
                    let directory = try parent(of: op, in: &folders, create: false)
                    results[index] = rename(op, from: from, expect: expect, into: directory, targetWatched: folders.isWatched(op.path))
                case .remove:
                    results[index] = remove(op, folders: &folders)
                case .attributes:
                    let directory = try parent(of: op, in: &folders, create: false)
                    results[index] = changeAttributes(op, in: directory)
                case .mkdir:
                    let directory = try parent(of: op, in: &folders, create: false)
                    results[index] = makeDirectory(op, in: directory, folders: &folders)
                case .write, .symlink:
                    let directory = try parent(of: op, in: &folders, create: false)
                    fileJobs.append(FileJob(index: index, parent: directory.raw, parentPath: directory.path, name: op.path.name,
                                            watched: folders.isWatched(op.path)))
                }
            } catch {
                results[index] = .failed(failure(error, op: op))
            }
        }
        for (index, outcome) in writeFiles(fileJobs, ops: ops) {
            if case let .failed(failure) = outcome, failure.cause == .permission || failure.cause == .io,
               let job = fileJobs.first(where: { $0.index == index }), Self.folderDeleted(job.parent) {
                // O_TMPFILE in a folder removed meanwhile answers EPERM: the folder is gone, not forbidden.
                results[index] = .failed(ApplyFailure(.folderGone, "the folder of \(quoted(ops[index].recordPath)) was removed meanwhile"))
            } else {
                results[index] = outcome
            }
        }
        withExtendedLifetime(folders.parents) {}
        // Durability is paid once per batch, before the trees say the batch is here.
        for root in folders.touchedRoots {
            do { try context.safeRoots[root.index].syncFileSystem() } catch { context.logger.warning("\(error)") }
        }
        watchNewDirectories(folders.made, effects: &effects)
        return results
    }

    private static func order(_ ops: [DiskOp]) -> [Int] {
        func rank(_ action: DiskOp.Action) -> Int {
            switch action {
            case .mkdir: return 0
            case .rename: return 1
            case .remove: return 2
            case .write, .symlink, .attributes: return 3
            }
        }
        return ops.indices.sorted { a, b in
            let left = ops[a], right = ops[b]
            if rank(left.action) != rank(right.action) { return rank(left.action) < rank(right.action) }
            let leftDepth = left.path.relative.utf8.count, rightDepth = right.path.relative.utf8.count
            switch left.action {
            case .remove: return leftDepth != rightDepth ? leftDepth > rightDepth : a < b
            case .mkdir, .rename: return leftDepth != rightDepth ? leftDepth < rightDepth : a < b
            default: return a < b
            }
        }
    }

    /// The open folder holding the op's path. Folders are never made on the way: the planner makes a
    /// missing folder by its own operation first (a folder gone meanwhile fails the op, which is then
    /// planned again).
    private func parent(of op: DiskOp, in folders: inout OpenedFolders, create: Bool) throws(SafeRootError) -> FileDescriptor {
        let key = PathKey("\(op.path.root.index)/" + op.path.folderPrefix)
        if let open = folders.parents[key] { return open }
        var made: [String] = []
        let opened = try context.safeRoots[op.path.root.index].openParent(of: op.path.relative, create: create, made: &made)
        folders.parents[key] = opened
        folders.touchedRoots.insert(op.path.root)
        return opened
    }

    private func failure(_ error: SafeRootError, op: DiskOp) -> ApplyFailure {
        if error.errno == ENOENT || error.errno == ENOTDIR {
            return ApplyFailure(.folderGone, "the folder of \(quoted(op.recordPath)) went away meanwhile: \(error)")
        }
        return ApplyFailure.from(error)
    }

    /// Whether the open folder `fd` was removed (it has no name left).
    static func folderDeleted(_ fd: Int32) -> Bool {
        var info = Glibc.stat()
        return fstat(fd, &info) == 0 && info.st_nlink == 0
    }

    private func remove(_ op: DiskOp, folders: inout OpenedFolders) -> DiskResult {
        guard let expect = op.expect else { return .done(nil) }
        let directory: FileDescriptor
        do { directory = try parent(of: op, in: &folders, create: false) } catch {
            return error.errno == ENOENT || error.errno == ENOTDIR ? .done(nil) : .failed(ApplyFailure.from(error))
        }
        let name = op.path.name
        guard (try? FileDescriptor.statEntry(parent: directory.raw, parentPath: directory.path, name: name)) ?? nil != nil else {
            return .done(nil) // gone already (renamed away earlier in this batch)
        }
        // A file is moved aside before it goes (`DiskWriter.remove`): its event is the move.
        let echo: WriteEcho = expect.kind == .directory ? .directoryGone : expect.kind == .file ? .movedAway : .fileGone
        context.watch?.expect(op.path, echo)
        do {
            let removed = try DiskWriter.remove(parent: directory.raw, parentPath: directory.path, name: name, expect: op.expectStat)
            if !removed { context.watch?.cancel(op.path, echo) }
            return removed ? .done(nil) : .kept
        } catch {
            context.watch?.cancel(op.path, echo)
            return .failed(ApplyFailure.from(error))
        }
    }

    private func makeDirectory(_ op: DiskOp, in directory: FileDescriptor, folders: inout OpenedFolders) -> DiskResult {
        let fresh = op.expect?.kind != .directory
        let echoes = folders.isWatched(op.path) ? context.watch : nil
        if fresh { echoes?.expect(op.path, .directoryMade) }
        do {
            var madeIt = false
            // A folder made to hold what the server has below a file or symlink takes no mode of theirs.
            let stat = try DiskWriter.makeDirectory(parent: directory.raw, parentPath: directory.path, name: op.path.name,
                                                    mode: op.remote?.kind == .directory ? op.remote?.mode ?? 0 : 0, replacing: op.expectStat, made: &madeIt) {
                echoes?.expect(op.path, .fileGone)
            }
            // Already there (made meanwhile by someone else): no event of ours will come.
            if fresh && !madeIt { echoes?.cancel(op.path, .directoryMade) }
            if fresh { folders.made.append(op.path) }
            return .done(stat)
        } catch {
            if fresh { echoes?.cancel(op.path, .directoryMade) }
            return .failed(ApplyFailure.from(error))
        }
    }

    /// Gives the file the remote version's mode (within the umask) and extended attributes (those the
    /// policy covers), if it still is the file planned against. Through an `O_PATH` descriptor of the
    /// entry itself, so a symlink swapped in meanwhile is never followed out of the root, and a file this
    /// user cannot read can still be changed. Attributes the file system refuses do not fail it: they
    /// are what it could not keep (`unkept`).
    private func changeAttributes(_ op: DiskOp, in directory: FileDescriptor) -> DiskResult {
        let name = op.path.name, shown = directory.path + "/" + name
        let fd = sinki_open_entry(directory.raw, name)
        guard fd >= 0 else {
            if errno == ENOENT { return .failed(ApplyFailure(.changedHere, "\(quoted(op.path.relative)) went away meanwhile")) }
            return .failed(ApplyFailure.from(SystemError("open", errno: errno, path: shown)))
        }
        let file = FileDescriptor(raw: fd, path: shown)
        do throws(SystemError) {
            let before = try file.stat()
            guard let expect = op.expect, expect.matches(before), before.kind == .file else {
                return .failed(ApplyFailure(.changedHere, "\(quoted(op.path.relative)) changed meanwhile"))
            }
            // fchmod does not take an O_PATH descriptor; its /proc name reaches the same inode.
            let procName = "/proc/self/fd/\(fd)"
            let mode = DiskWriter.allowed(op.remote?.mode ?? 0)
            // Only a file its owner may write takes attributes from its owner: made so for the moment.
            if before.mode & UInt32(S_IWUSR) == 0 && !context.xattrs.isOff {
                try syscall("chmod", path: shown) { chmod(procName, mode_t(before.mode) | S_IWUSR) }
            }
            let unkept = XattrDisk.apply(op.wantedXattrs, to: file, policy: context.xattrs, fresh: false)
            try syscall("chmod", path: shown) { chmod(procName, mode) }
            return .done(try file.stat(), unkept: unkept)
        } catch {
            return .failed(ApplyFailure.from(error))
        }
    }

    /// Renames `from` to the op's path (never replacing anything), if it still is the file planned
    /// against, telling the watcher to expect both events and moving a folder's watches along.
    private func rename(_ op: DiskOp, from source: LocalPath, expect: LocalFacts, into directory: FileDescriptor,
                        targetWatched: Bool) -> DiskResult {
        let root = op.path.root.index, name = op.path.name
        var made: [String] = []
        guard let sourceParent = try? context.safeRoots[root].openParent(of: source.relative, create: false, made: &made) else {
            return .failed(ApplyFailure(.sourceGone, "the folder of \(quoted(source.relative)) went away"))
        }
        guard let now = (try? FileDescriptor.statEntry(parent: sourceParent.raw, parentPath: sourceParent.path, name: source.name)) ?? nil,
              expect.kind == .directory || expect.sameFile(now) else {
            return .failed(ApplyFailure(.sourceGone, "\(quoted(source.relative)) changed or went away"))
        }
        let isDirectory = expect.kind == .directory
        let targetEchoes = targetWatched ? context.watch : nil
        context.watch?.expect(source, .movedAway)
        targetEchoes?.expect(op.path, isDirectory ? .directoryMade : .fileIn)
        if sinki_rename_noreplace(sourceParent.raw, source.name, directory.raw, name) != 0 {
            let code = errno
            context.watch?.cancel(source, .movedAway)
            targetEchoes?.cancel(op.path, isDirectory ? .directoryMade : .fileIn)
            if code == ENOENT { return .failed(ApplyFailure(.sourceGone, "\(quoted(source.relative)) went away")) }
            if code == EEXIST { return .failed(ApplyFailure(.changedHere, "something appeared at \(quoted(op.path.relative)) meanwhile")) }
            return .failed(ApplyFailure.from(SystemError("rename", errno: code, path: context.roots[root].path + "/" + source.relative)))
        }
        if isDirectory { context.watch?.moved(from: source, to: op.path) }
        guard let stat = (try? FileDescriptor.statEntry(parent: directory.raw, parentPath: directory.path, name: name)) ?? nil else {
            return .failed(ApplyFailure(.changedHere, "\(quoted(op.path.relative)) vanished right after its rename"))
        }
        // Written between the look and the rename (a program's save landing in that instant, seen by the
        // fault suite on a loaded machine): the file goes back where it was written, and the next round
        // plans the edit against the peer's rename (the edit stays at its path, the rename's content comes
        // down). The watcher sees both renames as a program's own and looks at both paths.
        if !isDirectory && !expect.sameFile(stat) && sinki_rename_noreplace(directory.raw, name, sourceParent.raw, source.name) == 0 {
            return .failed(ApplyFailure(.changedHere, "\(quoted(source.relative)) was written while it was renamed: put back"))
        }
        return .done(stat)
    }

    /// Writes the batch's files, those of one folder on one thread (creating entries in a folder takes
    /// its lock, so two threads in one folder mostly wait for each other), the folders on every core.
    private func writeFiles(_ jobs: [FileJob], ops: [DiskOp]) -> [(Int, DiskResult)] {
        if jobs.isEmpty { return [] }
        var byDirectory: [Int32: [FileJob]] = [:]
        for job in jobs { byDirectory[job.parent, default: []].append(job) }
        let groups = Array(byDirectory.values)
        let moving = Self.downloadMovers(jobs, ops: ops)
        let downloads = context.downloadsDirectory
        let echoes = context.watch
        let policy = context.xattrs
        let outcomes: [[DiskResult]] = Blocking.map(groups) { group in
            group.map { job in
                Self.writeFile(job, op: ops[job.index], downloads: downloads, move: moving.contains(job.index), echoes: job.watched ? echoes : nil,
                               xattrs: policy)
            }
        }
        var out: [(Int, DiskResult)] = []
        for (group, results) in zip(groups, outcomes) {
            for (job, outcome) in zip(group, results) { out.append((job.index, outcome)) }
        }
        return out
    }

    /// A download is renamed into place by the last path that needs it; any other copies it.
    private static func downloadMovers(_ jobs: [FileJob], ops: [DiskOp]) -> Set<Int> {
        var movers = Set<Int>()
        var claimed = Set<String>()
        for job in jobs.reversed() {
            if case let .write(.download(asset)) = ops[job.index].action, claimed.insert(asset.sha256).inserted { movers.insert(job.index) }
        }
        return movers
    }

    /// One file (or symlink) written from its bytes or its checked download.
    private static func writeFile(_ job: FileJob, op: DiskOp, downloads: String, move: Bool, echoes: (any WatchLink)?,
                                  xattrs policy: XattrPolicy) -> DiskResult {
        let mode = op.remote?.mode ?? op.mode
        let modifiedAt = op.remote?.mtime ?? op.modifiedAt
        // The new file's attributes, set before it appears under its name.
        var unkept: XattrShortfall?
        let wanted = op.wantedXattrs
        let prepare: ((FileDescriptor) -> Void)? = policy.isOff || !wanted.entries.contains(where: { policy.covers($0.name) }) ? nil : { file in
            unkept = XattrDisk.apply(wanted, to: file, policy: policy, fresh: true)
        }
        do {
            switch op.action {
            case let .write(.download(asset)):
                let stat = try DiskWriter.placeFile(sourceDirectory: downloads, sourceName: asset.sha256, move: move, parent: job.parent,
                                                    parentPath: job.parentPath, name: job.name, mode: mode, modifiedAt: modifiedAt,
                                                    expect: op.expectStat, prepare: prepare) {
                    echoes?.expect(op.path, .fileIn)
                }
                return .done(stat, unkept: unkept)
            case let .write(.bytes(bytes)):
                let folder = op.path.folderPrefix
                let stat = try DiskWriter.writeFile(parent: job.parent, parentPath: job.parentPath, name: job.name, bytes: bytes,
                                                    mode: mode, modifiedAt: modifiedAt, expect: op.expectStat, prepare: prepare) { inode in
                    echoes?.expect(op.path, .fileIn)
                    if let inode { echoes?.expect(LocalPath(op.path.root, folder + "#\(inode)"), .anonymous) }
                }
                return .done(stat, unkept: unkept)
            case let .symlink(target):
                echoes?.expect(op.path, .fileIn)
                return .done(try DiskWriter.writeSymlink(parent: job.parent, parentPath: job.parentPath, name: job.name, target: target,
                                                         expect: op.expectStat))
            default:
                return .failed(ApplyFailure(.io, "bug: \(op.action) is no file write"))
            }
        } catch where error.call == "open" && error.errno == ENOENT && error.path?.hasPrefix(downloads) == true {
            echoes?.cancel(op.path, .fileIn)
            return .failed(ApplyFailure(.contentMissing, "its download went away before it was placed: \(error)"))
        } catch {
            echoes?.cancel(op.path, .fileIn)
            return .failed(ApplyFailure.from(error))
        }
    }

    /// Folders this batch made get their watch here (their creation event was dropped as our own echo);
    /// what happened in them before that is looked at (`effects.toCheck`).
    private func watchNewDirectories(_ made: [LocalPath], effects: inout Effects) {
        guard let link = context.watch, !made.isEmpty else { return }
        let madeSet = Set(made)
        for folder in made {
            guard let directory = try? context.safeRoots[folder.root.index].open(folder.relative, flags: O_RDONLY | O_DIRECTORY) else { continue }
            do { try link.watch(directory, folder) } catch {
                context.logger.warning("cannot watch \(directory.path): \(error)")
            }
            // Until the watch was placed, nothing in it was seen: what was made, changed, renamed away or
            // removed there meanwhile is looked at now, the outermost new folder walked whole.
            let parent = LocalPath(folder.root, String(folder.folderPrefix.dropLast()))
            if folder.folderPrefix.isEmpty || !madeSet.contains(parent) { effects.toCheck.append(folder) }
        }
    }
}
