import SinkiConfig

/// What to do with a conflicting path. "Keep a copy" means: keep that version beside the path as
/// `name.sync-conflict-YYYYMMDD-HHMMSS-DEVICE.ext` (`ConflictName`, DEVICE = that version's writer),
/// and sync the copy too.
public enum MergeResolution: Sendable, Equatable {
    /// The remote version takes the path as it is; nothing new is pushed for it.
    case takeRemote(keepLocalCopy: Bool)
    /// The local version stays, and is pushed as a new version based on the remote one.
    case keepLocal(keepRemoteCopy: Bool)
    /// These bytes take the path, and are pushed as a new version based on the remote one.
    case merged([UInt8])
    /// Both versions are kept aside and nothing is overwritten, until `sinkid resolve`.
    case ask
}

/// The engine's answer for one conflict: the resolution, which rule gave it, and why.
public struct MergeOutcome: Sendable, Equatable {
    public var resolution: MergeResolution
    /// The rule that decided: the policy's rule, or its fallback when the rule could not.
    public var decidedBy: MergeRule
    /// Why the policy's rule did not decide (nil when it did).
    public var fallbackReason: String?
    /// What the rule's command did, for `compare` and `command`.
    public var command: CommandResult?
    /// One line for the log: which rule did what, and why.
    public var summary: String

    public init(resolution: MergeResolution, decidedBy: MergeRule, fallbackReason: String? = nil, command: CommandResult? = nil,
                summary: String) {
        self.resolution = resolution
        self.decidedBy = decidedBy
        self.fallbackReason = fallbackReason
        self.command = command
        self.summary = summary
    }

    /// The observer event for the outcome once applied here: `merged` for merged bytes, `conflict`
    /// when a copy is kept or the user is asked, else `changed` (`deleted` when the remote version
    /// taken is a delete). nil when the local version simply stays: nothing remote was applied.
    public func event(remoteDeleted: Bool) -> ObservedChange.Event? {
        switch resolution {
        case .merged: return .merged
        case .ask, .takeRemote(keepLocalCopy: true), .keepLocal(keepRemoteCopy: true): return .conflict
        case .takeRemote(keepLocalCopy: false): return remoteDeleted ? .deleted : .changed
        case .keepLocal(keepRemoteCopy: false): return nil
        }
    }
}

extension MergeRule {
    /// Rules that merge against the last shared version, so the agent keeps it in the `BaseCache`.
    public var needsBase: Bool { self == .union || self == .json || self == .command }
}
