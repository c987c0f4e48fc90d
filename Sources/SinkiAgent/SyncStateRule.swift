import SinkiControl
import SinkiSupport

/// What decides the state `sinkid status` shows, for the agent or one root.
struct SyncStateFacts: Sendable {
    var safetyStop: String?
    var paused = false
    /// When the pause began (nanoseconds since the epoch).
    var pausedSince: Int64?
    /// Roots paused alone (`sinkid pause ROOT`), with when: for the agent as a whole, some of its roots.
    var pausedRoots: [String: Int64] = [:]
    var scanned = true
    /// The state database could not be read.
    var problem: String?
    var unreachable: String?
    /// The server refused the token (its words).
    var tokenRefused: String?
    /// Seconds a 429 still holds requests back.
    var rateLimitedSeconds: Int64?
    /// The server's last `507 storage-full`, while saves wait for room.
    var storageFull: StorageFullNote?
    var caughtUp = true
    /// Local changes waiting to be sent (refused ones and those held by a waiting conflict not counted).
    var toSend = 0
    /// How the current run of sending goes, once it has sent something.
    var progress: PushProgressView?
    var refused = 0
    var waitingConflicts = 0
    /// Records of conflicts found or settled here that the server has not heard of yet.
    var conflictRecords = 0
    /// Remote changes whose write failed here (the listed ones tell their causes).
    var notApplied: [NotAppliedChange] = []
    var notAppliedCount = 0
    /// Remote changes read and not written here yet (no failure: under way).
    var toApply = 0
    /// How the current run of applying goes, while something waits or moves.
    var download: DownloadProgress?
    /// Paths handed out and not answered yet (a save, a download, an upload, a merge).
    var inFlight = 0
    /// Paths that still differed from the server after the last full comparison.
    var differing = 0
    /// A full comparison runs and has repaired something already: it has not yet found the same.
    var verifying = false
    /// Files moving to or from the server now.
    var transfersRunning = 0
    /// The digests have not (yet) matched the server's at the position read.
    var checking = false
    /// What differed from the server still after the last check's repairs.
    var digestFailure: String?
}

/// The state and its reason: "up to date" only when the feed is read to its end, the three trees are
/// equal (nothing local to send, nothing remote to write, nothing handed out), no file is moving, the
/// digests of this agent's copy of the server's records matched the server's at the position read, and
/// the last full comparison found the same as the server.
enum SyncStateRule {
    static func decide(_ facts: SyncStateFacts) -> (state: SyncState, reason: String?) {
        if let stop = facts.safetyStop { return (.stoppedForSafety, stop) }
        if facts.paused {
            return (.paused, "sinkid pause" + (facts.pausedSince.map { " since \(Clock.iso8601($0))" } ?? "") + "; sinkid resume to go on")
        }
        if !facts.scanned { return (.scanning, nil) }
        if let problem = facts.problem { return (.error, problem) }
        if let refused = facts.tokenRefused {
            return (.error, "token refused by the server (\(refused)): nothing is sent and local changes are kept until the token file changes")
        }
        if let unreachable = facts.unreachable { return (.error, unreachable) }
        if let full = facts.storageFull, facts.toSend > 0 {
            let seconds = max(0, Double(full.retryAt - Clock.now()) / 1e9)
            return (.error, "server storage full: \(full.words); \(facts.toSend) local change(s) kept, sent again "
                    + (seconds >= 1 ? "in \(HumanUnits.duration(seconds)) (sinkid retry: now)" : "now"))
        }
        if facts.notAppliedCount > 0 {
            let first = facts.notApplied.first.map { ": \($0.path): \($0.reason)" } ?? ""
            let words = "\(facts.notAppliedCount) remote change(s) not applied\(first)"
            if facts.notApplied.contains(where: \.needsAttention) { return (.error, words + "; retried when the cause is gone (sinkid retry: now)") }
            return (.syncing, words)
        }
        if let failure = facts.digestFailure { return (.error, failure) }
        if facts.differing > 0 {
            return (.error, "\(facts.differing) path(s) still differ from the server after the last full comparison (sinkid sync --verify)")
        }
        if !facts.pausedRoots.isEmpty {
            let each = facts.pausedRoots.sorted { $0.key < $1.key }.map { "\($0.key) paused since \(Clock.iso8601($0.value)) (sinkid resume \($0.key))" }
            return (.paused, each.joined(separator: "; "))
        }
        if let seconds = facts.rateLimitedSeconds { return (.syncing, "the server asked to slow down: next request in \(seconds) s") }
        if !facts.caughtUp { return (.syncing, "reading the server's changes") }
        if facts.toSend > 0 {
            let words = "\(facts.toSend) local change(s) to send"
            guard let progress = facts.progress, progress.sent > 0 else { return (.syncing, words) }
            return (.syncing, words + "; " + progress.words)
        }
        if facts.toApply > 0 {
            let words = "\(facts.toApply) remote change(s) to apply"
            guard let download = facts.download, download.applied > 0 || download.bytes > 0 else { return (.syncing, words) }
            return (.syncing, words + "; " + download.words)
        }
        if facts.transfersRunning > 0 {
            return (.syncing, "\(facts.transfersRunning) file(s) moving" + (facts.download.map { "; " + $0.words } ?? ""))
        }
        if facts.inFlight > 0 { return (.syncing, "\(facts.inFlight) change(s) under way") }
        if facts.conflictRecords > 0 { return (.syncing, "\(facts.conflictRecords) conflict(s) found or settled here to tell the other devices of") }
        if facts.verifying { return (.syncing, "comparing with the server again after repairs") }
        if facts.checking { return (.syncing, "checking this agent's copy against the server") }
        var notes: [String] = []
        if facts.refused > 0 { notes.append("\(facts.refused) change(s) refused by the server (sinkid retry)") }
        if facts.waitingConflicts > 0 { notes.append("\(facts.waitingConflicts) conflict(s) wait for sinkid resolve") }
        return (.upToDate, notes.isEmpty ? nil : notes.joined(separator: "; "))
    }
}
