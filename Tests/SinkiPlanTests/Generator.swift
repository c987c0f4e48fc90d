import SinkiPlan
import SinkiRecord

/// Random events for a world: the user's edits here, other devices' saves at the server, and the
/// agent's partial views of both (a page of the feed, one watcher event).
extension World {
    func randomPath(_ random: inout SeededRandom) -> Int {
        // Shallow paths more often: they hold the deeper ones, so their changes reach further.
        let depth = random.below(10) < 5 ? 1 : (random.below(2) == 0 ? 2 : 3)
        let candidates = basePaths.indices.filter { basePaths[$0].depth == depth }
        return candidates[random.below(candidates.count)]
    }

    func userEvent(_ random: inout SeededRandom) {
        let target = randomPath(&random)
        switch random.below(100) {
        case ..<37: userWrite(target)
        case ..<41: userChmod(target, random: &random)
        case ..<45: userSetXattrs(target, random: &random)
        case ..<60: userMakeFolder(target)
        case ..<75: userDelete(target)
        case ..<95: userRename(target, to: randomPath(&random))
        default: userWrite(target, symlink: true)
        }
    }

    func otherEvent(_ random: inout SeededRandom) {
        let target = randomPath(&random)
        switch random.below(100) {
        case ..<37: otherWrite(target)
        case ..<41: otherChmod(target, random: &random)
        case ..<45: otherSetXattrs(target, random: &random)
        case ..<60: otherMakeFolder(target)
        case ..<78: otherDelete(target)
        case ..<92: otherRename(target, to: randomPath(&random))
        case ..<95: otherCopy(target, to: randomPath(&random))
        default: otherWrite(target, symlink: true)
        }
    }

    /// The agent's partial look at the world: a short page of the feed, or one path observed.
    func agentLook(_ random: inout SeededRandom) {
        if random.chance(50) {
            readFeed(limit: 1 + random.below(3))
        } else {
            let known = paths.indices.filter { disk[$0] != nil || local[$0] != nil }
            if !known.isEmpty { observe(known[random.below(known.count)]) }
        }
    }

    /// A world in sync: a random tree made at the server by another device, on disk and in all three
    /// trees alike.
    func startInSync(_ random: inout SeededRandom) {
        for _ in 0..<random.below(9) {
            let target = randomPath(&random)
            if random.chance(70) { otherWrite(target) } else { otherMakeFolder(target) }
        }
        readFeed()
        for id in paths.indices {
            disk[id] = server[id].flatMap { record in record.node.map { DiskItem(node: $0, modifiedAt: record.modifiedAt) } }
            synced[id] = remote[id].map { SyncedEntry($0) }
        }
        observeAll()
    }

    static func randomRules(_ random: inout SeededRandom) -> [MergeRule] {
        (0..<3).map { _ in
            switch random.below(7) {
            case 0: return .newest(keepLoser: true)
            case 1: return .newest(keepLoser: false)
            case 2: return .local(keepLoser: random.chance(50))
            case 3: return .remote(keepLoser: random.chance(50))
            case 4: return .engine
            default: return .keepBoth
            }
        }
    }
}
