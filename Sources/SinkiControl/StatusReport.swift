import SinkiRecord
import SinkiSupport

/// What `sinkid status` shows: one document, from a running agent or read from its state database
/// when none runs. Its JSON form is the schema of docs/status.md (`docs/status.schema.json`).
public struct StatusReport: Sendable, Equatable {
    /// Raised when a field changes meaning or goes away; new fields may appear without it.
    public static let schemaVersion = 1

    public var generatedAt: Int64
    public var agent: AgentSummary
    public var server: ServerSummary
    public var roots: [RootStatus]
    public var pending: PendingSummary
    public var remote: RemoteSummary
    public var skipped: SkippedSummary
    /// Paths left out by ignore rules.
    public var ignored: Int
    public var transfers: [TransferStatus]
    public var conflicts: [ConflictEntry]
    /// Remote changes that could not be applied here yet.
    public var notApplied: NotAppliedSummary
    /// The last full comparison with the server.
    public var verify: VerifySummary
    /// The checks of this agent's copy of the server's records against the server's digests.
    public var digest: DigestSummary
    /// The current runs of sending and applying, for the whole of each.
    public var progress: ProgressSummary

    public init(generatedAt: Int64, agent: AgentSummary, server: ServerSummary, roots: [RootStatus] = [],
                pending: PendingSummary = PendingSummary(), remote: RemoteSummary = RemoteSummary(),
                skipped: SkippedSummary = SkippedSummary(), ignored: Int = 0, transfers: [TransferStatus] = [],
                conflicts: [ConflictEntry] = [], notApplied: NotAppliedSummary = NotAppliedSummary(),
                verify: VerifySummary = VerifySummary(), digest: DigestSummary = DigestSummary(), progress: ProgressSummary = ProgressSummary()) {
        self.generatedAt = generatedAt
        self.agent = agent
        self.server = server
        self.roots = roots
        self.pending = pending
        self.remote = remote
        self.skipped = skipped
        self.ignored = ignored
        self.transfers = transfers
        self.conflicts = conflicts
        self.notApplied = notApplied
        self.verify = verify
        self.digest = digest
        self.progress = progress
    }
}

/// The state of the agent or of one root, as status names it.
public enum SyncState: String, Sendable, Equatable, CaseIterable {
    case upToDate = "up-to-date"
    case scanning
    case syncing
    case paused
    case stoppedForSafety = "stopped-for-safety"
    case error
    /// No agent runs with this state folder.
    case notRunning = "not-running"

    /// As status prints it for people.
    public var words: String {
        switch self {
        case .upToDate: "up to date"
        case .scanning: "scanning"
        case .syncing: "syncing"
        case .paused: "paused"
        case .stoppedForSafety: "stopped for safety"
        case .error: "error"
        case .notRunning: "not running"
        }
    }
}

/// The agent as a whole.
public struct AgentSummary: Sendable, Equatable {
    public var running: Bool
    public var pid: Int32?
    public var version: String?
    public var device: String?
    public var startedAt: Int64?
    public var stateDirectory: String
    public var state: SyncState
    /// Why the state is what it is, when that is not obvious (paused by whom, which error).
    public var reason: String?

    public init(running: Bool, pid: Int32? = nil, version: String? = nil, device: String? = nil, startedAt: Int64? = nil,
                stateDirectory: String, state: SyncState, reason: String? = nil) {
        self.running = running
        self.pid = pid
        self.version = version
        self.device = device
        self.startedAt = startedAt
        self.stateDirectory = stateDirectory
        self.state = state
        self.reason = reason
    }
}

/// A warning or error the agent logged.
public struct ProblemNote: Sendable, Equatable {
    public var at: Int64
    /// `warning` or `error`.
    public var level: String
    public var message: String
    /// Times it was logged in a row.
    public var count: Int
    public init(at: Int64, level: String, message: String, count: Int = 1) {
        self.at = at
        self.level = level
        self.message = message
        self.count = count
    }
}

/// The sync server the agent talks to.
public struct ServerSummary: Sendable, Equatable {
    public var url: String?
    /// The agent runs the server itself (no `--server`).
    public var embedded: Bool?
    /// nil before the first contact (or with no agent running).
    public var reachable: Bool?
    /// The last answer from the server.
    public var lastContact: Int64?
    /// The last warning or error the agent logged, about the server or anything else.
    public var lastError: ProblemNote?
    /// The server's words when it refused this device's token (nothing is sent until it changes).
    public var tokenRefused: String?
    /// The server asked us to slow down (429): no request before this time.
    public var retryAt: Int64?
    /// The server refused a save for the user's quota (507): local changes wait, kept.
    public var storageFull: StorageFullNote?

    public init(url: String? = nil, embedded: Bool? = nil, reachable: Bool? = nil, lastContact: Int64? = nil, lastError: ProblemNote? = nil,
                tokenRefused: String? = nil, retryAt: Int64? = nil, storageFull: StorageFullNote? = nil) {
        self.url = url
        self.embedded = embedded
        self.reachable = reachable
        self.lastContact = lastContact
        self.lastError = lastError
        self.tokenRefused = tokenRefused
        self.retryAt = retryAt
        self.storageFull = storageFull
    }
}

/// The server answered a save `507 storage-full`: its words and figures, since when, and when the agent
/// sends again (its local changes stay queued meanwhile).
public struct StorageFullNote: Sendable, Equatable {
    public var detail: String
    /// The user's usage and quota as the server gave them; nil when it gave none.
    public var figures: StorageFigures?
    /// When the first refusal of this run of them came (nanoseconds since the epoch).
    public var since: Int64
    /// When the agent sends again.
    public var retryAt: Int64

    public init(detail: String, figures: StorageFigures?, since: Int64, retryAt: Int64) {
        self.detail = detail
        self.figures = figures
        self.since = since
        self.retryAt = retryAt
    }

    /// `uses 1.2 MiB of 1.0 MiB (1.0 MiB current, 200 KiB history); the save needs 300 KiB more`.
    public var words: String {
        guard let figures else { return detail }
        var text = "uses \(HumanUnits.bytes(figures.usedBytes))"
        if let quota = figures.quotaBytes { text += " of \(HumanUnits.bytes(quota))" }
        text += " (\(HumanUnits.bytes(figures.liveBytes)) current, \(HumanUnits.bytes(figures.historyBytes)) history)"
        if let needed = figures.neededBytes { text += "; the save needs \(HumanUnits.bytes(needed)) more" }
        return text
    }
}

/// One synced folder.
public struct RootStatus: Sendable, Equatable {
    public var name: String
    /// nil when status read the database and no config names the folder.
    public var path: String?
    /// Files (not directories) present, and their bytes, as the database last saw them.
    public var files: Int
    public var bytes: Int64
    public var state: SyncState
    public var reason: String?

    public init(name: String, path: String?, files: Int, bytes: Int64, state: SyncState, reason: String? = nil) {
        self.name = name
        self.path = path
        self.files = files
        self.bytes = bytes
        self.state = state
        self.reason = reason
    }
}

/// What kind of local change waits.
public enum ChangeKind: String, Sendable, Equatable, CaseIterable {
    /// A path the server has never had from this agent.
    case create
    case modify
    case delete
}

/// One local change the server has not accepted yet.
public struct PendingChange: Sendable, Equatable {
    public var path: String
    public var kind: ChangeKind
    public var queuedAt: Int64
    public var attempts: Int
    /// Why the server refused it; it then waits for `sinkid retry`.
    public var refused: String?

    public init(path: String, kind: ChangeKind, queuedAt: Int64, attempts: Int = 0, refused: String? = nil) {
        self.path = path
        self.kind = kind
        self.queuedAt = queuedAt
        self.attempts = attempts
        self.refused = refused
    }
}

/// Local changes not yet accepted by the server.
public struct PendingSummary: Sendable, Equatable {
    /// Every waiting change, refused ones included.
    public var count: Int
    /// Of those, the ones the server refused.
    public var refused: Int
    /// Oldest first, at most `PendingSummary.listed`; refused ones first of all.
    public var changes: [PendingChange]

    /// How many changes a report lists (the counts cover all).
    public static let listed = 100

    public init(count: Int = 0, refused: Int = 0, changes: [PendingChange] = []) {
        self.count = count
        self.refused = refused
        self.changes = changes
    }
}

/// Changes on the server not yet applied here.
public struct RemoteSummary: Sendable, Equatable {
    /// The change feed has been read to its end and applied (nil: not known, no agent running).
    public var upToDate: Bool?
    /// The feed position applied, as the server's token (`<store id>.<change tag>`).
    public var position: String?

    public init(upToDate: Bool? = nil, position: String? = nil) {
        self.upToDate = upToDate
        self.position = position
    }
}

/// Local entries that cannot be synced (names that are not UTF-8, fifos, sockets, devices).
public struct SkippedSummary: Sendable, Equatable {
    public var count: Int
    /// Record paths as far as they can be written, at most `PendingSummary.listed`.
    public var paths: [String]
    /// Why each of `paths` is skipped, in the same order (empty from an agent that did not say).
    public var reasons: [String]
    public init(count: Int = 0, paths: [String] = [], reasons: [String] = []) {
        self.count = count
        self.paths = paths
        self.reasons = reasons
    }
}

/// A file on its way up or down.
public struct TransferStatus: Sendable, Equatable {
    /// Which way the bytes go.
    public enum Direction: String, Sendable, Equatable { case upload, download }
    public var path: String
    public var direction: Direction
    public var done: Int64
    public var total: Int64
    /// Bytes per second over the last few seconds.
    public var rate: Double
    /// Why it failed, after the last attempt (then it waits for `sinkid retry`).
    public var failed: String?
    /// For a file that moves as chunks: the bytes of the chunks the other end lacked, moved so far
    /// (the rest it held already): "12 MiB of 1.0 GiB new".
    public var newBytes: Int64?

    public init(path: String, direction: Direction, done: Int64, total: Int64, rate: Double, failed: String? = nil, newBytes: Int64? = nil) {
        self.path = path
        self.direction = direction
        self.done = done
        self.total = total
        self.rate = rate
        self.failed = failed
        self.newBytes = newBytes
    }

    /// Seconds left at the current rate; nil when not moving.
    public var secondsLeft: Double? {
        guard failed == nil, rate > 0, total >= done else { return nil }
        return Double(total - done) / rate
    }
}

/// A conflict left for `sinkid resolve` by the `ask` rule.
public struct ConflictEntry: Sendable, Equatable {
    public var path: String
    /// The device whose version met ours.
    public var remoteDevice: String
    public var detectedAt: Int64
    /// This machine's version when the conflict was found.
    public var local: ConflictVersion
    /// The other device's (the latest, if more came while it waited).
    public var remote: ConflictVersion
    /// The device that found the conflict and keeps both versions aside (this one, or another).
    public var foundBy: String
    /// Recorded on the server: every device of the user lists it and may settle it.
    public var shared: Bool

    public init(path: String, remoteDevice: String, detectedAt: Int64, local: ConflictVersion? = nil, remote: ConflictVersion? = nil,
                foundBy: String? = nil, shared: Bool = false) {
        self.path = path
        self.remoteDevice = remoteDevice
        self.detectedAt = detectedAt
        self.local = local ?? ConflictVersion(device: "")
        self.remote = remote ?? ConflictVersion(device: remoteDevice)
        self.foundBy = foundBy ?? self.local.device
        self.shared = shared
    }
}

/// A remote change that could not be written here yet; it stays pending until it is.
public struct NotAppliedChange: Sendable, Equatable {
    public var path: String
    /// The kind of cause (`no-space`, `read-only`, `permission`, `busy`, `blocked`, `invalid`, …).
    public var cause: String
    /// Why, in words, with the path and the system's message.
    public var reason: String
    /// Failed attempts at this version.
    public var attempts: Int
    /// When it first failed.
    public var since: Int64
    /// When it is tried next on its own (sooner after an event that may have removed its cause).
    public var nextAttempt: Int64?

    public init(path: String, cause: String, reason: String, attempts: Int, since: Int64, nextAttempt: Int64?) {
        self.path = path
        self.cause = cause
        self.reason = reason
        self.attempts = attempts
        self.since = since
        self.nextAttempt = nextAttempt
    }

    /// Causes that pass on their own in a moment (a file being written, a merge being settled).
    public static let passing: Set<String> = ["busy", "conflict", "changed-here", "folder-gone", "source-gone", "content-missing"]

    /// Whether this needs someone to act (or at least wait longer than a moment): the state says error.
    public var needsAttention: Bool { !Self.passing.contains(cause) || attempts >= 4 }
}

/// Remote changes not applied here.
public struct NotAppliedSummary: Sendable, Equatable {
    public var count: Int
    /// At most `PendingSummary.listed`, by path.
    public var changes: [NotAppliedChange]

    public init(count: Int = 0, changes: [NotAppliedChange] = []) {
        self.count = count
        self.changes = changes
    }
}

/// The full comparison with the server (`sinkid sync --verify`, and periodic).
public struct VerifySummary: Sendable, Equatable {
    /// When the last comparison ended (nil: none yet).
    public var lastRun: Int64?
    /// `same` (nothing differed), `repaired` (differences were repaired), `failed` (it could not finish).
    public var result: String?
    /// Differences the last comparison found and repaired.
    public var repaired: Int
    /// Paths that still differed from the server after its repairs (at most `PendingSummary.listed`).
    public var differing: [String]
    /// Why it failed, or what it repaired, in words.
    public var detail: String?
    /// A comparison runs now.
    public var running: Bool
    /// When the next periodic one is due.
    public var nextRun: Int64?

    public init(lastRun: Int64? = nil, result: String? = nil, repaired: Int = 0, differing: [String] = [], detail: String? = nil,
                running: Bool = false, nextRun: Int64? = nil) {
        self.lastRun = lastRun
        self.result = result
        self.repaired = repaired
        self.differing = differing
        self.detail = detail
        self.running = running
        self.nextRun = nextRun
    }
}

/// The checks of the agent's copy of the server's records (its Remote tree) against the server's
/// folder digests, and what they repaired (docs/status.md, `digest`).
public struct DigestSummary: Sendable, Equatable {
    /// The digests matched at the position the feed was last read to.
    public var matched: Bool
    /// When they last matched.
    public var lastMatch: Int64?
    /// Paths repaired after a mismatch with the server, in all on this state folder: each a defect.
    public var repaired: Int
    /// When the last such path was repaired.
    public var lastRepairAt: Int64?
    /// Why the last check could not finish, or what it left different.
    public var failure: String?
    /// The server offers no digests (an older server).
    public var unsupported: Bool

    public init(matched: Bool = false, lastMatch: Int64? = nil, repaired: Int = 0, lastRepairAt: Int64? = nil, failure: String? = nil,
                unsupported: Bool = false) {
        self.matched = matched
        self.lastMatch = lastMatch
        self.repaired = repaired
        self.lastRepairAt = lastRepairAt
        self.failure = failure
        self.unsupported = unsupported
    }
}
