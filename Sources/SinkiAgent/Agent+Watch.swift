import SinkiRecord
import SinkiState
import SinkiSupport
import SinkiWatch

extension Agent {
    /// Takes a batch from the watcher: paths are checked against the database (off the loop), and
    /// what changed is pushed.
    func handleWatch(_ batch: WatchBatch) {
        guard !stopping else { return }
        for root in batch.rootsGone {
            safetyStop(root: root, because: "the root folder was deleted, moved away or unmounted")
        }
        var kept = batch
        kept.changes = batch.changes.filter { control.safetyStops[$0.path.root] == nil }
        kept.moves = batch.moves.filter { control.safetyStops[$0.root] == nil }
        kept.rootsGone = []
        pendingWatch.merge(kept)
        if !lookingAtDisk {
            lookingAtDisk = true
            diskTask = Task { await self.lookAtDisk() }
        }
    }

    /// Runs the pending looks at the disk, one batch at a time, until none is left.
    private func lookAtDisk() async {
        defer {
            lookingAtDisk = false
            stopWait.diskStep = nil
        }
        guard let replica else { return }
        while !stopping && !pendingWatch.isEmpty {
            let batch = pendingWatch
            pendingWatch = WatchBatch()
            // Repeats are dropped by the check, by bytes (a String set would take two names that differ
            // only in normalization for one).
            var plain: [RootID: [String]] = [:]
            var walks: [LocalPath] = []
            if batch.overflow {
                walks = configuration.roots.indices.map { LocalPath(RootID($0), "") }
            } else {
                for change in batch.changes {
                    if change.recursive { walks.append(change.path) } else { plain[change.path.root, default: []].append(change.path.relative) }
                }
            }
            if logger.isEnabled(.debug) {
                let names = batch.changes.count <= 8 ? " (" + batch.changes.map(\.path.relative).joined(separator: ", ") + ")" : ""
                logger.debug("watch: \(batch.changes.count) path(s)\(names), \(batch.moves.count) move(s)\(batch.overflow ? ", overflow" : "")")
            }
            do {
                var queued = 0
                if !batch.overflow {
                    for move in batch.moves where control.safetyStops[move.root] == nil {
                        stopWait.diskStep = "a move"
                        let report = try await replica.move(from: move.from, to: move.to, isDirectory: move.isDirectory, progress: pushProgress)
                        queued += report.queued
                        note(report, root: move.root)
                    }
                }
                for (root, paths) in plain where control.safetyStops[root] == nil {
                    stopWait.diskStep = "a check of \(paths.count) path(s)"
                    let report = try await replica.check(root: root, paths: paths, progress: pushProgress)
                    queued += report.queued
                    note(report, root: root)
                }
                for path in walks where control.safetyStops[path.root] == nil {
                    stopWait.diskStep = "a walk of " + (path.relative.isEmpty ? "the root" : quoted(path.relative))
                    let report = try await replica.reconcile(path, progress: pushProgress)
                    queued += report.queued
                    note(report, root: path.root)
                }
                stopWait.diskStep = "the roots to walk again"
                for root in await replica.takeRescans() where control.safetyStops[root] == nil {
                    stopWait.diskStep = "a walk of a root whose ignore rules changed"
                    let report = try await replica.reconcile(LocalPath(root, ""), progress: pushProgress)
                    queued += report.queued
                    note(report, root: root)
                }
                if queued > 0 { logger.debug("watch: \(queued) local change(s) queued") }
                // A local event may have removed the cause of a remote change not applied (space freed,
                // a file closed, a folder made or made writable): those of its root are tried now.
                for root in Set(batch.changes.map(\.path.root) + batch.moves.map(\.root)) { causeMayHaveGone(root: root) }
                stopWait.diskStep = "the files that changed while read"
                let unstable = await replica.takeUnstable()
                if !unstable.isEmpty { recheckLater(unstable) }
                stopWait.diskStep = "the files left for later"
                let deferred = await replica.takeDeferred()
                if !deferred.isEmpty { recheckLater(deferred, after: 700) }
                if queued > 0 { pumpSync() }
            } catch {
                logger.error("cannot look at local changes: \(error)")
            }
        }
    }

    /// Files that changed while being read are looked at again once they are quiet.
    func recheckLater(_ paths: [LocalPath], after milliseconds: UInt64? = nil) {
        guard let sleeper else { return }
        Task {
            _ = await sleeper.sleep(milliseconds: milliseconds ?? configuration.watchDelayMilliseconds)
            var batch = WatchBatch()
            batch.changes = paths.map { WatchBatch.Change($0, recursive: false) }
            self.handleWatch(batch)
        }
    }
}
