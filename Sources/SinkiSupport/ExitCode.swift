/// Process exit codes (sysexits, design §1).
public enum ExitCode: Int32, Sendable {
    case success = 0
    /// `sinkid status` when no agent is running.
    case notRunning = 3
    case usage = 64
    case dataError = 65
    case unavailable = 69
    case software = 70
    case ioError = 74
    case temporaryFailure = 75
    /// The agent refused a control request from another user.
    case noPermission = 77
    case config = 78
}
