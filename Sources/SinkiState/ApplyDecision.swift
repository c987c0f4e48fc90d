import SinkiRecord
import SinkiSupport

/// What is known about one remote record and its path here, gathered before deciding: the files
/// row and the disk as they are now (a change on disk the watcher has not reported yet already taken
/// in), and the facts about the outbox and the content that the decision needs.
struct ApplyFacts: Sendable {
    var record: Record
    /// Where the record lands; nil when its root is not synced here.
    var path: LocalPath?
    /// Why the record's path cannot be a path here at all (the safety floor), if it cannot.
    var invalid: String?
    /// Why the path cannot be reached (a symlink on the way, a file where a folder should be).
    var blocked: ApplyFailure?
    var ignored = false
    var row: KnownFile?
    /// What is at the path now; nil: nothing.
    var disk: FileStat?
    /// Another program is writing the file right now.
    var busy = false
    /// A local change waits in the outbox.
    var queued = false
    /// The record is this agent's own save whose answer was lost.
    var ownPush = false
    /// The content can be written now: inline, empty, or a checked download.
    var contentHere = false
    /// Why the content could not be fetched (its download failed after its last attempt).
    var contentFailure: ApplyFailure?
    /// A local path, unchanged and settled, whose content the record moves here.
    var renameSource: LocalPath?
    /// The record moves here a path whose same content was deleted here and not yet sent: the delete
    /// follows the rename (it is this path's delete now).
    var movedSourceDeletedHere = false
}

/// What to do with one remote record: a value, decided by `ApplyDecision.decide` alone.
enum ApplyDecision: Sendable, Equatable {
    /// Already here (this version or a newer one), or not a path synced here.
    case skip
    /// The path is ignored here: the record stays on the server.
    case ignored
    /// Cannot be applied now (or ever, for an invalid path): kept as not applied.
    case hold(ApplyFailure)
    /// The same content is already here: agree without writing.
    case adopt
    /// This agent's own save coming back: it is the base now, the local change stays queued.
    case rebase
    /// A local change the server has not accepted meets this version: for the merge rules.
    case conflict
    /// The content must be fetched first.
    case fetchContent
    /// Write to disk.
    case write(PlannedWrite.Action)
    /// A rename elsewhere of what was deleted here: recorded as this path's version, deleted here, and
    /// its tombstone queued.
    case followLocalDelete

    /// Decides for one record. Pure: everything it looks at is in `facts`.
    static func decide(_ facts: ApplyFacts) -> ApplyDecision {
        let record = facts.record
        if let invalid = facts.invalid { return .hold(ApplyFailure(.invalid, invalid)) }
        guard facts.path != nil else { return .skip }
        if facts.ignored { return .ignored }
        if let row = facts.row, row.holds(record) { return .skip }
        if let blocked = facts.blocked { return .hold(blocked) }
        if facts.busy {
            return .hold(ApplyFailure(.busy, "another program is writing the file here; applied once it is closed"))
        }
        if facts.queued, let local = facts.row {
            if local.sameContent(as: record) { return .adopt }
            if facts.ownPush { return .rebase }
            return .conflict
        }
        if record.deleted { return .write(.delete) }
        if facts.disk == nil, facts.movedSourceDeletedHere { return .followLocalDelete }
        if facts.disk == nil, facts.renameSource != nil { return .write(.rename) }
        switch record.kind {
        case .directory:
            return .write(.mkdir)
        case .file, .symlink:
            if let row = facts.row, row.present, facts.disk != nil, row.kind == record.kind, !record.sha256.isEmpty, row.sha256 == record.sha256 {
                // Same content already here (both sides made it): agree without writing.
                return .adopt
            }
            if !facts.contentHere { return facts.contentFailure.map { .hold($0) } ?? .fetchContent }
            return .write(record.kind == .symlink ? .symlink : .write)
        }
    }
}

extension KnownFile {
    /// Whether this row already stands for `record`'s version or a newer one. At the same changeTag
    /// the content must agree too: a row that disagrees with the server about its own version (which a
    /// full comparison can find) is not taken as applied.
    func holds(_ record: Record) -> Bool {
        guard record.changeTag > 0 else { return false }
        if tag > record.changeTag { return true }
        guard tag == record.changeTag else { return false }
        if syncedDeleted != record.deleted { return false }
        return record.deleted || record.kind == .directory || syncedSHA256 == record.sha256
    }

    /// Whether the row's local view and a remote record hold the same thing.
    func sameContent(as remote: Record) -> Bool {
        if !present { return remote.deleted }
        if remote.deleted { return false }
        if kind != remote.kind { return false }
        return kind == .directory || sha256 == remote.sha256
    }
}
