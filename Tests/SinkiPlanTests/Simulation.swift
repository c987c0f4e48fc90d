import SinkiPlan
import SinkiRecord

/// One seeded case: a world, a random history with the agent's steps among it, then the agent alone
/// until nothing is left to do; the end state must pass `brokenInvariant`.
enum Simulation {
    /// How many injected failures a case may have once the history is over: enough to hit every
    /// operation, few enough that the end is always reached.
    static let quietFaults = 40

    /// Runs case `seed`; the reason it failed, or nil.
    static func run(seed: UInt64, tracing: Bool = false) -> (failure: String?, trace: [String], completed: [Int]) {
        var random = SeededRandom(seed: seed)
        let world = World(rules: World.randomRules(&random), tracing: tracing)
        world.startInSync(&random)
        // A third of the cases are random Remote/Local/Synced triples: both sides move and the agent
        // reads only part of it, without a step in between; the rest interleave the agent's steps.
        let triples = seed % 3 == 0
        if triples {
            // An agent that never agreed on a path cannot tell a delete here from a create there: a
            // removed version coming back there is right, and not checked.
            for id in world.paths.indices where random.chance(10) {
                world.synced[id] = nil
                world.owed.unchecked.insert(id)
            }
        }
        for _ in 0..<random.below(24) {
            switch random.below(100) {
            case ..<30: world.userEvent(&random)
            case ..<55: world.otherEvent(&random)
            case ..<72: world.agentLook(&random)
            default:
                if triples { world.agentLook(&random); continue }
                if let failure = step(world, &random, faults: true, interfere: true) { return (failure, world.trace ?? [], world.completed) }
            }
        }
        world.readFeed()
        world.observeAll()
        // Termination, bounded: each path needs a few operations (a conflict: aside, down, up).
        let bound = 8 * world.knownPaths().count + 8
        var done = 0, attempts = 0, faults = 0
        while true {
            world.readFeed()
            world.observeAll()
            guard let (_, operation) = world.nextOperation(using: &random) else { break }
            attempts += 1
            if done > bound || attempts > 3 * bound + quietFaults {
                return ("no fixed point after \(done) operations (\(attempts) tried, bound \(bound)); last: \(operation)", world.trace ?? [], world.completed)
            }
            let fault = faults < quietFaults ? randomFault(&random) : .none
            if fault != .none { faults += 1 }
            world.note("quiet: \(operation) fault \(fault)")
            switch world.execute(operation, fault: fault) {
            case .done: done += 1
            case let .failed(why):
                if why.hasPrefix("bug") { return (why, world.trace ?? [], world.completed) }
                world.note("  failed: \(why)")
            }
        }
        return (world.brokenInvariant(), world.trace ?? [], world.completed)
    }

    /// One agent step amid the history: plan, maybe let the world move, then execute.
    private static func step(_ world: World, _ random: inout SeededRandom, faults: Bool, interfere: Bool) -> String? {
        guard let (_, operation) = world.nextOperation(using: &random) else { return nil }
        if interfere, random.chance(30) {
            if random.chance(50) { world.userEvent(&random) } else { world.otherEvent(&random) }
        }
        let fault = faults ? randomFault(&random) : .none
        world.note("step: \(operation) fault \(fault)")
        let outcome = world.execute(operation, fault: fault)
        if case let .failed(why) = outcome {
            world.note("  failed: \(why)")
            if why.hasPrefix("bug") { return why }
        }
        return nil
    }

    private static func randomFault(_ random: inout SeededRandom) -> Fault {
        switch random.below(100) {
        case ..<10: return .before
        case ..<15: return .afterIO
        default: return .none
        }
    }
}
