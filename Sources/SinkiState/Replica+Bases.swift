import Glibc
import SinkiMerge
import SinkiRecord
import SinkiSupport

extension Replica {
    /// Opens the base cache (`STATE/bases`) and the folder where `ask` keeps versions aside
    /// (`STATE/conflicts`), and takes the merge rules. Blocking, like everything here. Without a base
    /// cache (it could not be opened) the three-way rules go to their fallbacks.
    public func openMergeState(stateDirectory: String, baseCacheLimit: Int64, rules: MergeRules) throws(BaseCacheError) {
        self.rules = rules
        conflictsDirectory = stateDirectory + "/conflicts"
        bases = try BaseCache(directory: stateDirectory + "/bases", limit: baseCacheLimit, logger: logger.child("bases"))
    }

    /// A config reload: new rules, new record types, a new base budget (the oldest bases beyond it
    /// are dropped; a path whose rule no longer needs a base keeps none from now on).
    public func updateRules(_ rules: MergeRules, typeFor: @escaping @Sendable (String) -> String, baseCacheLimit: Int64) {
        self.rules = rules
        self.typeFor = typeFor
        bases?.setLimit(baseCacheLimit)
    }

    /// Versions in the base cache and their bytes, for status and tests.
    public var baseCacheUse: (count: Int, bytes: Int64) { (bases?.count ?? 0, bases?.totalBytes ?? 0) }

    /// Keeps the content of `record`, now the version this machine and the server share, as the
    /// base of its path's next three-way merge, when its rule needs one. The bytes come from the
    /// record, else from the file just written or pushed (checked against the record's hash).
    /// A base that cannot be kept costs a fallback later, never a sync: failures are only logged.
    func keepBase(_ record: Record, at path: LocalPath) {
        let (root, relative) = (path.root.index, path.relative)
        guard let bases, !record.deleted, record.kind == .file, rules.needsBase(record.path) else { return }
        if bases.touch(record.sha256) { return }
        guard record.size <= bases.limit else { return }
        do {
            if record.data != nil {
                try bases.put(try Self.content(of: record), sha256: record.sha256)
            } else {
                let content = try ContentReader.read(safeRoots[root], relative, keepBytes: true)
                guard content.sha256 == record.sha256, !content.unstable, let bytes = content.bytes else { return }
                try bases.put(bytes, sha256: record.sha256)
            }
        } catch {
            logger.warning("cannot keep the base of \(quoted(record.path)): \(error)")
        }
    }

    /// `keepBase` for each record an apply wrote or adopted.
    func keepBases(_ plans: [PlannedWrite], _ results: [WriteResult]) {
        guard bases != nil, rules.usesBases else { return }
        for (plan, result) in zip(plans, results) where plan.action != .delete {
            guard case .done = result else { continue }
            keepBase(plan.record, at: plan.path)
        }
    }

    /// `keepBase` for records the server accepted from this machine.
    func keepBases(_ saved: [Record]) {
        guard bases != nil, rules.usesBases else { return }
        for record in saved {
            guard let recordPath = try? RecordPath(validating: record.path), let path = locate(recordPath) else { continue }
            keepBase(record, at: path)
        }
    }
}
