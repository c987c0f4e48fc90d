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
    /// Paths whose conflict the engine is deciding now, with how many decisions hold each.
    var settling: [String: Int] = [:]

    init(_ configuration: AgentConfiguration, logger: Logger) {
        engine = MergeEngine(settings: configuration.mergeSettings, workDirectory: configuration.stateDirectory + "/merge",
                             environment: configuration.environment, logger: logger.child("merge"))
        observers = ObserverHub(observers: configuration.observers, environment: configuration.environment, logger: logger.child("observe"))
        observing = !configuration.observers.isEmpty
    }

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

    /// Remote changes just written to disk (never this machine's own edits): each observer whose
    /// path covers one gets it queued, each `sinkid watch` client its line. Neither waits for anyone.
    func publishApplied(_ applied: [AppliedChange]) {
        guard !applied.isEmpty else { return }
        if pullRun == nil { pullRun = PullProgress(startedAt: Clock.monotonic()) }
        pullRun?.took(applied.count, bytes: applied.reduce(0) { $0 + $1.bytes })
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
