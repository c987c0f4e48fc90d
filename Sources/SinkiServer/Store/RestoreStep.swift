import SinkiRecord
import SinkiSupport

/// What a restore reads besides what a save does, inside the same write transaction.
protocol HistoryTransaction: SaveTransaction {
    /// Version `version` of `path` (its current record or a kept one) with its content; nil when none.
    func version(path: String, version: Int64) throws -> VersionEntry?
    /// The live version each path at or below `prefix` held at `at`, in bytewise path order, without
    /// content.
    func held(prefix: String, at: Int64) throws -> [VersionEntry]
    /// The live current records at or below `prefix`, in bytewise path order, without content.
    func currentRecords(prefix: String) throws -> [Record]
}

/// A restore as a batch of ordinary saves (issue 23, item 3): it decides which paths change and to
/// what, and `SaveStep` saves them, based on the current tags, so every agent receives them through its
/// feed like a change made on another device and settles them by its merge rules. One place for both
/// stores; the store runs it in its write transaction, so what it reads cannot change before it saves.
enum RestoreStep {
    static func run(_ request: RestoreRequest, user: String, device: String, in transaction: some HistoryTransaction,
                    now: Int64) throws -> [RestoreChange] {
        var items: [(record: Record, action: RestoreChange.Action, from: Int64)] = []
        switch request.target {
        case let .version(path, version, to):
            guard let entry = try transaction.version(path: path, version: version) else {
                throw RestoreError.noSuchVersion(path: path, version: version)
            }
            let target = to ?? path
            let current = try transaction.current(path: target)
            if entry.record.deleted {
                guard to == nil else { throw RestoreError.deletedVersion(path: path, version: version) }
                // A delete made current again: the path's record goes (into history).
                guard let current, !current.deleted else { return [] }
                items.append((tombstone(of: try transaction.record(tag: current.tag), device: device, now: now), .delete, current.tag))
            } else {
                if let current, try holdsAlready(current, entry.record, in: transaction) { return [] }
                items.append((restored(entry.record, at: target, replacing: current?.tag ?? 0, device: device), .restore, version))
            }
        case let .folder(folder, at):
            let then = try transaction.held(prefix: folder, at: at)
            let current = try transaction.currentRecords(prefix: folder)
            var heldThen: [PathKey: VersionEntry] = [:]
            for entry in then { heldThen[PathKey(entry.record.path)] = entry }
            var currentNow: [PathKey: Record] = [:]
            for record in current { currentNow[PathKey(record.path)] = record }
            // What was made since goes, deepest first (bytewise descending puts a folder after what is in it).
            for record in current.reversed() where heldThen[PathKey(record.path)] == nil {
                items.append((tombstone(of: record, device: device, now: now), .delete, record.changeTag))
            }
            // What changed or went since comes back, a folder before what is in it.
            for entry in then {
                let path = entry.record.path
                if let record = currentNow[PathKey(path)], sameVersion(record, entry.record) { continue }
                guard let full = try transaction.version(path: path, version: entry.version) else {
                    throw RecordStoreError(path: path, message: "bug: version \(entry.version) of \(path) vanished inside a transaction")
                }
                let base = try transaction.current(path: path)?.tag ?? 0
                items.append((restored(full.record, at: path, replacing: base, device: device), .restore, entry.version))
            }
        }
        if items.isEmpty { return [] }
        let checked = try items.map { CheckedRecord($0.record, path: try RecordPath(validating: $0.record.path)) }
        let result = try SaveStep.apply(checked, user: user, in: transaction, now: now)
        return try zip(items, result.outcomes).map { item, outcome in
            guard case let .saved(saved) = outcome else {
                throw RecordStoreError(path: item.record.path, message: "bug: a restore's save inside its own transaction answered \(outcome)")
            }
            return RestoreChange(path: saved.path, action: item.action, from: item.from, record: saved)
        }
    }

    /// Whether the current record at a path is the version already (same content, type, mode and
    /// extended attributes).
    private static func holdsAlready(_ current: CurrentVersion, _ version: Record, in transaction: some HistoryTransaction) throws -> Bool {
        guard !current.deleted, current.sha256 == version.sha256 else { return false }
        return sameVersion(try transaction.record(tag: current.tag), version)
    }

    private static func sameVersion(_ current: Record, _ version: Record) -> Bool {
        current.changeTag == version.changeTag
            || (!current.deleted && !version.deleted && current.sha256 == version.sha256 && current.type == version.type
                && current.mode == version.mode && current.size == version.size && current.xattrs == version.xattrs)
    }

    /// `version`'s content, type, mode and extended attributes as a new save at `path` by `device`.
    private static func restored(_ version: Record, at path: String, replacing base: Int64, device: String) -> Record {
        var record = Record(path: path, type: version.type, data: version.data, asset: version.asset, deleted: false, changeTag: 0, baseTag: base,
                            size: version.size, sha256: version.sha256, mode: version.mode, modifiedAt: version.modifiedAt, device: device)
        record.xattrs = version.xattrs
        return record
    }

    /// The delete of the current record `current` (its type kept: a folder's delete is a folder's) by
    /// `device`.
    private static func tombstone(of current: Record, device: String, now: Int64) -> Record {
        Record(path: current.path, type: current.type, deleted: true, changeTag: 0, baseTag: current.changeTag, mode: current.mode,
               modifiedAt: now, device: device)
    }
}
