import SinkiConfig
import SinkiControl
import SinkiLoop
import SinkiMerge
import SinkiRecord
import SinkiState
import SinkiSupport
import SinkiWatch

/// The agent's part of the merge rules (issue 5): the engine, the observers, and which paths are
/// being settled. A config reload replaces the engine and the observers.
struct AgentMerge {
    var engine: MergeEngine
    var observers: ObserverHub
    var observing: Bool
    /// Paths whose conflict is being decided, with how many settlements hold each: not pushed
    /// meanwhile (the push would only be refused as stale and found again).
    var settling: [String: Int] = [:]
    /// The remote versions being settled (`path@tag`): the same conflict found twice at once (a pull
    /// and a refused push meet the same record) is decided once.
    var deciding: Set<String> = []

    init(_ configuration: AgentConfiguration, logger: Logger) {
        engine = MergeEngine(settings: configuration.mergeSettings, workDirectory: configuration.stateDirectory + "/merge",
                             environment: configuration.environment, logger: logger.child("merge"))
        observers = ObserverHub(observers: configuration.observers, environment: configuration.environment, logger: logger.child("observe"))
        observing = !configuration.observers.isEmpty
    }

    var settlingPaths: Set<String> { Set(settling.keys) }
}

extension Agent {
    /// Readies the replica's base cache and conflicts folder and clears what a crash left of merge
    /// commands' folders; off the loop. Problems are logged: the rules then fall back, sync goes on.
    func openMergeState() async {
        guard let replica else { return }
        let engine = merge.engine
        do { try await Blocking.run { try engine.removeLeftovers() } } catch {
            logger.warning("cannot clear leftover merge folders in \(engine.workDirectory): \(error)")
        }
        do {
            try await replica.openMergeState(stateDirectory: configuration.stateDirectory, baseCacheLimit: configuration.mergeSettings.baseCache,
                                             rules: MergeRules(sections: configuration.mergeSections))
        } catch {
            logger.error("\(error); three-way merge rules will use their fallback")
        }
    }

    /// Settles conflicts (from an apply, or pushes refused as stale): each by its path's rule through
    /// the engine, carried out by the replica. A conflict whose local file changes meanwhile is looked
    /// at again with the new version; remote content not in the record is fetched first.
    func settleConflicts(_ conflicts: [Conflict]) async throws {
        guard let replica else { return }
        var todo: [Conflict] = []
        var keys: [String] = []
        for conflict in conflicts {
            let key = conflict.remote.path + "@\(conflict.remote.changeTag)"
            if merge.deciding.insert(key).inserted {
                todo.append(conflict)
                keys.append(key)
            }
        }
        guard !todo.isEmpty else { return }
        let held = todo.map(\.remote.path)
        for path in held { merge.settling[path, default: 0] += 1 }
        defer {
            for path in held {
                let left = (merge.settling[path] ?? 1) - 1
                merge.settling[path] = left > 0 ? left : nil
            }
            merge.deciding.subtract(keys)
            pumpPush()
        }
        var rounds = 0
        while !todo.isEmpty {
            rounds += 1
            if rounds > 4 {
                logger.warning("\(todo.count) conflict(s) kept changing while being settled; they are settled when next found")
                return
            }
            let prepared = try await replica.prepareConflicts(todo)
            try await noteApplied(prepared.report)
            var decided: [(PreparedConflict, MergeOutcome)] = []
            for item in prepared.ready {
                let outcome: MergeOutcome
                if item.waiting {
                    outcome = MergeOutcome(resolution: .ask, decidedBy: .ask,
                                           summary: "already waits for sinkid resolve; the new version from \(item.remote.device) replaces the one kept aside")
                } else {
                    outcome = await merge.engine.resolve(path: item.path, policy: item.policy, local: item.local, remote: item.remoteVersion,
                                                         base: item.base)
                }
                logger.info("conflict on \(quoted(item.path.string)) with \(item.remote.device): \(outcome.summary)")
                decided.append((item, outcome))
            }
            let settled = try await replica.carryOut(decided)
            try await noteApplied(settled.report)
            todo = prepared.again + settled.again
            if let client {
                for record in prepared.report.needContent {
                    if let full = try await client.record(at: record.path), let local = try await replica.knownFile(record.path) {
                        todo.append(Conflict(local: local, remote: full))
                    }
                }
            }
        }
    }

    /// Tells observers and `sinkid watch` of remote changes just applied, and looks at what an apply
    /// found to look at (entries in folders it made, roots whose ignore rules changed).
    func noteApplied(_ report: ApplyReport) async throws {
        guard let replica else { return }
        publishApplied(report.applied)
        var batch = WatchBatch()
        batch.changes = await replica.takeRescans().map { WatchBatch.Change(root: $0, relative: "", recursive: true) }
            + report.toCheck.map { WatchBatch.Change(root: $0.root.index, relative: $0.relative, recursive: true) }
        if !batch.changes.isEmpty { handleWatch(batch) }
        if !report.conflicts.isEmpty { try await settleConflicts(report.conflicts) }
    }

    /// Remote changes just written to disk (never this machine's own edits): each observer whose
    /// path covers one gets it queued, each `sinkid watch` client its line. Neither waits for anyone.
    func publishApplied(_ applied: [AppliedChange]) {
        guard !applied.isEmpty else { return }
        logger.debug("applied \(applied.count) remote change(s)")
        let server = control.server
        let watching = server.map { $0.assumeIsolated { $0.watchers } } ?? 0
        guard merge.observing || watching > 0 else { return }
        let now = Clock.now()
        var events: [WatchEvent] = []
        for change in applied {
            guard let path = try? RecordPath(validating: change.path), let event = ObservedChange.Event(rawValue: change.event.rawValue) else { continue }
            let observed = ObservedChange(path: path, event: event, localPath: change.localPath, type: change.type, time: now)
            if merge.observing { merge.observers.notify(observed) }
            if watching > 0 { events.append(WatchEvent(path: change.path, line: Array(WatchLine.render(observed).utf8))) }
        }
        if let server, !events.isEmpty { server.assumeIsolated { $0.publish(events) } }
    }

    /// A reload with merge rules, `[merge]` settings or observers changed: they take effect now.
    /// Observers already queued on the old hub still run.
    func reloadMerge(_ new: AgentConfiguration) async {
        let fresh = AgentMerge(new, logger: logger)
        merge.engine = fresh.engine
        merge.observers = fresh.observers
        merge.observing = fresh.observing
        await replica?.updateRules(MergeRules(sections: new.mergeSections), typeFor: new.typeFor, baseCacheLimit: new.mergeSettings.baseCache)
    }
}
