import Foundation
import Glibc
import SinkiPlan
import Testing

/// The planner against random histories: every case must end with the three trees equal, equal to
/// disk and server, in bounded steps, with no version lost.
@Suite struct RandomizedPlannerTests {
    static func environment(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }

    /// Runs `work` on a thread of its own: seconds of CPU-bound work must not hold a thread of the
    /// cooperative pool, which every other test of the process needs to make progress (on two cores the
    /// workers held all of it, and other tests' waits ran out before they could look once). The thread
    /// runs at the lowest priority: the cases are pure CPU with no deadline, while the suites beside
    /// them time real agents and servers to the second.
    static func onThread<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            let thread = Thread {
                // On Linux a nice value is per thread, and PRIO_PROCESS with 0 names the calling one: it alone yields.
                _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 19)
                continuation.resume(returning: work())
            }
            thread.stackSize = 8 << 20
            thread.start()
        }
    }

    @Test func randomHistoriesReachSync() async {
        if let text = Self.environment("SINKI_SEED"), let seed = UInt64(text) {
            let (failure, trace, _) = Simulation.run(seed: seed, tracing: true)
            if failure != nil { print(trace.joined(separator: "\n")) }
            #expect(failure == nil, "seed \(seed): \(failure ?? "")")
            return
        }
        let cases = Self.environment("SINKI_CASES").flatMap { UInt64($0) } ?? 100_000
        let workers = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
        let clock = ContinuousClock()
        let started = clock.now
        let kinds = OperationKind.allCases.count
        let (failures, failed, completed) = await withTaskGroup(of: ([(UInt64, String)], Int, [Int]).self) { group in
            for worker in 0..<workers {
                group.addTask {
                    await Self.onThread {
                    var found: [(UInt64, String)] = []
                    var failed = 0
                    var completed = [Int](repeating: 0, count: kinds)
                    var seed = UInt64(worker)
                    while seed < cases {
                        let result = Simulation.run(seed: seed)
                        if let failure = result.failure {
                            failed += 1
                            if found.count < 5 { found.append((seed, failure)) }
                        }
                        for kind in 0..<kinds { completed[kind] += result.completed[kind] }
                        seed += UInt64(workers)
                    }
                    return (found, failed, completed)
                    }
                }
            }
            var all: [(UInt64, String)] = []
            var failed = 0
            var completed = [Int](repeating: 0, count: kinds)
            for await (found, count, done) in group {
                all += found
                failed += count
                for kind in 0..<kinds { completed[kind] += done[kind] }
            }
            return (all.sorted { $0.0 < $1.0 }, failed, completed)
        }
        let elapsed = clock.now - started
        print("SinkiPlanTests: \(cases) cases on \(workers) threads in \(elapsed), \(failed) failed")
        print("SinkiPlanTests: operations completed: " + OperationKind.allCases.map { "\($0) \(completed[$0.rawValue])" }.joined(separator: ", "))
        // A history that never reaches a row proves nothing about it.
        for kind in OperationKind.allCases { #expect(completed[kind.rawValue] > 0, "no case completed a \(kind)") }
        for (seed, failure) in failures.prefix(10) {
            print("seed \(seed) failed: \(failure)  (replay: SINKI_SEED=\(seed) swift test -c release -Xswiftc -enable-testing --skip-build --filter SinkiPlanTests)")
        }
        #expect(failed == 0, "\(failed) failing seeds; first: \(failures.first.map { "\($0.0): \($0.1)" } ?? "")")
    }
}
