import Glibc
import Synchronization
import SinkiLoop
import SinkiRecord
import SinkiSupport
import SinkiWatch

/// What a look at the disk found.
public struct ObserveReport: Sendable, Equatable {
    /// Paths newly queued as local changes.
    public var queued = 0
    /// Entries looked at.
    public var seen = 0
    /// Files whose content was read to hash it.
    public var hashed = 0
    /// The watch limit (`fs.inotify.max_user_watches`) was reached while walking.
    public var watchLimitHit = false
    /// Directories left without a watch because of the limit.
    public var unwatched = 0
    /// Files not recorded because another program is writing them (looked at again once quiet).
    public var busy = 0
    /// Why nothing was recorded: the root vanished or emptied while its files are synced, and a
    /// mass delete must wait for the user (`sinkid resume`).
    public var safetyStop: String?
    public init() {}
}

/// A path as now seen on disk (nil stat: gone), against what the database knew.
struct Observation {
    var root: Int
    var relative: String
    var path: String
    var stat: FileStat?
    var known: KnownFile?
}

extension Replica {
    /// Walks `relative` below root `root` (everything when empty), watching each directory before
    /// listing it, and brings the database in line with what is there. Only files whose size,
    /// mtime, inode or mode changed are read.
    public func reconcile(root: Int, under relative: String, progress: (@Sendable (Int) -> Void)? = nil) async throws -> ObserveReport {
        if !relative.isEmpty && isIgnored(root: root, relative: relative, isDirectory: true) {
            return try await check(root: root, paths: [relative], progress: progress)
        }
        var report = ObserveReport()
        let base = relative.isEmpty ? roots[root].name : recordPath(root: root, relative: relative)
        let inotify = self.inotify
        let logger = self.logger
        let rules = ignores[root]
        let safeRoot = safeRoots[root]
        // The walk (system calls) runs on another thread while this one reads the database's rows.
        async let walking = Blocking.run {
            try Self.walkTree(safeRoot, root: root, relative: relative, inotify: inotify, rules: rules, logger: logger)
        }
        let writesBefore = store.fileWrites
        // Keyed by the walk's relative paths, so that a million lookups make no million record paths.
        let dropping = roots[root].name.utf8.count + 1
        var known = try store.presentStats(under: base, dropping: dropping)
        let outcome = try await walking
        // Others ran on this actor while the walk finished: what they recorded is read again.
        if store.fileWrites != writesBefore { known = try store.presentStats(under: base, dropping: dropping) }
        guard var walk = outcome.report else {
            // The directory went away (or became something else) before we got there.
            return try await check(root: root, paths: [relative])
        }
        for line in walk.errors { logger.warning(line) }
        if relative.isEmpty, cleanTemporaries.remove(root) != nil { removeLeftovers(walk.temporaries, root: root) }
        for name in walk.invalidNames { noteSkipped(root: root, relative: name, why: "its name is not valid UTF-8") }
        for name in walk.special { noteSkipped(root: root, relative: name, why: "it is a fifo, socket or device") }

        logger.debug("walk \(walk.entries.count) entries")
        if relative.isEmpty { ignoredCounts[root] = walk.ignored }
        if relative.isEmpty, !known.isEmpty, !confirmedEmpty.contains(root) {
            if rootDeleted(root) {
                var stopped = ObserveReport()
                stopped.safetyStop = "the root folder was deleted or moved away"
                return stopped
            }
            if walk.entries.isEmpty && known.count >= Self.emptyRootThreshold {
                // Empty while \(known.count) files are synced from it: an unmounted disk or a mistake
                // looks the same as a wish to delete everything; only the user can tell.
                var stopped = ObserveReport()
                stopped.safetyStop = "the root folder is empty but \(known.count) entries are synced from it"
                return stopped
            }
        }
        if relative.isEmpty { confirmedEmpty.remove(root) }
        // Two passes, so that a million entries never become a million observations at once. The
        // first finds which entries differ from the database (most do not, on a restart) and leaves in
        // `known` what the walk did not find; the second makes observations of those, a chunk at a time.
        var entries = walk.entries
        walk.entries = []
        var differing: [Int] = []
        let now = Clock.now()
        for index in entries.indices {
            let entry = entries[index]
            let stat = known.removeValue(forKey: entry.relative)
            if let stat, stat.matches(entry.stat) { continue }
            if stat == nil, entry.stat.kind != .directory, now - entry.stat.ctime < Self.temporaryGrace,
               TemporaryNames.looksTemporary(entry.relative.split(separator: "/").last ?? "") {
                // Just made, under a name that looks temporary: looked at again once its grace is over.
                deferred.append((root, entry.relative))
                continue
            }
            // A known row's path was validated when it was recorded; only a new one is checked.
            if stat == nil, (try? RecordPath(validating: recordPath(root: root, relative: entry.relative))) == nil {
                noteSkipped(root: root, relative: entry.relative, why: "its name cannot be a record path")
                continue
            }
            differing.append(index)
        }
        // Whatever the database had below here and the walk did not find is gone, unless the walk
        // skipped it because it is ignored now: that is forgotten here, never deleted elsewhere.
        var forgotten: [String] = []
        var gone: [Observation] = []
        if !relative.isEmpty, let top = try safeRoots[root].stat(relative) {
            // The walked directory itself is an entry too (it is not in the walk's list).
            known.removeValue(forKey: relative)
            gone.append(Observation(root: root, relative: relative, path: base, stat: top, known: try store.file(base)))
        }
        for (relativePath, row) in known {
            if isIgnored(root: root, relative: relativePath, isDirectory: row.kind == .directory) {
                forgotten.append(recordPath(root: root, relative: relativePath))
                continue
            }
            let path = recordPath(root: root, relative: relativePath)
            gone.append(Observation(root: root, relative: relativePath, path: path, stat: nil, known: try store.file(path)))
        }
        known = [:]
        if !forgotten.isEmpty {
            try store.transaction {
                for path in forgotten {
                    try store.removeFile(path)
                    try store.dequeue(path)
                }
            }
        }
        unwatchedDirectories[root].formUnion(outcome.unwatched)
        report.seen = entries.count
        report.watchLimitHit = outcome.watchLimitHit
        report.unwatched = outcome.unwatched.count
        // Known before any chunk is absorbed, so a file renamed while the agent was not looking is
        // matched with its old path whichever chunk each lands in.
        for observation in gone where observation.stat == nil { if let row = observation.known { rememberGone(row) } }
        // Parents before children (bytewise path order puts every folder before what is in it), then
        // the gone ones deepest first; in chunks, each its own transaction, so that pushing starts
        // while the rest is still read (other calls may run between chunks).
        differing.sort { entries[$0].relative.utf8.lexicographicallyPrecedes(entries[$1].relative.utf8) }
        let top = gone.filter { $0.stat != nil }
        gone.removeAll { $0.stat != nil }
        gone.sort { $0.path.utf8.count > $1.path.utf8.count }
        var start = 0
        var first = true
        while start < differing.count || first {
            let end = min(start + Self.chunk, differing.count)
            var part = first ? top : []
            first = false
            for index in differing[start..<end] {
                let entry = entries[index]
                let path = recordPath(root: root, relative: entry.relative)
                // Not present in the database, it may still have a row: the tombstone of what was here
                // before. The new version bases on its tag, or the server takes it for a stale edit.
                part.append(Observation(root: root, relative: entry.relative, path: path, stat: entry.stat, known: try store.file(path)))
            }
            try await absorbChunk(part, into: &report, progress: progress)
            start = end
        }
        entries = []
        start = 0
        while start < gone.count {
            let end = min(start + Self.chunk, gone.count)
            try await absorbChunk(Array(gone[start..<end]), into: &report, progress: progress)
            start = end
        }
        return report
    }

    /// Absorbs one chunk of a walk's observations and lets other calls run before the next.
    private func absorbChunk(_ part: [Observation], into report: inout ObserveReport, progress: (@Sendable (Int) -> Void)?) async throws {
        if part.isEmpty { return }
        let absorbed = try absorb(part)
        report.queued += absorbed.queued
        report.hashed += absorbed.hashed
        if absorbed.queued > 0 { progress?(absorbed.queued) }
        await Task.yield()
    }

    /// Observations recorded per transaction during a walk.
    static let chunk = 1000
    /// A root found empty stops for safety only when at least this many synced entries vanished with
    /// it at once (an unmounted disk, a mistaken `rm -r`); deleting the last few files by hand is a delete.
    static let emptyRootThreshold = 5
    /// How long a new file with a temporary-looking name waits before a walk records it (the
    /// watcher holds such names as long).
    static let temporaryGrace: Int64 = 600_000_000

    /// Looks again at specific paths (from the watcher). A directory that is new here is walked.
    public func check(root: Int, paths: [String], progress: (@Sendable (Int) -> Void)? = nil) async throws -> ObserveReport {
        var observations: [Observation] = []
        var walks: [String] = []
        for relative in Set(paths) {
            if relative.isEmpty { walks.append(""); continue }
            let path = recordPath(root: root, relative: relative)
            if (try? RecordPath(validating: path)) == nil { continue }
            if isIgnored(root: root, relative: relative, isDirectory: false) || isIgnored(root: root, relative: relative, isDirectory: true) {
                // Ignored now: not synced from here on, and never deleted elsewhere for it.
                if try store.file(path) != nil {
                    try store.transaction {
                        for below in try store.files(under: path) {
                            try store.removeFile(below.path)
                            try store.dequeue(below.path)
                        }
                    }
                }
                continue
            }
            let stat: FileStat?
            do { stat = try safeRoots[root].stat(relative) } catch {
                if case .symlinkInPath = error { stat = nil } else { throw error }
            }
            let row = try store.file(path)
            if let stat {
                if stat.kind == .special {
                    noteSkipped(root: root, relative: relative, why: "it is a fifo, socket or device")
                    if row?.present == true { observations.append(Observation(root: root, relative: relative, path: path, stat: nil, known: row)) }
                    continue
                }
                if stat.kind == .directory && (row == nil || row?.kind != .directory || row?.present != true || !(inotify?.isWatched(root: root, relative: relative) ?? true)) {
                    walks.append(relative)
                    continue
                }
                if let row, row.matches(stat) { continue }
                observations.append(Observation(root: root, relative: relative, path: path, stat: stat, known: row))
                if row?.kind == .directory && row?.present == true {
                    // A folder that became a file: what the database had below it is gone, noted in the
                    // same transaction so that the file's push can wait for those deletes.
                    observations += try goneBelow(root: root, path: path)
                }
            } else {
                guard let row, row.present || row.kind == .directory else { continue }
                // Gone: so is everything the database had below it.
                for below in try store.files(under: path) where below.present {
                    let rel = String(below.path.dropFirst(roots[root].name.count + 1))
                    observations.append(Observation(root: root, relative: rel, path: below.path, stat: nil, known: below))
                }
            }
        }
        if observations.contains(where: { $0.stat == nil && $0.known?.present == true }) && !confirmedEmpty.contains(root) {
            if rootDeleted(root) {
                var stopped = ObserveReport()
                stopped.safetyStop = "the root folder was deleted or moved away"
                return stopped
            }
            let goneNow = observations.count { $0.stat == nil && $0.known?.present == true }
            if goneNow >= Self.emptyRootThreshold, rootLooksEmpty(root), try store.totals(root: roots[root].name).files > 0 {
                var stopped = ObserveReport()
                stopped.safetyStop = "the root folder became empty"
                return stopped
            }
        }
        var report = try absorb(observations)
        for relative in walks {
            let walked = try await reconcile(root: root, under: relative, progress: progress)
            report.queued += walked.queued
            report.seen += walked.seen
            report.hashed += walked.hashed
            report.watchLimitHit = report.watchLimitHit || walked.watchLimitHit
        }
        return report
    }

    /// Observations of every present row strictly below `path` as gone.
    func goneBelow(root: Int, path: String) throws -> [Observation] {
        try store.files(under: path).filter { $0.present && $0.path != path }.map { below in
            Observation(root: root, relative: String(below.path.dropFirst(roots[root].name.count + 1)), path: below.path, stat: nil, known: below)
        }
    }

    func noteSkipped(root: Int, relative: String, why: String) {
        let key = recordPath(root: root, relative: relative)
        if skipped.insert(key).inserted {
            logger.warning("skipping \(quoted(roots[root].path + "/" + relative)): \(why)")
        }
    }

    /// Hashes what needs it (on every core), then records all observations in one transaction.
    func absorb(_ observations: [Observation]) throws -> ObserveReport {
        var report = ObserveReport()
        if observations.isEmpty { return report }
        let started = Clock.monotonic()
        defer { logger.debug("absorb \(observations.count): \((Clock.monotonic() - started) / 1_000_000) ms, read \(report.hashed)") }
        var observations = observations
        let inlineLimit = self.inlineLimit
        // What the walk saw may have changed since (other calls run between its chunks: a rename the
        // watcher reported before these rows existed found nothing to move). A path seen gone may have
        // come back; and what is recorded without being read (folders, files sent as chunks) must still
        // be there as seen, or the row would say present for good with nothing on disk (the fault
        // suite's seed 3: a folder renamed away during the first scan after a start).
        for index in observations.indices {
            guard observations[index].stat.map({ $0.kind == .directory || ($0.kind == .file && $0.size > inlineLimit) }) ?? true else { continue }
            let now = try? safeRoots[observations[index].root].stat(observations[index].relative)
            if let now, now.kind != .special {
                observations[index].stat = now
            } else {
                observations[index].stat = nil
                if let row = observations[index].known, row.present { rememberGone(row) }
            }
        }
        // A file sent as chunks is not read here: its upload reads it once, cutting and hashing chunks
        // as it sends them, and names its content when the last chunk is cut (docs/chunking.md).
        let deferred = observations.indices.filter { observations[$0].stat.map { $0.kind == .file && $0.size > inlineLimit } ?? false }
        let deferredSet = Set(deferred)
        let toHash = observations.indices.filter { !deferredSet.contains($0) && (observations[$0].stat.map { $0.kind != .directory } ?? false) }
        let safeRoots = self.safeRoots
        let jobs = toHash.map { (observations[$0].root, observations[$0].relative, observations[$0].stat!.size <= inlineLimit) }
        // Small files are compressed in the same pass: the push that follows then reads nothing.
        let contents: [Result<(FileContent, [UInt8]?), SafeRootError>] = Blocking.map(jobs) { job in
            Result { () throws(SafeRootError) in
                var content = try ContentReader.read(safeRoots[job.0], job.1, keepBytes: job.2)
                let compressed = content.bytes.map { Deflate.compressForSending($0) }
                content.bytes = nil
                return (content, compressed)
            }
        }
        report.hashed = contents.count
        var hashes: [Int: FileContent] = [:]
        var compressed: [Int: [UInt8]] = [:]
        for index in deferred {
            guard let stat = observations[index].stat else { continue }
            hashes[index] = FileContent(stat: stat, sha256: "", bytes: nil, unstable: false)
        }
        for (offset, index) in toHash.enumerated() {
            switch contents[offset] {
            case let .success((content, _)) where content.busy:
                // Still being written: nothing is recorded until it is closed or quiet.
                unstable.append((observations[index].root, observations[index].relative))
                report.busy += 1
            case let .success((content, data)):
                hashes[index] = content
                if let data, !content.unstable { compressed[index] = data }
            case let .failure(error):
                if error.errno != ENOENT { logger.warning("cannot read \(error)") }
            }
        }
        let now = Clock.now()
        try store.transaction {
            // Deepest first, so a directory's tombstone follows those of its contents.
            for index in observations.indices.sorted(by: { observations[$0].path.utf8.count > observations[$1].path.utf8.count }) {
                let observation = observations[index]
                var row = observation.known ?? KnownFile(path: observation.path, kind: .file, present: false)
                if let stat = observation.stat {
                    if stat.kind == .directory {
                        row.observe(stat)
                        row.sha256 = ""
                        if row.type.isEmpty || row.type != Record.directoryType { row.type = Record.directoryType }
                    } else if let content = hashes[index] {
                        if content.unstable { unstable.append((observation.root, observation.relative)) }
                        let wasPresent = row.present
                        if row.sha256 != content.sha256 { row.movedFrom = nil }
                        row.observe(content.stat)
                        row.sha256 = content.sha256
                        if !wasPresent, stat.kind == .file, !content.sha256.isEmpty,
                           let source = takeGone(sha256: content.sha256, size: content.stat.size), try renameCandidateStillGone(source) {
                            // Same size and hash as a file that just vanished: renamed, without the cookie pair.
                            row.movedFrom = source
                        } else if !wasPresent, content.sha256.isEmpty, let gone = takeGone(inode: stat.inode, size: stat.size, mtime: stat.mtime),
                                  try renameCandidateStillGone(gone.path) {
                            // A large file is not read: the same inode, size and mtime as one that just
                            // vanished is that file renamed, with the content it had there.
                            row.sha256 = gone.sha256
                            row.movedFrom = gone.path
                        }
                        row.type = stat.kind == .symlink ? Record.symlinkType : typeFor(observation.path)
                    } else {
                        continue // vanished while we read it; its delete event follows
                    }
                } else {
                    if !row.present && observation.known == nil { continue }
                    row.present = false
                    row.sha256 = ""
                }
                if try row.tag == 0 && !row.present && store.outboxEntry(row.path) == nil {
                    // Born and gone before it was ever queued.
                    try store.removeFile(row.path)
                    continue
                }
                try store.saveFile(row)
                touched(row.path)
                if observations.count <= 20 && logger.isEnabled(.debug) {
                    logger.debug("observe \(quoted(row.path)): \(row.present ? "present" : "gone"), tag \(row.tag)\(row.hasLocalChange ? ", changed" : "")")
                }
                if row.hasLocalChange || (row.tag == 0 && !row.present) {
                    // (A path gone before its first save was acknowledged stays queued: that save
                    // may be in flight, and then its tombstone must follow.)
                    try store.enqueue(row.path, now: now)
                    report.queued += 1
                    if let data = compressed[index], let content = hashes[index] {
                        remember(row.path, CachedContent(stat: content.stat, sha256: content.sha256, data: data))
                    }
                } else {
                    try store.dequeue(row.path, unlessResend: true)
                }
            }
        }
        return report
    }
}

extension Replica {
    /// Walks `relative` below a root, placing a watch on each directory before it is listed. Runs
    /// off the actor, its subtrees on several threads.
    static func walkTree(_ safeRoot: SafeRoot, root: Int, relative: String, inotify: Inotify?, rules: IgnoreRules,
                         logger: Logger) throws(SystemError) -> WalkOutcome {
        let unwatched = UnwatchedList()
        let watch: @Sendable (FileDescriptor, String) -> Void = { directory, rel in
            guard let inotify else { return }
            do throws(SystemError) {
                try inotify.watch(directory, root: root, relative: rel)
            } catch where error.errno == ENOSPC {
                unwatched.append(rel)
            } catch {
                logger.warning("cannot watch \(directory.path): \(error)")
            }
        }
        var ignored: (@Sendable (String, Bool) -> Bool)?
        if !rules.isEmpty { ignored = { @Sendable rel, isDirectory in rules.isIgnored(rel, isDirectory: isDirectory) } }
        let walker = TreeWalker(beforeListing: watch, isIgnored: ignored)
        do {
            let report = try walker.walk(root: try safeRoot.descriptor(), relative: relative)
            let missed = unwatched.paths
            return WalkOutcome(report: report, watchLimitHit: !missed.isEmpty, unwatched: missed)
        } catch {
            guard error.errno == ENOENT || error.errno == ENOTDIR || error.errno == ELOOP else { throw error }
            return WalkOutcome(report: nil, watchLimitHit: false, unwatched: [])
        }
    }
}

/// What a walk found, carried back from the thread it ran on (`report` nil: the directory was gone).
struct WalkOutcome: Sendable {
    var report: WalkReport?
    var watchLimitHit: Bool
    var unwatched: [String]
}

/// Directories a walk could not watch (the inotify watch limit), collected by its callback from
/// the threads the walk runs on.
final class UnwatchedList: Sendable {
    private let list = Mutex<[String]>([])

    func append(_ path: String) { list.withLock { $0.append(path) } }
    var paths: [String] { list.withLock { $0 } }
}

extension Replica {
    /// Keeps compressed content for the coming push, within the cache's byte budget.
    func remember(_ path: String, _ content: CachedContent) {
        if let old = pushCache.removeValue(forKey: path) { pushCacheBytes -= old.cost }
        guard pushCacheBytes + content.cost <= Self.pushCacheLimit else { return }
        pushCache[path] = content
        pushCacheBytes += content.cost
    }

    /// Takes the cached content of `row` if it is still what the row says is on disk.
    func takeCached(_ row: KnownFile) -> CachedContent? {
        guard let cached = pushCache.removeValue(forKey: row.path) else { return nil }
        pushCacheBytes -= cached.cost
        guard cached.sha256 == row.sha256, row.matches(cached.stat) else { return nil }
        return cached
    }
}

extension Replica {
    /// Whether the root's directory was removed (its descriptor now points at an unlinked directory)
    /// or is no longer at its path.
    func rootDeleted(_ root: Int) -> Bool {
        var opened = Glibc.stat()
        guard fstat(safeRoots[root].fd, &opened) == 0 else { return true }
        if opened.st_nlink == 0 { return true }
        var atPath = Glibc.stat()
        guard fstatat(AT_FDCWD, roots[root].path, &atPath, 0) == 0 else { return true }
        return atPath.st_ino != opened.st_ino || atPath.st_dev != opened.st_dev
    }

    /// Whether the root holds nothing that is synced (ignored names and our temporaries aside).
    func rootLooksEmpty(_ root: Int) -> Bool {
        guard let listing = try? safeRoots[root].descriptor().listDirectory() else { return true }
        return !listing.names.contains { name in
            !TempNames.isTemporary(name) && !isIgnored(root: root, relative: name, isDirectory: false)
                && !isIgnored(root: root, relative: name, isDirectory: true)
        }
    }

    /// The user confirmed (`sinkid resume`) that a stopped root is meant to be as it is: reopen it
    /// and let the next walk record what is gone.
    public func confirmSafetyStop(root: Int) throws {
        if (try? SafeRoot(path: roots[root].path)) == nil {
            // The folder itself is gone: make it again, empty, so the deletes can be recorded.
            var built = ""
            for component in roots[root].path.split(separator: "/") {
                built += "/" + component
                mkdir(built, 0o755)
            }
        }
        try reopen(root: root)
        confirmedEmpty.insert(root)
    }
}

extension Replica {
    /// Removes temporary files a kill left in the middle of a write (only on the first walk of a root
    /// after a start, before this agent writes anything of its own there).
    func removeLeftovers(_ temporaries: [String], root: Int) {
        for relative in temporaries {
            var made: [String] = []
            guard let parent = try? safeRoots[root].openParent(of: relative, create: false, made: &made) else { continue }
            if unlinkat(parent.raw, SafeRoot.name(of: relative), 0) == 0 {
                logger.info("removed \(quoted(roots[root].path + "/" + relative)), left by a write that was cut off")
            }
        }
    }
}

extension Replica {
    /// Whether a vanished path may still be taken as the source of a rename seen without its cookie
    /// pair: it is still gone here and its tombstone not yet sent (once the server has it, or the path
    /// holds something again, a new file with the same bytes is only a new file).
    func renameCandidateStillGone(_ source: String) throws -> Bool {
        guard let row = try store.file(source) else { return false }
        if !row.present { return try store.outboxEntry(source) != nil }
        // Still recorded as present: a walk found it gone and records that in a later chunk (gone paths
        // come after the present ones). Gone on disk still is what counts.
        guard let path = try? RecordPath(validating: source), let local = locate(path) else { return false }
        return entry(root: local.root.index, relative: local.relative) == nil
    }
}
