import Foundation
import Glibc
import SinkiRecord
import SinkiTestSupport
import Testing

// The seeded fault suite (issue 11, item 4): three real agents on one real server, each through a
// fault proxy of its own, thousands of random operations over the three roots while agents are
// stopped (SIGTERM) and killed (SIGKILL) and the server is killed and started again on its data.
// Once every fault is healed, each agent writes one last file, and the suite waits (polling, with a
// deadline) for the end state and checks it:
//
// 1. every root holds the same tree;
// 2. every version that was the last one written at its path is there or in a conflict copy of it
//    (the rule is `OperationLog.lastWrites`);
// 3. the server's live records are what every root holds (path, kind, SHA-256), final files included;
// 4. no root holds a `.sinki-tmp-*` file;
// 5. every agent's `sinkid status --json` says it is up to date: its copy of the server's records has
//    the server's digests, and no mismatch was repaired nor a version read found unapplied on the way
//    (each is a defect the suite did not cause).
//
// Every choice (operations, sizes, names, proxy faults, the kill schedule, pacing) follows from the
// seed; the timing of the processes does not. `SINKI_SEED=N` runs seed N alone; `SINKI_FAULT_SEEDS`
// (a count: seeds 1…N) and `SINKI_FAULT_OPS` (operations per seed) size soak runs (`bench/soak`);
// `SINKI_FAULT_DEADLINE` is the seconds allowed to converge after healing; `SINKI_FAULT_MIX=files`
// leaves whole-folder renames and removals out (to tell their bugs from others). A failing seed prints its
// report (also kept as report.txt in its folder, with the logs, roots and server data).
//
// Agents reach the server with device tokens of their own, as users deploy them.

/// Three agents, one server, seeded faults: see the comment above.
@Suite(.serialized) struct FaultSuite {
    static let settings = FaultSettings(ProcessInfo.processInfo.environment)

    @Test(arguments: settings.seeds) func threeAgentsConvergeThroughFaults(seed: UInt64) async throws {
        let run = try FaultRun(seed: seed, settings: Self.settings)
        let outcome = try await run.execute()
        emit(outcome.summary)
        if let report = outcome.report {
            emit(report)
            // The verdict goes into the issue too: a CI log shows only the end of the output, where the
            // agents' last lines are, and a seed that diverged there only may never do so again here.
            Issue.record(Comment(rawValue: "seed \(seed) diverged; its report is printed above and kept in \(outcome.folder)\n" + outcome.verdict))
        }
    }
}

struct FaultSettings: Sendable {
    var seeds: [UInt64] = [1, 2, 3, 4, 5]
    var operations = 1000
    var deadline: Double = 80
    var mix = RandomOperations.Mix.all

    init(_ environment: [String: String]) {
        if let count = environment["SINKI_FAULT_SEEDS"].flatMap(Int.init), count > 0 { seeds = (1...count).map(UInt64.init) }
        if let seed = environment["SINKI_SEED"].flatMap(UInt64.init) { seeds = [seed] }
        if let count = environment["SINKI_FAULT_OPS"].flatMap(Int.init), count > 0 { operations = count }
        if let seconds = environment["SINKI_FAULT_DEADLINE"].flatMap(Double.init), seconds > 0 { deadline = seconds }
        if let name = environment["SINKI_FAULT_MIX"], let chosen = RandomOperations.Mix(rawValue: name) { mix = chosen }
    }
}

/// One seed's run: the processes, the proxies, the op generator and what happened.
final class FaultRun {
    enum Action: CustomStringConvertible {
        case stopAgent(String, kill: Bool)
        case startAgent(String)
        case killServer
        case startServer

        var description: String {
            switch self {
            case let .stopAgent(name, kill): "\(kill ? "SIGKILL" : "SIGTERM") agent \(name)"
            case let .startAgent(name): "start agent \(name)"
            case .killServer: "SIGKILL server"
            case .startServer: "start server"
            }
        }
    }

    struct Outcome {
        var summary: String
        var report: String?
        /// The report's checks and problems in a few lines (empty when it passed).
        var verdict = ""
        var folder: String
    }

    static let agents = ["a", "b", "c"]
    static let rootName = "SaveGames"
    /// How long nothing may move (no root, no status) before a run that has not converged is taken
    /// as settled apart: longer than the longest wait between retries (30 s for the server and for
    /// transfers, each up to a quarter longer at random) plus a shorter one before it (a connection
    /// that died before the heal is found dead on its next use).
    static let settleSeconds = 60.0

    let seed: UInt64
    let settings: FaultSettings
    let cluster = Cluster("sinki-faults")
    let config: String
    let generator: RandomOperations
    var proxies: [String: FaultProxy] = [:]
    var schedule: [Int: [Action]] = [:]
    var pace: SeededRandom
    /// What the harness did besides operations (kills, starts, heal), with the op index and time.
    var events: [String] = []
    /// Things that went wrong besides the end state: crashes, unclean exits.
    var problems: [String] = []
    /// Things worth knowing that fail nothing by themselves: transfers left failed (waiting for
    /// `sinkid retry`) by an agent whose status otherwise says it is up to date.
    var notes: [String] = []
    let began = Date()

    init(seed: UInt64, settings: FaultSettings) throws {
        self.seed = seed
        self.settings = settings
        var master = SeededRandom(seed: seed)
        let operationSeed = master.next()
        let proxySeeds = Self.agents.map { _ in master.next() }
        var planner = master.split()
        pace = master.split()
        config = cluster.directory.child("agent.conf")
        // Many files go through tus (above 64 KiB), in several chunks each, so a cut connection
        // leaves uploads half done. A transfer must never give up for good while faults are many.
        try writeFile(config, """
            [transfer]
            inline-max = 64KiB
            chunk-size = 256KiB
            attempts = 1000000
            """)
        let cluster = self.cluster
        generator = RandomOperations(roots: Self.agents.map { ($0, cluster.root($0, rootName: Self.rootName)) }, seed: operationSeed, mix: settings.mix)
        try cluster.startServer()
        for (index, name) in Self.agents.enumerated() {
            proxies[name] = try FaultProxy(label: name, targetPort: cluster.serverPort, seed: proxySeeds[index],
                                           logPath: cluster.directory.child("proxy-\(name).log"))
        }
        schedule = Self.plan(&planner, operations: settings.operations)
    }

    deinit { for proxy in proxies.values { proxy.stop() } }

    /// The kill schedule: agent outages (half SIGTERM, half SIGKILL) of up to 150 operations, about
    /// one per 150 operations, and server kills of up to 40 operations, about one per 400.
    static func plan(_ random: inout SeededRandom, operations: Int) -> [Int: [Action]] {
        var schedule: [Int: [Action]] = [:]
        for _ in 0..<max(1, operations / 150) {
            let name = agents[random.below(agents.count)]
            let at = random.below(operations)
            schedule[at, default: []].append(.stopAgent(name, kill: random.chance(0.5)))
            schedule[min(operations, at + random.int(in: 0...150)), default: []].append(.startAgent(name))
        }
        for _ in 0..<max(1, operations / 400) {
            let at = random.below(operations)
            schedule[at, default: []].append(.killServer)
            schedule[min(operations, at + random.int(in: 0...40)), default: []].append(.startServer)
        }
        return schedule
    }

    func root(_ name: String) -> String { cluster.root(name, rootName: Self.rootName) }
    func state(_ name: String) -> String { cluster.directory.child(name) + "/state" }
    var clock: String { String(format: "%.1f s", Date().timeIntervalSince(began)) }

    func note(_ text: String) { events.append("[\(clock)] \(text)") }

    func startAgent(_ name: String) throws {
        try cluster.startAgent(name, server: proxies[name]!.url, rootName: Self.rootName, extra: ["--config", config], waitForScan: false)
    }

    func perform(_ action: Action, at index: Int) throws {
        switch action {
        case let .stopAgent(name, kill):
            guard cluster.agent(name) != nil else { return }
            note("op \(index): \(action)")
            if kill {
                cluster.killAgent(name)
            } else if let code = cluster.stopAgent(name), code != 0 {
                problems.append("agent \(name) exited with status \(code) after SIGTERM at op \(index) (0 expected)")
            }
        case let .startAgent(name):
            guard cluster.agent(name) == nil else { return }
            note("op \(index): \(action)")
            try startAgent(name)
        case .killServer:
            guard cluster.server != nil else { return }
            note("op \(index): \(action)")
            cluster.killServer()
        case .startServer:
            guard cluster.server == nil else { return }
            note("op \(index): \(action)")
            try cluster.restartServer()
        }
    }

    /// Processes that ended without being told to are problems; they are started again.
    func reviveTheDead(at index: Int) throws {
        for name in Self.agents {
            guard let agent = cluster.agent(name), !agent.isRunning else { continue }
            let code = agent.waitForExit(timeout: 1)
            problems.append("agent \(name) exited by itself with status \(code) before op \(index); its last lines:\n"
                            + FaultReport.tail(agent.errors, lines: 15))
            cluster.killAgent(name)
            note("op \(index): agent \(name) found dead, started again")
            try startAgent(name)
        }
        if let server = cluster.server, !server.isRunning {
            problems.append("the server exited by itself before op \(index); its last lines:\n" + FaultReport.tail(server.errors, lines: 15))
            cluster.killServer()
            try cluster.restartServer()
        }
    }

    func execute() async throws -> Outcome {
        for name in Self.agents { try cluster.startAgent(name, server: proxies[name]!.url, rootName: Self.rootName, extra: ["--config", config]) }
        note("started server (port \(cluster.serverPort)) and agents a, b, c through proxies \(Self.agents.map { proxies[$0]!.port })")
        let operations = settings.operations
        for index in 0..<operations {
            for action in schedule[index] ?? [] { try perform(action, at: index) }
            try reviveTheDead(at: index)
            generator.next(index)
            // Pacing, not a wait for a condition: how soon the next operation lands (mostly at once,
            // sometimes after a pause that lets sync catch up in the middle of things).
            switch pace.weighted([70, 25, 5]) {
            case 0: break
            case 1: try await Task.sleep(nanoseconds: UInt64(pace.below(40_000_000)))
            default: try await Task.sleep(nanoseconds: 100_000_000 + UInt64(pace.below(300_000_000)))
            }
        }
        let operationsTook = Date().timeIntervalSince(began)

        // Heal: no more faults, every process up.
        for proxy in proxies.values { proxy.heal() }
        for action in schedule[operations] ?? [] { try perform(action, at: operations) }
        if cluster.server == nil { try cluster.restartServer() }
        for name in Self.agents where cluster.agent(name) == nil { try startAgent(name) }
        try reviveTheDead(at: operations)
        note("healed after \(operations) operations")
        let finals = Self.agents.enumerated().map { generator.writeFinal(operations + $0.offset, agent: $0.element, path: "final-\($0.element).txt") }

        let waited = try await waitForTheEnd()
        let checks = try check(finals: finals)
        let times = mtimeDifferences()
        try reviveTheDead(at: operations + Self.agents.count)
        let summary = "fault suite seed \(seed): \(operations) operations in \(String(format: "%.1f", operationsTook)) s, then "
            + "\(String(format: "%.1f", waited.seconds)) s to \(waited.why)"
            + (times.isEmpty ? "" : "; \(times.count) file(s) agree in bytes but not in mtime, as \(times.prefix(3).joined(separator: ", "))")
            + ": " + (checks.isEmpty && problems.isEmpty ? "PASS" : "DIVERGED")
        guard !checks.isEmpty || !problems.isEmpty else {
            return Outcome(summary: ([summary] + notes.map { "NOTE: \($0)" }).joined(separator: "\n"), report: nil, folder: cluster.directory.path)
        }
        cluster.directory.keep()
        let faultReport = FaultReport(run: self, failures: checks, waited: waited)
        let report = faultReport.text
        try? writeFile(cluster.directory.child("report.txt"), report)
        try? writeFile(cluster.directory.child("operations.txt"), generator.log.operations.map(\.description).joined(separator: "\n") + "\n")
        return Outcome(summary: summary, report: report, verdict: faultReport.verdict, folder: cluster.directory.child("report.txt"))
    }

    // MARK: the end state

    struct Waited {
        var seconds: Double
        var why: String
    }

    /// Polls until the end state holds, until nothing has moved for `settleSeconds` (no root changed,
    /// no agent's status changed in substance: settled apart, or stuck), or until the deadline.
    func waitForTheEnd() async throws -> Waited {
        let start = Date()
        var stillSince = Date()
        var last: ([[String: String]], [String]) = ([], [])
        while true {
            // With times, to see whether anything moves; without, to see whether the trees agree
            // (like TreeSnapshot, the suite holds roots to kind, size, mode and bytes, not mtime).
            let quick = Self.agents.map { quickListing(root($0)) }
            let shapes = quick.map { $0.mapValues { String($0.split(separator: ":").prefix(2).joined(separator: ":")) } }
            let statuses = try Self.agents.map { try status($0) }
            if statuses.allSatisfy(Self.upToDate) && shapes.dropFirst().allSatisfy({ $0 == shapes[0] }) {
                let full = Self.agents.map { RootContents(root($0)) }
                if full.dropFirst().allSatisfy({ $0 == full[0] }) && full[0].temporaryFiles.isEmpty,
                   try serverDifference(full[0]).isEmpty {
                    return Waited(seconds: Date().timeIntervalSince(start), why: "converge")
                }
            }
            let now = (quick, statuses.map(Self.substance))
            if now != last { stillSince = Date() }
            last = now
            if Date().timeIntervalSince(stillSince) > Self.settleSeconds {
                let claim = statuses.allSatisfy(Self.upToDate) ? "every agent says it is up to date" : "not every agent is up to date"
                return Waited(seconds: Date().timeIntervalSince(start),
                              why: "settle apart (nothing moved for \(Int(Self.settleSeconds)) s; \(claim))")
            }
            if Date().timeIntervalSince(start) > settings.deadline {
                return Waited(seconds: Date().timeIntervalSince(start), why: "reach the deadline")
            }
            try await Task.sleep(nanoseconds: 500_000_000) // inside a loop with a deadline: polling
        }
    }

    /// What in a status document tells of progress (not its clock fields).
    static func substance(_ json: JSONValue) -> String {
        var parts = [json["agent"]?["state"], json["agent"]?["reason"], json["pending"]?["count"], json["remote"]?["upToDate"],
                     json["remote"]?["position"], json["notApplied"]?["count"]].map { compact($0 ?? .null) }
        if case let .array(transfers)? = json["transfers"] {
            parts += transfers.map { compact($0["path"] ?? .null) + compact($0["done"] ?? .null) + compact($0["failed"] ?? .null) }
        }
        return parts.joined(separator: " ")
    }

    /// Files of the same size in every root whose mtimes differ between roots (not held against the
    /// agent, but said: sinkid sends mtimes with records), each as `path (mtime on a, b, c)`.
    func mtimeDifferences() -> [String] {
        let listings = Self.agents.map { quickListing(root($0)) }
        return listings[0].keys.sorted().compactMap { path in
            let values = listings.map { $0[path] ?? "" }
            let shapes = Set(values.map { $0.split(separator: ":").prefix(2).joined(separator: ":") })
            guard shapes.count == 1, Set(values).count > 1, values[0] != "dir" else { return nil }
            return "\(path) (" + values.map { String($0.split(separator: ":").last ?? "") }.joined(separator: ", ") + ")"
        }
    }

    /// `sinkid status --json` of agent `name` (its output files reused from one call to the next).
    func status(_ name: String) throws -> JSONValue {
        let folder = cluster.directory.child("status")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let process = try ChildProcess(sinkidExecutable(), ["status", "--json", "--state", state(name)], logDirectory: folder, label: name)
        process.waitForExit(timeout: 20)
        return (try? JSONValue.parse(Array(process.output.utf8))) ?? .null
    }

    /// Check 5: the agent, each root and the feed up to date, nothing pending, nothing left unapplied.
    static func upToDate(_ json: JSONValue) -> Bool { statusProblems(json).isEmpty }

    static func statusProblems(_ json: JSONValue) -> [String] {
        var out: [String] = []
        if json["agent"]?["state"] != .string("up-to-date") {
            out.append("agent.state \(compact(json["agent"]?["state"] ?? .null)) (\(compact(json["agent"]?["reason"] ?? .null)))")
        }
        if case let .array(roots)? = json["roots"] {
            for root in roots where root["state"] != .string("up-to-date") {
                out.append("root \(compact(root["name"] ?? .null)) \(compact(root["state"] ?? .null)) (\(compact(root["reason"] ?? .null)))")
            }
        } else {
            out.append("no roots")
        }
        if json["remote"]?["upToDate"] != .bool(true) { out.append("remote.upToDate \(compact(json["remote"]?["upToDate"] ?? .null))") }
        if json["pending"]?["count"] != .int(0) { out.append("pending.count \(compact(json["pending"]?["count"] ?? .null))") }
        // Being added to the status document: remote changes the agent could not apply.
        if let notApplied = json["notApplied"], notApplied != .null, notApplied["count"] != .int(0) {
            out.append("notApplied.count \(compact(notApplied["count"] ?? .null))")
        }
        // Every mismatch with the server is a defect the suite did not cause: none may have been repaired.
        let digest = json["digest"] ?? .null
        if digest["matched"] != .bool(true) { out.append("digest.matched \(compact(digest["matched"] ?? .null)) (\(compact(digest["failure"] ?? .null)))") }
        if digest["repaired"] != .int(0) { out.append("digest.repaired \(compact(digest["repaired"] ?? .null)): a mismatch with the server") }
        return out
    }

    /// The server's live records (read from the server itself, not through a proxy), by path below the root.
    func serverEntries() throws -> [String: RootContents.Entry] {
        var out: [String: RootContents.Entry] = [:]
        for record in try cluster.serverRecords(Self.rootName) where !record.deleted {
            guard record.path.hasPrefix(Self.rootName + "/") else { continue }
            let path = String(record.path.dropFirst(Self.rootName.count + 1))
            switch record.kind {
            case .directory: out[path] = RootContents.Entry(kind: "dir", size: 0, sha256: "", mode: 0)
            case .symlink: out[path] = RootContents.Entry(kind: "link", size: 0, sha256: "", mode: 0)
            case .file: out[path] = RootContents.Entry(kind: "file", size: Int(record.size), sha256: record.sha256, mode: 0)
            }
        }
        return out
    }

    /// Check 3 for one root: paths where the server's live records and the root disagree in kind,
    /// size or SHA-256.
    func serverDifference(_ contents: RootContents) throws -> [String] {
        let server = try serverEntries()
        func brief(_ entry: RootContents.Entry?) -> String {
            guard let entry else { return "-" }
            return entry.kind == "file" ? "file \(entry.size) B \(entry.sha256.prefix(12))" : entry.kind
        }
        return Set(server.keys).union(contents.entries.keys).filter { path in
            let local = contents.entries[path], remote = server[path]
            return local?.kind != remote?.kind || local?.size != remote?.size || local?.sha256 != remote?.sha256
        }.sorted().map { "\($0): server \(brief(server[$0])), root \(brief(contents.entries[$0]))" }
    }

    struct Failure {
        var check: String
        var lines: [String]
        /// The paths the failure is about, for their histories in the report.
        var paths: [String]
    }

    func check(finals: [FileOperation]) throws -> [Failure] {
        var failures: [Failure] = []
        let contents = Self.agents.map { RootContents(root($0)) }

        // 1. Every root the same.
        var differing = Set<String>()
        var lines: [String] = []
        for (index, name) in Self.agents.enumerated().dropFirst() {
            let difference = contents[0].difference(contents[index])
            for line in difference { differing.insert(String(line.prefix { $0 != ":" })) }
            if !difference.isEmpty { lines.append("a vs \(name): \(difference.count) path(s)") ; lines += difference.prefix(40).map { "  " + $0 } }
        }
        if !lines.isEmpty { failures.append(Failure(check: "1. roots differ", lines: lines, paths: differing.sorted())) }

        // 2. Every last-written version kept.
        let held = generator.log.lastWrites(reachedServer: try cluster.serverContentIDs())
        for (index, name) in Self.agents.enumerated() {
            var lost: [String] = []
            var paths: [String] = []
            var byContent: [String: [String]] = [:]
            for (path, entry) in contents[index].entries where entry.kind == "file" { byContent[entry.sha256, default: []].append(path) }
            for (path, last) in held.sorted(by: { $0.key < $1.key })
            where !Self.keeps(contents[index], path: path, sha256: last.version.sha256)
                && !(last.version.movedAway && (byContent[last.version.sha256] != nil
                                                  || generator.log.destroyed(last.version.sha256, after: last.operation.index))) {
                paths.append(path)
                let folder = path.split(separator: "/").dropLast().joined(separator: "/")
                let copies = Self.conflictCopies(contents[index], of: path)
                    .filter { $0.split(separator: "/").dropLast().joined(separator: "/") == folder }
                    .map { "\($0) (\(contents[index].entries[$0]!))" }
                // Not lost outright when the bytes are elsewhere (carried along by a folder renamed
                // meanwhile, say): the rule still wants them at the path, but where they went is the clue.
                let elsewhere = (byContent[last.version.sha256] ?? []).sorted()
                lost.append("\(path): last written by \(last.operation.agent) at op \(last.operation.index) "
                            + "(\(last.version.size) B \(last.version.sha256.prefix(12))"
                            + (last.version.orphaned ? ", ORPHANED: the agent put another file at the path while the harness was writing this one" : "") + ")"
                            + "; root has \(contents[index].entries[path]?.description ?? "nothing")"
                            + (copies.isEmpty ? "" : "; conflict copies beside it: " + copies.joined(separator: ", "))
                            + (elsewhere.isEmpty ? "; these bytes are nowhere in the root" : "; these bytes are at " + elsewhere.prefix(3).joined(separator: ", ")))
            }
            // When the roots are the same, one root's losses say it all.
            if !lost.isEmpty {
                failures.append(Failure(check: "2. last-written versions lost in root \(name) (\(lost.count) of \(held.count) held)",
                                        lines: Array(lost.prefix(40)), paths: paths))
            }
            if failures.first(where: { $0.check.hasPrefix("1.") }) == nil && !lost.isEmpty { break }
        }

        // 3. The server's live records are what every root holds; each final file is there.
        for (index, name) in Self.agents.enumerated() {
            let difference = try serverDifference(contents[index])
            if !difference.isEmpty {
                failures.append(Failure(check: "3. server records differ from root \(name) (\(difference.count) path(s))",
                                        lines: Array(difference.prefix(40)), paths: difference.map { String($0.prefix { $0 != ":" }) }))
            }
        }
        let server = try serverEntries()
        for final in finals {
            guard let version = final.written.first else {
                failures.append(Failure(check: "3. final file of \(final.agent) not written: \(final.error ?? "?")", lines: [], paths: []))
                continue
            }
            let missing = Self.agents.enumerated().filter { contents[$0.offset].entries[final.path]?.sha256 != version.sha256 }.map(\.element)
            if server[final.path]?.sha256 != version.sha256 || !missing.isEmpty {
                failures.append(Failure(check: "3. final file \(final.path) not everywhere",
                                        lines: ["server: \(server[final.path]?.description ?? "-"); missing or different in: \(missing)"],
                                        paths: [final.path]))
            }
        }

        // 4. No temporary files.
        for (index, name) in Self.agents.enumerated() where !contents[index].temporaryFiles.isEmpty {
            failures.append(Failure(check: "4. temporary files left in root \(name)", lines: contents[index].temporaryFiles.prefix(20).map { "  " + $0 },
                                    paths: contents[index].temporaryFiles.map { $0.split(separator: "/").dropLast().joined(separator: "/") }))
        }

        // 5. Every agent up to date.
        for name in Self.agents {
            let json = try status(name)
            if case let .array(transfers)? = json["transfers"] {
                for transfer in transfers where transfer["failed"] != nil && transfer["failed"] != .null {
                    notes.append("agent \(name) lists a failed transfer (waiting for sinkid retry): \(compact(transfer))")
                }
            }
            let problems = Self.statusProblems(json)
            if !problems.isEmpty {
                var lines = problems
                if case let .array(changes)? = json["pending"]?["changes"] { lines += changes.prefix(10).map { "  pending \(compact($0))" } }
                if case let .array(transfers)? = json["transfers"] { lines += transfers.prefix(10).map { "  transfer \(compact($0))" } }
                if case let .array(changes)? = json["notApplied"]?["changes"] { lines += changes.prefix(10).map { "  not applied \(compact($0))" } }
                lines.append("  server.lastError \(compact(json["server"]?["lastError"] ?? .null))")
                failures.append(Failure(check: "5. agent \(name) not up to date", lines: lines, paths: []))
            }
        }
        return failures
    }

    /// Whether `path`'s version `sha256` is at the path, or in a conflict copy of it anywhere in the tree.
    static func keeps(_ contents: RootContents, path: String, sha256: String) -> Bool {
        if let entry = contents.entries[path], entry.kind == "file", entry.sha256 == sha256 { return true }
        return conflictCopies(contents, of: path).contains { contents.entries[$0]?.sha256 == sha256 }
    }

    /// The paths named like a conflict copy of `path` (`stem.sync-conflict-YYYYMMDD-HHMMSS-DEVICE[-N].ext`),
    /// in any folder (a copy made before its folder moved is still the version).
    static func conflictCopies(_ contents: RootContents, of path: String) -> [String] {
        let name = String(path.split(separator: "/").last ?? "")
        var stem = name, ext = ""
        if let dot = name.lastIndex(of: "."), dot != name.startIndex {
            stem = String(name[..<dot])
            ext = String(name[dot...])
        }
        return contents.entries.keys.filter { candidate in
            let other = candidate.split(separator: "/").last.map(String.init) ?? ""
            guard other.hasPrefix(stem + ".sync-conflict-"), other.hasSuffix(ext), other.count > stem.count + ext.count else { return false }
            let tag = other.dropFirst(stem.count + ".sync-conflict-".count).dropLast(ext.count)
            return tag.range(of: #"^\d{8}-\d{6}-.+$"#, options: .regularExpression) != nil
        }.sorted()
    }
}

/// What a failing seed prints: how to replay it, what differs, the history of the paths concerned,
/// the schedule, the proxies' faults, and each agent's problems and last lines.
struct FaultReport {
    let run: FaultRun
    let failures: [FaultRun.Failure]
    let waited: FaultRun.Waited

    static func tail(_ text: String, lines: Int) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).suffix(lines).joined(separator: "\n")
    }

    /// Every log file of agent `name` (one per launch), oldest first.
    func logs(_ name: String) -> [String] {
        let directory = run.cluster.directory.path
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasPrefix("agent-\(name)-") && $0.hasSuffix(".err") }
            .sorted { Int($0.split(separator: "-")[2].split(separator: ".")[0]) ?? 0 < Int($1.split(separator: "-")[2].split(separator: ".")[0]) ?? 0 }
            .map { directory + "/" + $0 }
    }

    /// The problems and each failed check's first lines: what a log cut to its end must still show.
    var verdict: String {
        var out = run.problems.prefix(5).map { "PROBLEM: \($0)" }
        for failure in failures.prefix(4) {
            out.append("check \(failure.check)")
            out += failure.lines.prefix(6).map { String($0.prefix(300)) }
        }
        return out.joined(separator: "\n")
    }

    var text: String {
        var out: [String] = []
        let settings = run.settings
        out.append("==== FAULT SUITE DIVERGED: seed \(run.seed), \(settings.operations) operations (mix \(settings.mix.rawValue)) ====")
        out.append("replay: SINKI_SEED=\(run.seed) SINKI_FAULT_OPS=\(settings.operations)\(settings.mix == .all ? "" : " SINKI_FAULT_MIX=\(settings.mix.rawValue)") swift test -c release -Xswiftc -enable-testing --skip-build --filter FaultSuite")
        out.append("kept: \(run.cluster.directory.path) (agent-*.err and server-*.err are the logs, proxy-*.log each proxy's connections, operations.txt every operation; report.txt is this)")
        out.append("waited \(String(format: "%.1f", waited.seconds)) s to \(waited.why)")
        for problem in run.problems { out.append("PROBLEM: \(problem)") }
        for note in run.notes.prefix(10) { out.append("NOTE: \(note)") }
        for failure in failures {
            out.append("-- check \(failure.check)")
            out += failure.lines
        }
        let paths = Set(failures.flatMap(\.paths)).filter { !$0.isEmpty }.sorted()
        if !paths.isEmpty {
            // Paths with the same history (a folder and what is in it, often) are shown together.
            out.append("-- operations that touched the paths above (or their folders or contents), last 15 per group")
            var groups: [(paths: [String], history: [FileOperation])] = []
            for path in paths {
                let history = Array(run.generator.log.history(of: path).suffix(15))
                if let index = groups.firstIndex(where: { $0.history.map(\.index) == history.map(\.index) }) {
                    groups[index].paths.append(path)
                } else {
                    groups.append(([path], history))
                }
            }
            for group in groups.prefix(12) {
                out.append("  " + group.paths.prefix(4).joined(separator: ", ") + (group.paths.count > 4 ? " (and \(group.paths.count - 4) more)" : "") + ":")
                out += group.history.map { "    \($0)" }
            }
        }
        out.append("-- schedule (kills, starts, heal)")
        out += run.events
        out.append("-- last 25 operations")
        out += run.generator.log.operations.suffix(25).map { "  \($0)" }
        out.append("-- proxies")
        out += run.proxies.keys.sorted().map { run.proxies[$0]!.summary }
        for name in FaultRun.agents {
            let files = logs(name)
            let all = files.map { (try? String(contentsOfFile: $0, encoding: .utf8)) ?? "" }
            out.append("-- agent \(name): \(files.count) launch(es); WARNING and ERROR lines (last 25 over all launches)")
            let problems = all.flatMap { $0.split(separator: "\n") }.filter { $0.contains(" WARNING ") || $0.contains(" ERROR ") }
            out += problems.suffix(25).map { "  " + $0 }
            for path in paths.sorted(by: { $0.count < $1.count }).prefix(4) {
                let mentions = all.flatMap { $0.split(separator: "\n") }.filter { $0.contains(path) }
                if !mentions.isEmpty {
                    out.append("-- agent \(name): lines naming \(path) (last 8)")
                    out += mentions.suffix(8).map { "  " + $0 }
                }
            }
            out.append("-- agent \(name): last 15 lines")
            out.append(Self.tail(all.last ?? "", lines: 15))
        }
        return out.joined(separator: "\n")
    }
}

/// A JSON value as compact JSON text, for reports.
func compact(_ value: JSONValue) -> String {
    var writer = JSONWriter()
    value.write(to: &writer)
    return String(decoding: writer.bytes, as: UTF8.self)
}

/// Writes `text` and a newline to stdout at once, past stdio's buffer: the test runner writes its
/// own lines straight to the descriptor, and a report left half in the buffer would come out cut
/// in two around them (bench/soak reads these lines).
func emit(_ text: String) {
    fflush(nil) // every stdio stream, stdout among them (naming stdout is not concurrency-safe)
    let bytes = Array((text + "\n").utf8)
    var offset = 0
    while offset < bytes.count {
        let wrote = bytes.withUnsafeBytes { Glibc.write(STDOUT_FILENO, $0.baseAddress!.advanced(by: offset), bytes.count - offset) }
        if wrote <= 0 { return }
        offset += wrote
    }
}
