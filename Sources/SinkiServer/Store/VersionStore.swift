import SinkiRecord
import SinkiSupport

/// One page of versions (`VersionStore.versions` newest first, `VersionStore.folder` by path).
public struct VersionList: Sendable, Equatable {
    public var versions: [VersionEntry]
    public var more: Bool

    public init(versions: [VersionEntry], more: Bool) {
        self.versions = versions
        self.more = more
    }
}

/// What one pass of `expireVersions` did.
public struct VersionExpiry: Sendable, Equatable {
    public var removed: Int
    /// Whether more versions were due than the pass removed.
    public var more: Bool

    public init(removed: Int, more: Bool) {
        self.removed = removed
        self.more = more
    }
}

/// A save that would take its user past their quota: nothing of it was saved.
public struct StorageFull: Error, Sendable, Equatable, CustomStringConvertible {
    public var user: String
    /// The user's usage before the save, their quota, and the growth the save would have made.
    public var figures: StorageFigures

    public var description: String {
        "\(quoted(user)) would use \(HumanUnits.bytes(figures.usedBytes + (figures.neededBytes ?? 0))) of a quota of "
            + "\(HumanUnits.bytes(figures.quotaBytes ?? 0)) (now \(HumanUnits.bytes(figures.liveBytes)) current, "
            + "\(HumanUnits.bytes(figures.historyBytes)) history; the save needs \(HumanUnits.bytes(figures.neededBytes ?? 0)) more)"
    }

    /// The problem a route answers with.
    public var problem: Problem {
        var problem = Problem(.storageFull, detail: "server storage full: " + description + "; delete files, or ask for a larger quota "
                              + "(history is freed as its versions expire)")
        problem.storage = figures
        return problem
    }
}

/// What a store does with what a save replaces, and how much a user may hold: the server's settings
/// (`sinkid serve --history-days`, `--quota`), given to the store when it is opened.
public struct StorePolicy: Sendable, Equatable {
    /// Whether a save keeps the record it replaces (history on).
    public var keepsHistory: Bool
    /// The quota of a user who has none of their own (`sinkid serve user quota`), in bytes; nil: none.
    public var defaultQuota: Int64?

    public init(keepsHistory: Bool = true, defaultQuota: Int64? = nil) {
        self.keepsHistory = keepsHistory
        self.defaultQuota = defaultQuota
    }
}

/// Why a restore could not be done.
public enum RestoreError: Error, Sendable, Equatable {
    /// The path has no such version (never had, or it expired).
    case noSuchVersion(path: String, version: Int64)
    /// The version is a delete, which `to` cannot copy.
    case deletedVersion(path: String, version: Int64)
}

/// Every version of every path, kept beside the records (issue 23; docs/server.md, "History"). A save
/// that replaces a record keeps the record it replaces, deletes included, with the time it was replaced
/// (`supersededAt`); versions stay until they were replaced longer ago than the history window, and the
/// chunks, blobs and inline data they name stay with them. The versions of a path are its current record
/// and its kept ones, ordered by change tag (the version's number); at any moment `t` the path held the
/// one saved at or before `t` and replaced after it.
///
/// Each user's usage is kept in the same transactions: the bytes their current records hold (inline data
/// as stored, blobs, and each chunk once) and the bytes kept only for history, checked against their
/// quota by every save (`StorageFull`).
public protocol VersionStore: Sendable {
    /// What it keeps and how much a user may hold.
    var policy: StorePolicy { get }

    /// The versions of `path` (exactly that path), newest first, below version `before` when given;
    /// without content.
    func versions(user: String, path: String, before: Int64?, limit: Int) throws -> VersionList

    /// Version `version` of `path` with its content (inline data, or the asset with its manifest); nil
    /// when the path has no such version.
    func version(user: String, path: String, version: Int64) throws -> VersionEntry?

    /// What every path at `prefix` or below held at `at` (nanoseconds since the epoch): the live version
    /// of each, in bytewise path order after `after`; without content.
    func folder(user: String, prefix: String, at: Int64, after: String?, limit: Int) throws -> VersionList

    /// Makes a version current again, or a folder what it was at a moment, as new versions saved in one
    /// transaction by `device` (its base tags the current ones, so every agent takes them as a change from
    /// elsewhere), and returns what changed; with `dryRun`, what would change, nothing saved. Throws
    /// `RestoreError` and `StorageFull`.
    func restore(user: String, _ request: RestoreRequest, device: String) throws -> [RestoreChange]

    /// Removes up to `limit` kept versions replaced before `cutoff` (nanoseconds since the epoch), every
    /// user's, oldest first, with what they held (docs/server.md, "History").
    func expireVersions(supersededBefore cutoff: Int64, limit: Int) throws -> VersionExpiry

    /// The user's usage and quota (their own, else the policy's).
    func usage(user: String) throws -> StorageFigures

    /// Sets the user's quota in bytes (nil: none). Throws `AccountError.unknownUser` for a user the store
    /// does not have.
    func setQuota(user: String, bytes: Int64?) throws
}
