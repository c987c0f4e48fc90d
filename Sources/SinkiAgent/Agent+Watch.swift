import SinkiState
import SinkiWatch

extension Agent {
    /// Takes a batch from the watcher: paths are checked against the database (off the loop), and
    /// what changed is pushed.
    func handleWatch(_ batch: WatchBatch) {
        guard let replica, !stopping else { return }
        logger.debug("watch: \(batch.changes.count) path(s)\(batch.overflow ? ", overflow" : "")")
        for root in batch.rootsGone {
            logger.error("root \(configuration.roots[root].path) disappeared or was moved; its changes are not synced until it is back and sinkid restarts")
        }
        var plain: [Int: [String]] = [:]
        var walks: [(Int, String)] = []
        if batch.overflow {
            walks = configuration.roots.indices.map { ($0, "") }
        } else {
            for change in batch.changes where !batch.rootsGone.contains(change.root) {
                if change.recursive { walks.append((change.root, change.relative)) } else { plain[change.root, default: []].append(change.relative) }
            }
        }
        Task {
            do {
                var queued = 0
                for (root, paths) in plain {
                    queued += try await replica.check(root: root, paths: paths).queued
                }
                for (root, relative) in walks {
                    let report = try await replica.reconcile(root: root, under: relative)
                    queued += report.queued
                    if report.watchLimitHit { self.warnWatchLimit() }
                }
                self.logger.debug("watch: \(queued) local change(s) queued")
                let unstable = await replica.takeUnstable()
                if !unstable.isEmpty { self.recheckLater(unstable) }
                if queued > 0 { self.pumpPush() }
            } catch {
                self.logger.error("cannot look at local changes: \(error)")
            }
        }
    }

    /// Files that changed while being read are looked at again once they are quiet.
    func recheckLater(_ paths: [(root: Int, relative: String)]) {
        guard let sleeper else { return }
        Task {
            _ = await sleeper.sleep(milliseconds: configuration.watchDelayMilliseconds)
            var batch = WatchBatch()
            batch.changes = paths.map { WatchBatch.Change(root: $0.root, relative: $0.relative, recursive: false) }
            self.handleWatch(batch)
        }
    }
}
