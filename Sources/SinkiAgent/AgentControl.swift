import SinkiConfig
import SinkiControl
import SinkiLoop
import SinkiSupport

/// A config read again on SIGHUP: what the agent runs with, and the settings it came from.
public struct AgentReload: Sendable {
    public var configuration: AgentConfiguration
    public var settings: ResolvedConfig
    public init(configuration: AgentConfiguration, settings: ResolvedConfig) {
        self.configuration = configuration
        self.settings = settings
    }
}

/// Reads the config again with the flags the agent was started with; runs off the loop.
public typealias ConfigReloader = @Sendable () throws(AgentError) -> AgentReload

/// The agent's state for being controlled and watched: the control socket, systemd, SIGHUP, pause.
/// Kept apart from the syncing state so that each can change without the other.
struct AgentControl {
    var server: ControlServer?
    var notifier: ServiceNotifier?
    var hangup: LoopSignal?
    /// `sinkid pause`: nothing is pushed or pulled until `sinkid resume`, across restarts.
    var paused = false
    /// When that pause began (nanoseconds since the epoch), as kept in the state database.
    var pausedSince: Int64?
    /// `sinkid pause ROOT`: roots whose changes are noted but neither sent nor applied, by name, with
    /// when; kept in the state database.
    var pausedRoots: [String: Int64] = [:]
    /// The first scan is done (until then status says scanning, and systemd is not told READY).
    var scanned = false
    var startedAt = Clock.now()
    /// The last answer from the server.
    var lastContact: Int64?
    /// Roots stopped for safety (a root gone or emptied while its records are not: the watcher's
    /// call, issue 3), with why. `sinkid resume` confirms and clears them.
    var safetyStops: [RootID: String] = [:]
    var version = "unknown"
    var reloader: ConfigReloader?
    /// The settings in force, to tell what a reload changed.
    var settings: ResolvedConfig?
    var reloading = false
}
