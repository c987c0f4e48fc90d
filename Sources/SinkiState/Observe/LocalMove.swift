import SinkiRecord
import SinkiSupport

extension LocalObserver {
    /// A rename inside a root, paired by inotify's cookie: the Local entries move to the new path
    /// without reading any content (a folder of 10,000 files moves in one transaction). The planner then
    /// finds each new path's content at a path gone from disk and sends it as a rename (the server
    /// copies what it holds), and the old paths' deletes. What is there afterwards is verified by stat
    /// (a walk for a folder).
    func move(from: LocalPath, to: LocalPath, isDirectory: Bool, progress: (@Sendable (Int) -> Void)?,
              isolation: isolated (any Actor) = #isolation) async throws -> ObserveReport {
        let fromPath = context.recordPath(from)
        let toPath = context.recordPath(to)
        let destination = context.entry(to)
        let moved = try store.rows(under: fromPath).filter { $0.local != nil }
        // Something is at the source again already (written after the rename): not a plain move.
        let sourceBack = context.entry(from) != nil
        guard let destination, !moved.isEmpty, !sourceBack, (try? RecordPath(validating: toPath)) != nil,
              from.root == to.root, !context.isIgnored(to, isDirectory: isDirectory) else {
            // Nothing known to move, or it left for an ignored or invalid name: look at both ends.
            var report = try await check(root: from.root, paths: [from.relative], progress: progress)
            report.add(isDirectory ? try await reconcile(under: to, progress: progress)
                       : try await check(root: to.root, paths: [to.relative], progress: progress))
            return report
        }
        var report = ObserveReport()
        try store.transaction {
            // What was not kept here moves with the files (before the old paths' entries go, and it with them).
            try store.moveUnkeptXattrs(from: fromPath, to: toPath)
            for row in moved {
                guard var local = row.local else { continue }
                let newPath = toPath + String(decoding: row.path.utf8.dropFirst(fromPath.utf8.count), as: UTF8.self)
                // Still the file that left the source (a rename keeps size, mtime, inode and mode): its new
                // stat is taken in. One written since, in the same breath, keeps its old facts, so the look at
                // the path that follows reads it rather than take its new stat for the old content.
                if row.path == fromPath && (local.kind == .directory || local.sameFile(destination)) { local.observe(destination) }
                if local.kind != .directory { local.type = local.kind == .symlink ? Record.symlinkType : context.typeFor(newPath) }
                pushCache.move(row.path, to: newPath)
                if let reason = xattrsLeftOut.removeValue(forKey: row.path) { xattrsLeftOut[newPath] = reason }
                if context.moveHints.count > 100_000 { context.moveHints.removeAll() }
                context.moveHints[newPath] = row.path
                context.moveSources[row.path] = newPath
                let target = try store.row(newPath)
                try store.setLocal(newPath, local)
                try store.setLocal(row.path, nil)
                if target?.synced?.node != local.node { report.queued += 1 }
                if row.synced != nil { report.queued += 1 }
            }
        }
        if report.queued > 0 { progress?(report.queued) }
        logger.debug("moved \(moved.count) path(s) from \(quoted(fromPath)) to \(quoted(toPath)) without reading them")
        let verify = isDirectory ? try await reconcile(under: to, progress: progress)
            : try await check(root: to.root, paths: [to.relative], progress: progress)
        report.queued += verify.queued
        report.hashed += verify.hashed
        report.seen = moved.count + verify.seen
        return report
    }
}
