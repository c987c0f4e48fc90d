/// What the control socket asks of a running agent. The agent implements it; `ControlServer` turns
/// requests into these calls and their results into answers (docs/control.md).
public protocol ControlHandler: Actor {
    /// Everything `sinkid status` shows.
    func status() async -> StatusReport
    /// Stops pushes and pulls until `resume` (the batch in flight finishes); with `root`, only that
    /// root's sending and applying.
    func pause(root: String?) async throws(ControlError) -> ControlAck
    /// Ends a pause (every one, or `root`'s), and confirms a safety stop.
    func resume(root: String?) async throws(ControlError) -> ControlAck
    /// Looks at the disk again and asks the server for news now.
    func syncNow(verify: Bool) async -> ControlAck
    /// Puts refused changes (all, or at or below `path`) back in the queue; returns their paths.
    func retry(path: String?) async throws(ControlError) -> [String]
    /// Conflicts left for `resolve`.
    func conflicts() async throws(ControlError) -> [ConflictEntry]
    func resolve(path: String, keep: ResolveChoice) async throws(ControlError) -> ControlAck
    /// Checks that `path` can be watched here (its root is synced); events then come through
    /// `ControlServer.publish`.
    func checkWatch(_ path: WatchPath) async throws(ControlError)
}
