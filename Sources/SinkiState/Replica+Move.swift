import Glibc
import SinkiRecord
import SinkiSupport

/// A path whose synced content just disappeared, kept a few seconds: a new file with the same size
/// and hash is the same file renamed (when inotify's cookie pair was not there to say so).
struct RecentlyGone {
    var path: String
    var size: Int64
    var time: Int64
    /// For a large file, which is not read when it appears: the same inode, size and mtime say it is
    /// the same file (a rename keeps all three; a new file may get a freed inode, not the old mtime).
    var inode: UInt64 = 0
    var mtime: Int64 = 0
}

extension Replica {
    /// How long a vanished file stays a candidate source for a rename seen without its cookie pair.
    static let defaultMoveWindow: Int64 = 10_000_000_000

    /// Sets how long a vanished file stays a rename candidate (tests on a loaded machine, where a
    /// check can take longer than the default, widen it).
    public func setMoveWindow(nanoseconds: Int64) { moveWindow = nanoseconds }

    /// A rename inside a root, paired by inotify's cookie: the rows move to the new path without
    /// reading any content (a directory of 10,000 files moves in one transaction), the new records
    /// name their source so the server copies content it already has, and the old paths become
    /// tombstones. What is there afterwards is verified by stat (a walk for a directory).
    public func move(root: Int, from: String, to: String, isDirectory: Bool, progress: (@Sendable (Int) -> Void)? = nil) async throws -> ObserveReport {
        let fromPath = recordPath(root: root, relative: from)
        let toPath = recordPath(root: root, relative: to)
        let destination: FileStat?
        do { destination = try safeRoots[root].stat(to) } catch { destination = nil }
        let moved = try store.files(under: fromPath).filter(\.present)
        // Something is at the source again already (written after the rename): not a plain move.
        let sourceBack = (try? safeRoots[root].stat(from)) != nil
        guard let destination, !moved.isEmpty, !sourceBack, (try? RecordPath(validating: toPath)) != nil,
              !isIgnored(root: root, relative: to, isDirectory: isDirectory) else {
            // Nothing known to move, or it left for an ignored or invalid name: look at both ends.
            var report = try await check(root: root, paths: [from], progress: progress)
            let other = isDirectory ? try await reconcile(root: root, under: to, progress: progress) : try await check(root: root, paths: [to], progress: progress)
            report.queued += other.queued
            report.hashed += other.hashed
            return report
        }
        var report = ObserveReport()
        let now = Clock.now()
        try store.transaction {
            for row in moved {
                let newPath = toPath + row.path.dropFirst(fromPath.count)
                var target = try store.file(newPath) ?? KnownFile(path: newPath, kind: row.kind, present: false)
                target.kind = row.kind
                target.present = true
                target.size = row.size
                target.mtime = row.mtime
                target.ctime = row.ctime
                target.inode = row.inode
                target.mode = row.mode
                target.sha256 = row.sha256
                target.type = row.type
                if row.path == fromPath { target.observe(destination) }
                // The server can copy the content only if it holds it at the source: the row's
                // content is the version last agreed there.
                let serverHasIt = row.tag > 0 && !row.syncedDeleted && (row.kind == .directory || row.syncedSHA256 == row.sha256)
                target.movedFrom = serverHasIt ? row.path : nil
                if let cached = pushCache.removeValue(forKey: row.path) {
                    pushCacheBytes -= cached.cost
                    remember(newPath, cached)
                }
                try store.saveFile(target)
                if target.hasLocalChange {
                    try store.enqueue(newPath, now: now)
                    report.queued += 1
                } else {
                    try store.dequeue(newPath)
                }
                var source = row
                source.present = false
                source.sha256 = ""
                source.movedFrom = nil
                if source.tag == 0, try store.outboxEntry(source.path) == nil {
                    try store.removeFile(source.path)
                    continue
                }
                try store.saveFile(source)
                // Queued just after the new paths: pushes take those first, and an old path is held
                // back only until its new one is accepted, so the held ones are never in a batch's way.
                try store.enqueue(source.path, now: now + 1)
                report.queued += 1
            }
        }
        if report.queued > 0 { progress?(report.queued) }
        logger.debug("moved \(moved.count) path(s) from \(quoted(fromPath)) to \(quoted(toPath)) without reading them")
        let verify = isDirectory ? try await reconcile(root: root, under: to, progress: progress) : try await check(root: root, paths: [to], progress: progress)
        report.queued += verify.queued
        report.hashed += verify.hashed
        report.seen = moved.count + verify.seen
        return report
    }

    /// Notes a file whose synced content vanished, as a possible rename source.
    func rememberGone(_ row: KnownFile) {
        // An empty file's bytes name nothing: any new empty file would look like it.
        guard row.kind == .file, row.size > 0, row.tag > 0, !row.sha256.isEmpty, row.syncedSHA256 == row.sha256 else { return }
        let now = Clock.monotonic()
        if recentlyGone[row.sha256]?.contains(where: { $0.path == row.path }) == true { return }
        recentlyGone[row.sha256, default: []].append(RecentlyGone(path: row.path, size: row.size, time: now, inode: row.inode, mtime: row.mtime))
        if recentlyGone.count > 10_000 {
            recentlyGone = recentlyGone.filter { $0.value.contains { now - $0.time < moveWindow } }
        }
    }

    /// The vanished path a new file with this content was probably renamed from.
    func takeGone(sha256: String, size: Int64) -> String? {
        guard var candidates = recentlyGone[sha256] else { return nil }
        let now = Clock.monotonic()
        candidates.removeAll { now - $0.time >= moveWindow }
        guard let index = candidates.firstIndex(where: { $0.size == size }) else {
            recentlyGone[sha256] = candidates.isEmpty ? nil : candidates
            return nil
        }
        let found = candidates.remove(at: index)
        recentlyGone[sha256] = candidates.isEmpty ? nil : candidates
        return found.path
    }

    /// The vanished path a new large file (not read when it appears) was probably renamed from: the
    /// same inode, size and mtime, with the content it had there. A large file is rarely gone, so the
    /// list is walked.
    func takeGone(inode: UInt64, size: Int64, mtime: Int64) -> (path: String, sha256: String)? {
        let now = Clock.monotonic()
        for (sha256, candidates) in recentlyGone {
            guard let index = candidates.firstIndex(where: { $0.inode == inode && $0.size == size && $0.mtime == mtime && now - $0.time < moveWindow })
            else { continue }
            var rest = candidates
            let found = rest.remove(at: index)
            recentlyGone[sha256] = rest.isEmpty ? nil : rest
            return (found.path, sha256)
        }
        return nil
    }
}
