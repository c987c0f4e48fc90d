import Glibc
import SinkiLoop
import SinkiRecord
import SinkiSupport

/// What a look at the disk found.
public struct ObserveReport: Sendable, Equatable {
    /// Paths whose Local entry now differs from Synced (local changes to send).
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

    mutating func add(_ other: ObserveReport) {
        queued += other.queued
        seen += other.seen
        hashed += other.hashed
        busy += other.busy
        watchLimitHit = watchLimitHit || other.watchLimitHit
        unwatched += other.unwatched
    }
}

/// A path as now seen on disk (nil stat: gone), against the row the tree had.
struct Observation {
    var path: LocalPath
    var recordPath: String
    var stat: FileStat?
    var row: TreeRow?
    var known: LocalFacts? { row?.local }
}

/// The local observer: brings the Local tree in line with the disk, from walks and from the
/// watcher's batches. It records what it sees and nothing else; whether that is a change to send is
/// the planner's to find (Local differs from Synced).
final class LocalObserver {
    let context: ReplicaContext
    var store: StateStore { context.store }
    var logger: Logger { context.logger }
    /// Paths that changed while being read; the agent looks at them again after a delay.
    var unstable: [LocalPath] = []
    /// New files with temporary-looking names a walk skipped; looked at after their grace period.
    var deferred: [LocalPath] = []
    /// Local names that cannot be record paths (invalid UTF-8, a backslash), and special files, each
    /// with why.
    var skipped: [String: String] = [:]
    /// Files whose own extended attributes are not all sent (past the bounds, a name not UTF-8), with why.
    var xattrsLeftOut: [String: String] = [:]
    /// Per root, the entries its last whole walk left out by ignore rules.
    var ignoredCounts: [RootID: Int] = [:]
    /// Directories per root left without a watch (the limit was reached): walked periodically.
    var unwatchedDirectories: [Set<String>]
    /// Large files that just vanished: a new one with the same inode, size and mtime is that file renamed.
    var moves = MoveMemory()
    /// Small files' content read while hashing, for the push that follows (read once).
    var pushCache = PushCache()
    /// Roots the user confirmed may be empty: their next walk records what is gone.
    var confirmedEmpty: Set<RootID> = []
    /// Roots whose first whole walk since the start has not run yet: it removes leftover temporaries,
    /// and what it finds gone may be this agent's own work cut off by a stop, so is not `live`.
    var firstWalkPending: Set<RootID>

    init(context: ReplicaContext) {
        self.context = context
        unwatchedDirectories = context.roots.map { _ in [] }
        firstWalkPending = Set(context.roots.indices.map(RootID.init))
    }

    /// Observations recorded per transaction during a walk.
    static let chunk = 1000
    /// A root found empty stops for safety only when at least this many synced entries vanished with
    /// it at once (an unmounted disk, a mistaken `rm -r`); deleting the last few files by hand is a delete.
    static let emptyRootThreshold = 5
    /// How long a new file with a temporary-looking name waits before a walk records it.
    static let temporaryGrace: Int64 = 600_000_000

    /// Walks `path` (the whole root when it is the root), watching each directory before listing it,
    /// and brings the Local tree in line with what is there. Only files whose size, mtime, inode or
    /// mode changed are read.
    func reconcile(under path: LocalPath, progress: (@Sendable (Int) -> Void)?,
                   isolation: isolated (any Actor) = #isolation) async throws -> ObserveReport {
        let root = path.root, relative = path.relative
        if !relative.isEmpty && context.isIgnored(path, isDirectory: true) {
            return try await check(root: root, paths: [relative], progress: progress)
        }
        var report = ObserveReport()
        let rootName = context.roots[root].name
        let base = relative.isEmpty ? rootName : rootName + "/" + relative
        let link = context.watch, logger = self.logger, rules = context.ignores[root], safeRoot = context.safeRoots[root]
        // The walk (system calls) runs on another thread while this one reads the tree's entries.
        async let walking = Blocking.run {
            try Walk.tree(safeRoot, at: path, watching: link, rules: rules, logger: logger)
        }
        let writesBefore = store.treeWrites
        let dropping = rootName.utf8.count + 1
        var known = try store.presentStats(under: base, dropping: dropping)
        let outcome = try await walking
        // Others ran on this actor while the walk finished: what they recorded is read again.
        if store.treeWrites != writesBefore { known = try store.presentStats(under: base, dropping: dropping) }
        guard var walk = outcome.report else {
            // The directory went away (or became something else) before we got there.
            return try await check(root: root, paths: [relative], progress: progress)
        }
        for line in walk.errors { logger.warning(line) }
        // Before this root's first whole walk nothing here is live; a walk below it meanwhile is not either.
        let live = !firstWalkPending.contains(root)
        if relative.isEmpty, firstWalkPending.remove(root) != nil { Walk.removeLeftovers(walk.temporaries, in: context.safeRoots[root], logger: logger) }
        for name in walk.invalidNames { noteSkipped(LocalPath(root, name), why: "its name is not valid UTF-8") }
        for name in walk.special { noteSkipped(LocalPath(root, name), why: "it is a fifo, socket or device") }
        logger.debug("walk \(walk.entries.count) entries")
        if relative.isEmpty { ignoredCounts[root] = walk.ignored }
        if relative.isEmpty, !known.isEmpty, !confirmedEmpty.contains(root) {
            if Walk.rootDeleted(context.safeRoots[root], path: context.roots[root].path) {
                report.safetyStop = "the root folder was deleted or moved away"
                return report
            }
            if walk.entries.isEmpty && known.count >= Self.emptyRootThreshold {
                // Empty while that many entries are synced from it: an unmounted disk or a mistake looks
                // the same as a wish to delete everything; only the user can tell.
                report.safetyStop = "the root folder is empty but \(known.count) entries are synced from it"
                return report
            }
        }
        if relative.isEmpty { confirmedEmpty.remove(root) }
        // Two passes, so that a million entries never become a million observations at once: the first
        // finds which entries differ from the tree (most do not, on a restart) and leaves in `known` what
        // the walk did not find; the second makes observations of those, a chunk at a time.
        var entries = walk.entries
        walk.entries = []
        var differing: [Int] = []
        let now = Clock.now()
        for index in entries.indices {
            let entry = entries[index]
            let facts = known.removeValue(forKey: entry.relative)
            if let facts, facts.matches(entry.stat) { continue }
            if facts == nil, entry.stat.kind != .directory, now - entry.stat.ctime < Self.temporaryGrace,
               TemporaryNames.looksTemporary(entry.relative.split(separator: "/").last ?? "") {
                // Just made, under a name that looks temporary: looked at again once its grace is over.
                deferred.append(LocalPath(root, entry.relative))
                continue
            }
            // A known entry's path was validated when it was recorded; only a new one is checked.
            if facts == nil, (try? RecordPath(validating: rootName + "/" + entry.relative)) == nil {
                noteSkipped(LocalPath(root, entry.relative), why: "its name cannot be a record path")
                continue
            }
            differing.append(index)
        }
        // Whatever the tree had below here and the walk did not find is gone, unless the walk skipped it
        // because it is ignored now: that is left out from here on, never deleted elsewhere.
        var ignoredNow: [String] = []
        var gone: [Observation] = []
        var top: [Observation] = []
        if !relative.isEmpty, let stat = try context.safeRoots[root].stat(relative) {
            // The walked directory itself is an entry too (it is not in the walk's list).
            known.removeValue(forKey: relative)
            top.append(try observation(path, stat: stat))
        }
        for (relativePath, facts) in known {
            if context.isIgnored(LocalPath(root, relativePath), isDirectory: facts.kind == .directory) {
                ignoredNow.append(rootName + "/" + relativePath)
                continue
            }
            gone.append(try observation(LocalPath(root, relativePath), stat: nil))
        }
        known = [:]
        if !ignoredNow.isEmpty { try store.transaction { for path in ignoredNow { try store.setIgnored(path, true) } } }
        unwatchedDirectories[root].formUnion(outcome.unwatched)
        report.seen = entries.count
        report.watchLimitHit = outcome.watchLimitHit
        report.unwatched = outcome.unwatched.count
        // Known before any chunk is recorded, so a large file renamed while the agent was not looking is
        // matched with its old path whichever chunk each lands in.
        for observation in gone { if let facts = observation.known { moves.rememberGone(observation.recordPath, facts) } }
        // Parents before children (bytewise order puts every folder before what is in it), then the gone
        // ones deepest first; in chunks, each its own transaction, so that sending starts while the rest
        // is still read (other calls may run between chunks).
        differing.sort { entries[$0].relative.utf8.lexicographicallyPrecedes(entries[$1].relative.utf8) }
        gone.sort { $0.recordPath.utf8.count > $1.recordPath.utf8.count }
        var start = 0
        var first = true
        while start < differing.count || first {
            let end = min(start + Self.chunk, differing.count)
            var part = first ? top : []
            first = false
            for index in differing[start..<end] {
                let entry = entries[index]
                part.append(try observation(LocalPath(root, entry.relative), stat: entry.stat))
            }
            try await absorbChunk(part, live: live, into: &report, progress: progress)
            start = end
        }
        entries = []
        start = 0
        while start < gone.count {
            let end = min(start + Self.chunk, gone.count)
            try await absorbChunk(Array(gone[start..<end]), live: live, into: &report, progress: progress)
            start = end
        }
        return report
    }

    private func observation(_ path: LocalPath, stat: FileStat?) throws -> Observation {
        let recordPath = context.recordPath(path)
        return Observation(path: path, recordPath: recordPath, stat: stat, row: try store.row(recordPath))
    }

    private func absorbChunk(_ part: [Observation], live: Bool, into report: inout ObserveReport, progress: (@Sendable (Int) -> Void)?,
                             isolation: isolated (any Actor) = #isolation) async throws {
        if part.isEmpty { return }
        let absorbed = try absorb(part, live: live)
        report.queued += absorbed.queued
        report.hashed += absorbed.hashed
        report.busy += absorbed.busy
        if absorbed.queued > 0 { progress?(absorbed.queued) }
        await Task.yield()
    }

    /// Looks again at specific paths (from the watcher). A directory that is new here is walked.
    func check(root: RootID, paths: [String], progress: (@Sendable (Int) -> Void)?,
               isolation: isolated (any Actor) = #isolation) async throws -> ObserveReport {
        var observations: [Observation] = []
        var walks: [String] = []
        var seen = Set<LocalPath>()
        for relative in paths {
            let here = LocalPath(root, relative)
            guard seen.insert(here).inserted else { continue }
            if relative.isEmpty { walks.append(""); continue }
            let path = context.recordPath(here)
            if (try? RecordPath(validating: path)) == nil { continue }
            if context.isIgnored(here) {
                // Ignored now: not synced from here on, and never deleted elsewhere for it.
                let below = try store.rows(under: path)
                if !below.isEmpty { try store.transaction { for row in below { try store.setIgnored(row.path, true) } } }
                continue
            }
            if try store.isIgnoredRow(path) {
                // No longer ignored: its entries are work again, and what is there is looked at.
                try store.transaction { for row in try store.rows(under: path) { try store.setIgnored(row.path, false) } }
            }
            let stat: FileStat?
            do { stat = try context.safeRoots[root].stat(relative) } catch {
                if case .symlinkInPath = error { stat = nil } else { throw error }
            }
            let row = try store.row(path)
            let known = row?.local
            if let stat {
                if stat.kind == .special {
                    noteSkipped(here, why: "it is a fifo, socket or device")
                    if known != nil { observations.append(Observation(path: here, recordPath: path, stat: nil, row: row)) }
                    continue
                }
                if stat.kind == .directory && (known?.kind != .directory || !(context.watch?.isWatched(here) ?? true)) {
                    walks.append(relative)
                    continue
                }
                if let known, known.matches(stat) { continue }
                observations.append(Observation(path: here, recordPath: path, stat: stat, row: row))
                if known?.kind == .directory {
                    // A folder that became a file: what the tree had below it is gone, in the same transaction.
                    observations += try goneBelow(here)
                }
            } else {
                guard known != nil else { continue }
                // Gone: so is everything the tree had below it.
                observations.append(Observation(path: here, recordPath: path, stat: nil, row: row))
                observations += try goneBelow(here)
            }
        }
        if observations.contains(where: { $0.stat == nil && $0.known != nil }) && !confirmedEmpty.contains(root) {
            if Walk.rootDeleted(context.safeRoots[root], path: context.roots[root].path) {
                var stopped = ObserveReport()
                stopped.safetyStop = "the root folder was deleted or moved away"
                return stopped
            }
            let goneNow = observations.count { $0.stat == nil && $0.known != nil }
            if goneNow >= Self.emptyRootThreshold, rootLooksEmpty(root), try store.totals(root: context.roots[root].name).files > 0 {
                var stopped = ObserveReport()
                stopped.safetyStop = "the root folder became empty"
                return stopped
            }
        }
        var report = try absorb(observations, live: true)
        for relative in walks {
            report.add(try await reconcile(under: LocalPath(root, relative), progress: progress))
        }
        return report
    }

    /// Observations of every Local entry strictly below `path` as gone.
    func goneBelow(_ path: LocalPath) throws -> [Observation] {
        let recordPath = context.recordPath(path)
        let rootName = context.roots[path.root.index].name
        return try store.presentRows(below: recordPath).map { row in
            Observation(path: LocalPath(path.root, String(decoding: row.path.utf8.dropFirst(rootName.utf8.count + 1), as: UTF8.self)),
                        recordPath: row.path, stat: nil, row: row)
        }
    }

    func noteSkipped(_ path: LocalPath, why: String) {
        if skipped.updateValue(why, forKey: context.recordPath(path)) == nil {
            logger.warning("skipping \(quoted(context.diskPath(path))): \(why)")
        }
    }

    /// Whether the root holds nothing that is synced (ignored names and our temporaries aside).
    func rootLooksEmpty(_ root: RootID) -> Bool {
        guard let listing = try? context.safeRoots[root].descriptor().listDirectory() else { return true }
        return !listing.names.contains { name in !TempNames.isTemporary(name) && !context.isIgnored(LocalPath(root, name)) }
    }

    /// Takes in the disk at `path` now if the Local tree does not describe it (a change the watcher has
    /// not reported yet), so that it counts as the local version it is; returns the Local entry then.
    /// `busy`: another program is writing the file, and nothing was recorded.
    func refresh(_ path: LocalPath) throws -> (local: LocalFacts?, stat: FileStat?, busy: Bool) {
        let recordPath = context.recordPath(path)
        let row = try store.row(recordPath)
        let known = row?.local
        var stat: FileStat?
        do { stat = try context.safeRoots[path.root.index].stat(path.relative) } catch {
            if case .symlinkInPath = error { stat = nil } else { throw error }
        }
        if let found = stat, found.kind == .special { stat = nil }
        if known == nil, stat == nil { return (nil, nil, false) }
        if let known, let stat, known.matches(stat) { return (known, stat, false) }
        var observations = [Observation(path: path, recordPath: recordPath, stat: stat, row: row)]
        if stat == nil || stat?.kind != .directory, known?.kind == .directory { observations += try goneBelow(path) }
        let report = try absorb(observations, live: !firstWalkPending.contains(path.root))
        return (try store.row(recordPath)?.local, stat, report.busy > 0)
    }
}

extension LocalObserver {
    /// A file the user deleted here, seen as it happens, that a peer renamed meanwhile (the rename and
    /// the source's tombstone are read already, the rename not done here yet): the delete follows the
    /// rename. The new path is agreed on as what it is, and gone here it is sent as a delete. Only for
    /// deletes seen live (`absorb`): one found by the first walk after a start may be this agent's own,
    /// cut off before it was recorded, and a rename's content is never dropped on a guess
    /// (docs/planner.md).
    func deleteFollowsRename(_ path: String) throws {
        guard let row = try store.row(path), row.local == nil, let synced = row.synced, synced.kind != nil, synced.kind != .directory,
              let remote = row.remote, remote.kind == nil, remote.tag > synced.tag else { return }
        for target in try store.remoteMovers(from: path) {
            guard let moved = try store.row(target), moved.local == nil, moved.synced == nil, let movedRemote = moved.remote,
                  movedRemote.kind == synced.kind, movedRemote.hash == synced.hash, movedRemote.tag < remote.tag, movedRemote.size > 0,
                  try !store.hasLaterMover(from: path, than: movedRemote.tag) else { continue }
            try store.setSynced(target, SyncedFacts(movedRemote))
            context.logger.info("\(quoted(path)) was deleted here and renamed to \(quoted(target)) elsewhere: the delete follows the rename")
        }
    }
}
