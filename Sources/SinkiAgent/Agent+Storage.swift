import SinkiControl
import SinkiLoop
import SinkiRecord
import SinkiSupport
import SinkiTransfer

extension Agent {
    /// Takes a `507 storage-full` answer to a save: the user's quota on the server is reached. True when
    /// `error` was one. Nothing is dropped: the batch's paths still differ between Local and Synced, so
    /// they stay queued; saves wait (5 s, doubling to 5 min) while the feed and remote changes go on, and
    /// status says `server storage full` with the server's figures.
    func noteStorageFull(_ error: SyncError, changes: Int) -> Bool {
        guard case let .problem(problem) = error, problem.code == ProblemKind.storageFull.code || problem.status == 507 else { return false }
        let now = Clock.now()
        access.storageRefusals += 1
        let wait = ServerAccess.storageWait(refusals: access.storageRefusals)
        let since = access.storageFull?.since ?? now
        let note = StorageFullNote(detail: problem.detail, figures: problem.storage, since: since, retryAt: now + wait)
        let first = access.storageFull == nil
        access.storageFull = note
        let line = "server storage full (507): \(note.words); \(changes) local change(s) kept, sent again in \(HumanUnits.duration(Double(wait) / 1e9))"
        if first { logger.warning(line) } else { logger.info(line) }
        armStorageTimer(at: note.retryAt)
        return true
    }

    /// A save went through: whatever storage refusal waited is over.
    func storageHasRoom() {
        guard access.storageFull != nil else { return }
        access.storageFull = nil
        access.storageRefusals = 0
        storageTimer?.stop()
        logger.info("the server takes local changes again (storage has room)")
    }

    /// `sinkid retry` or `sinkid sync`: a storage refusal's wait ends now (the next save finds out).
    func storageDueNow() {
        guard var note = access.storageFull else { return }
        note.retryAt = Clock.now()
        access.storageFull = note
        storageTimer?.stop()
    }

    /// Pumps when the wait ends; one timer, none armed while no refusal waits.
    private func armStorageTimer(at when: Int64) {
        let timer = storageTimer ?? LoopTimer(loop: loop)
        storageTimer = timer
        timer.start(after: UInt64(max(0, when - Clock.now()) / 1_000_000) + 1) { [unowned self] in
            self.assumeIsolated { agent in
                guard !agent.stopping else { return }
                agent.pumpSync()
            }
        }
    }
}
