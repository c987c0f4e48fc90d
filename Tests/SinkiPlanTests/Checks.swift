import SinkiPlan
import SinkiRecord

extension World {
    /// The end state's checks; the first broken one, or nil.
    func brokenInvariant() -> String? {
        for id in paths.indices {
            let path = paths[id]
            guard path.root == simRoot else { return "\(path) is outside the root" }
            let entries = entries(id)
            if !entries.isSynced {
                let parent = parentOf[id] >= 0 ? "; parent \(paths[parentOf[id]]): \(describeEntries(parentOf[id]))" : ""
                return "\(path) is not in sync: \(describeEntries(id))\(parent)"
            }
            let plan = Planner.plan(state(id))
            if plan != .nothing { return "\(path) still plans \(plan)" }
            if local[id]?.node != disk[id]?.node { return "\(path): Local says \(describe(local[id]?.node)), the disk holds \(describe(disk[id]?.node))" }
            let stored = server[id]?.remoteEntry ?? .absent
            let read = remote[id] ?? .absent
            if stored.tag != read.tag || stored.node != read.node {
                return "\(path): Remote says \(describe(remote[id])), the server holds \(describe(server[id]?.remoteEntry))"
            }
            if disk[id] != nil, !diskParentIsFolder(id) { return "\(path) is on disk outside a folder" }
        }
        if let lost = owed.firstLost(in: disk) { return "version \(lost) was lost" }
        if let (content, place) = owed.firstResurrected(in: disk) { return "version \(content) came back at \(paths[place])" }
        return nil
    }

    func describeEntries(_ id: Int) -> String {
        "remote \(describe(remote[id])), local \(describe(local[id]?.node)), synced \(describe(synced[id])), plans \(Planner.plan(state(id)))"
    }

    func describe(_ node: Node?) -> String { node.map { "\($0)" } ?? "nothing" }
    func describe(_ entry: RemoteEntry?) -> String { entry.map { "\($0.tag) \(describe($0.node))" } ?? "nothing" }
    func describe(_ entry: SyncedEntry?) -> String { entry.map { "\($0.tag) \(describe($0.node))" } ?? "nothing" }
}
