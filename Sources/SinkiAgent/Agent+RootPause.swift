import SinkiControl
import SinkiRecord
import SinkiState
import SinkiSupport

/// `sinkid pause ROOT` and `sinkid resume ROOT`: one root's changes are still observed (its trees keep
/// up with the disk and the server) but none is sent or applied, so the other roots go on.
extension Agent {
    /// The configured roots paused alone, by name, in the config's order.
    var pausedRootNames: [String] {
        configuration.roots.map(\.name).filter { control.pausedRoots[$0] != nil }
    }

    /// Roots the planner leaves alone: stopped for safety or paused.
    var heldRoots: Set<RootID> {
        var held = Set(control.safetyStops.keys)
        for (index, root) in configuration.roots.enumerated() where control.pausedRoots[root.name] != nil { held.insert(RootID(index)) }
        return held
    }

    /// The root `text` names: its name, or its folder as an absolute path.
    func configuredRoot(_ text: String) throws(ControlError) -> (id: RootID, name: String) {
        for (index, root) in configuration.roots.enumerated() where root.name == text || root.path == text {
            return (RootID(index), root.name)
        }
        let names = configuration.roots.map(\.name).joined(separator: ", ")
        throw ControlError(.notFound, "no root \(quoted(text)) is synced here (roots: \(names))")
    }

    func pauseRoot(_ text: String) async throws(ControlError) -> ControlAck {
        let name = try configuredRoot(text).name
        if let since = control.pausedRoots[name] {
            return ControlAck("\(name) is already paused since \(Clock.iso8601(since)); sinkid resume \(name) to go on")
        }
        var paused = control.pausedRoots
        paused[name] = Clock.now()
        do { try await replica?.setPausedRoots(paused) } catch {
            return ControlAck("cannot keep the pause of \(name) in the state database: \(error); not paused")
        }
        control.pausedRoots = paused
        // Each keeps where it stands, to go on after resume.
        for (path, task) in transfers.uploads where PathText.isWithin(path, name) { task.cancel() }
        logger.info("paused \(name) (sinkid pause \(name)): its changes are neither sent nor applied until sinkid resume \(name), also after a restart")
        control.notifier?.status(serviceStatus)
        return ControlAck("paused \(name): its local changes are still noted, but nothing in it is sent or applied until sinkid resume \(name) (also after a restart); the other roots go on")
    }

    func resumeRoot(_ text: String) async throws(ControlError) -> ControlAck {
        let name = try configuredRoot(text).name
        guard control.pausedRoots[name] != nil else {
            return ControlAck(control.paused ? "\(name) is not paused alone; the agent is (sinkid resume)" : "\(name) is not paused; nothing to resume")
        }
        var left = control.pausedRoots
        left[name] = nil
        do { try await replica?.setPausedRoots(left) } catch {
            return ControlAck("cannot clear the pause of \(name) in the state database: \(error); still paused")
        }
        control.pausedRoots = left
        logger.info("resumed \(name) (sinkid resume \(name))")
        pumpSync()
        control.notifier?.status(serviceStatus)
        return ControlAck("resumed \(name)" + (control.paused ? "; the agent as a whole is still paused (sinkid resume)" : ""))
    }
}
