import SinkiConfig
import SinkiRecord
import SinkiState
import SinkiSupport

/// Everything the agent needs to run, resolved from flags and the config file.
public struct AgentConfiguration: Sendable {
    public var roots: [RootSpec]
    /// The server to sync through; nil runs the embedded server on `listen`.
    public var serverURL: String?
    /// The embedded server's address (design §1: `127.0.0.1:7071`).
    public var listen: String
    public var stateDirectory: String
    public var device: String
    /// `device` was made now for a new state folder (none configured): kept there once this agent
    /// holds the folder's lock (`DefaultDevice`), so a restart keeps the name.
    public var deviceIsNew = false
    /// Bearer token sent on every request.
    public var token: String?
    /// PEM certificates trusted for an `https://` server (`[server] ca-file`); nil: the system's.
    public var caFile: String?
    /// The file the token was read from, read again when the server refuses it (`Agent+Access.swift`).
    public var tokenFile: String?
    /// How long a file written without a close must be quiet before it is read (`[watch] delay`).
    public var watchDelayMilliseconds: UInt64
    /// Seconds a change-feed request waits on the server when nothing is new.
    public var pollWaitSeconds: Int
    /// Records and content bytes per modify request.
    public var batchRecords: Int
    public var batchBytes: Int
    /// The merge type stamped on a file's record.
    public var typeFor: @Sendable (String) -> String
    public var logLevel: LogLevel = .info
    /// Seconds between safety rescans of every root (`[watch] rescan`); 0 turns them off.
    public var rescanSeconds: Double = 3600
    /// Seconds between full comparisons with the server (`[agent] verify-interval`); 0 turns them off.
    public var verifySeconds: Double = 6 * 3600
    /// Config lines that are allowed but probably wrong, logged at start.
    public var warnings: [String] = []
    /// `[transfer]`: how large files move (docs/configuration.md).
    public var transfer = TransferOptions()
    /// `[merge PATTERNS]` sections, in file order: the first that matches a path settles its conflicts.
    public var mergeSections: [MergeSection] = []
    /// `[merge]`: how long merge commands may run, and the base cache's budget.
    public var mergeSettings = MergeSettings()
    /// `[observe PATH]` sections.
    public var observers: [ObserverSettings] = []
    /// The environment merge commands and observers start with (the agent's own).
    public var environment: [String: String] = [:]

    public init(roots: [RootSpec], serverURL: String? = nil, listen: String = "127.0.0.1:7071", stateDirectory: String,
                device: String, token: String? = nil, watchDelayMilliseconds: UInt64 = 50, pollWaitSeconds: Int = 300,
                batchRecords: Int = 1000, batchBytes: Int = 8 << 20,
                typeFor: @escaping @Sendable (String) -> String = { _ in Record.defaultType }) {
        self.roots = roots
        self.serverURL = serverURL
        self.listen = listen
        self.stateDirectory = stateDirectory
        self.device = device
        self.token = token
        self.watchDelayMilliseconds = watchDelayMilliseconds
        self.pollWaitSeconds = pollWaitSeconds
        self.batchRecords = batchRecords
        self.batchBytes = batchBytes
        self.typeFor = typeFor
    }

    /// The URL the agent talks to: the configured server, or the embedded one.
    public var effectiveServerURL: String {
        if let serverURL { return serverURL.hasSuffix("/") ? String(serverURL.dropLast()) : serverURL }
        var host = listen
        if host.hasPrefix("0.0.0.0:") { host = "127.0.0.1:" + host.dropFirst(8) }
        return "http://" + host
    }
}

/// `[transfer]` as the agent uses it: files above `inlineMax` go through tus.
public struct TransferOptions: Sendable, Equatable {
    public var inlineMax: Int64 = 256 << 10
    public var chunkSize: Int64 = 16 << 20
    /// Uploads at once, and downloads at once.
    public var parallel = 4
    /// Tries before a transfer is listed as failed.
    public var attempts = 10
    /// Bytes per second per direction; 0: unlimited.
    public var maxRate: Int64 = 0
    /// Which extended attributes sync (`[transfer] xattrs`); empty: none.
    public var xattrs = ["user.*"]
    public init() {}
}
