import Glibc
import SinkiRecord
import SinkiState
import SinkiSupport
import SinkiWatch

extension Agent {
    /// Stops syncing a root whose folder vanished or emptied while its files are synced: nothing is
    /// pushed for it and nothing is pulled until the user confirms with `sinkid resume`.
    func safetyStop(root: RootID, because reason: String) {
        guard control.safetyStops[root] == nil else { return }
        control.safetyStops[root] = reason
        control.notifier?.status(serviceStatus)
        logger.error("safety stop on \(quoted(configuration.roots[root.index].path)): \(reason); nothing is deleted on other machines until you run `sinkid resume`")
    }

    /// The user confirmed every safety stop: what is on disk now is what they want synced.
    public func confirmSafetyStops() async {
        guard let replica, !control.safetyStops.isEmpty else { return }
        let roots = Array(control.safetyStops.keys)
        for root in roots {
            do {
                try await replica.confirmSafetyStop(root: root)
                control.safetyStops[root] = nil
                logger.info("resuming \(quoted(configuration.roots[root.index].path)) as it is now")
                var batch = WatchBatch()
                batch.changes = [WatchBatch.Change(LocalPath(root, ""), recursive: true)]
                handleWatch(batch)
            } catch {
                logger.error("cannot resume \(quoted(configuration.roots[root.index].path)): \(error)")
            }
        }
        sleeper?.wakeAll()
    }

    /// Records a report's safety stop, if it has one.
    func note(_ report: ObserveReport, root: RootID) {
        if let reason = report.safetyStop { safetyStop(root: root, because: reason) }
        if report.watchLimitHit { warnWatchLimit(unwatched: report.unwatched) }
    }

    /// One warning naming the sysctl and a limit that would do; the unwatched folders are then
    /// walked periodically.
    func warnWatchLimit(unwatched: Int) {
        unwatchedCount += unwatched
        guard !watchLimitWarned else { return }
        watchLimitWarned = true
        let current = readSysctl("/proc/sys/fs/inotify/max_user_watches") ?? 0
        let needed = max(current * 2, current + unwatchedCount + 1024)
        logger.warning("the inotify watch limit fs.inotify.max_user_watches (\(current)) is reached: \(unwatchedCount)+ folders are not watched; "
            + "raise it to at least \(needed) (sudo sysctl fs.inotify.max_user_watches=\(needed)); meanwhile they are walked every \(unwatchedScanSeconds) s")
        scheduleUnwatchedScan()
    }

    /// Unwatched folders are walked this often (or as often as the safety rescan, if that is more).
    var unwatchedScanSeconds: UInt64 { UInt64(max(1, min(30, configuration.rescanSeconds))) }

    private func scheduleUnwatchedScan() {
        guard let sleeper else { return }
        Task {
            while !stopping {
                _ = await sleeper.sleep(milliseconds: unwatchedScanSeconds * 1000)
                guard let replica, !stopping else { return }
                let pending = await replica.takeUnwatched()
                if pending.isEmpty { continue }
                var batch = WatchBatch()
                batch.changes = pending.map { WatchBatch.Change($0, recursive: true) }
                handleWatch(batch)
            }
        }
    }

    private func readSysctl(_ path: String) -> Int? {
        guard let file = try? FileDescriptor.open(path, flags: O_RDONLY), let bytes = try? file.readAll() else { return nil }
        return Int(String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// The safety rescan: every `[watch] rescan` (±10 %), each root is compared with the database
    /// by size, mtime, ctime and inode, and only what differs is read.
    func schedulePeriodicRescan() {
        guard let sleeper, configuration.rescanSeconds > 0 else { return }
        Task {
            while !stopping {
                let jitter = Double.random(in: 0.9...1.1)
                _ = await sleeper.sleep(milliseconds: UInt64(configuration.rescanSeconds * jitter * 1000))
                if stopping { return }
                var batch = WatchBatch()
                batch.changes = configuration.roots.indices.map { WatchBatch.Change(LocalPath(RootID($0), ""), recursive: true) }
                handleWatch(batch)
            }
        }
    }
}
