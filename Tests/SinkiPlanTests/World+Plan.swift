import SinkiPlan
import SinkiRecord

extension World {
    /// What the agent will hand the planner for one path, gathered from the three trees.
    func state(_ id: Int) -> PathState {
        let entries = entries(id)
        let parent = parentOf[id] >= 0 ? self.entries(parentOf[id]) : nil
        var below = Below.nothing
        // Every path, whatever it is now: the server may hold things below a tombstone or a file.
        for other in paths.indices where isBelow(other, id) { below.add(self.entries(other)) }
        let remoteSource = remote[id]?.movedFrom.flatMap { index[$0] }.map { self.entries($0) }
        var localSource: PathEntries?
        if let node = local[id]?.node, !node.isFolder, synced[id]?.node != node {
            if let source = paths.indices.first(where: { local[$0] == nil && synced[$0]?.node == node && $0 != id }) {
                localSource = self.entries(source)
            }
        }
        return PathState(entries: entries, parent: parent, below: below, remoteMoveSource: remoteSource,
                         localMoveSource: localSource, rule: rule(of: id))
    }

    /// Every path some tree knows of.
    func knownPaths() -> [Int] {
        paths.indices.filter { remote[$0] != nil || local[$0] != nil || synced[$0] != nil }
    }

    /// The first operation with work in it, looking at the known paths from a random one on, so the
    /// order in which paths are served varies as it will with a real scheduler.
    func nextOperation(using random: inout SeededRandom) -> (Int, Operation)? {
        let known = knownPaths()
        guard !known.isEmpty else { return nil }
        let start = random.below(known.count)
        for step in 0..<known.count {
            let id = known[(start + step) % known.count]
            let operation = Planner.plan(state(id))
            if operation.isWork { return (id, operation) }
        }
        return nil
    }
}
