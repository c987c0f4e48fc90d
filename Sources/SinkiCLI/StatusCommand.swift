import Glibc
import SinkiConfig
import SinkiAgent
import SinkiControl
import SinkiRecord
import SinkiState
import SinkiSupport

/// `sinkid status`: the running agent's report, or, with none running, what its state database
/// says is pending (exit 3).
enum StatusCommand {
    static func run(_ words: [String]) throws(UsageError) -> ExitCode {
        guard let arguments = try Arguments.orHelp(words, CommandCatalog.status) else { return .success }
        if let extra = arguments.positional.first { throw UsageError("unexpected argument \(extra)") }
        let state = try ControlCommands.stateDirectory(arguments)
        let json = arguments.has("json")
        guard arguments.has("watch") else {
            return show(state: state, arguments: arguments, json: json, redraw: false)
        }
        // Redraw every second until interrupted (SIGINT ends the process; nothing to clean up).
        while true {
            _ = show(state: state, arguments: arguments, json: json, redraw: !json && Output.isTerminal)
            usleep(1_000_000)
        }
    }

    /// Prints one report; returns the exit code it stands for.
    static func show(state: String, arguments: Arguments, json: Bool, redraw: Bool) -> ExitCode {
        let (report, code) = fetch(state: state, arguments: arguments)
        switch report {
        case let .success(report):
            if json {
                Output.json(report.json)
            } else {
                var text = StatusRenderer(colour: Output.isTerminal, width: Output.terminalColumns).render(report)
                // Home and clear to the end, then draw: the previous report is replaced in place.
                if redraw { text = "\u{1B}[H\u{1B}[J" + text }
                Output.line(text)
            }
        case let .failure(error):
            return ControlCommands.report(error, json: json, stateDirectory: state)
        }
        return code
    }

    /// The agent's report, or the database's when no agent answers.
    static func fetch(state: String, arguments: Arguments) -> (Result<StatusReport, ControlError>, ExitCode) {
        do throws(ControlError) {
            let client = try ControlClient(stateDirectory: state)
            return (.success(try StatusReport(json: try client.send(.status))), .success)
        } catch where error.code == .notRunning {
            let offline = OfflineStatus(stateDirectory: state, configFile: arguments.value("config"))
            return (offline.report(), .notRunning)
        } catch {
            return (.failure(error), ControlCommands.exitCode(error))
        }
    }
}

/// The report `sinkid status` builds itself from the state database when no agent runs: what is
/// pending, the feed position, and root totals; read-only, nothing is created.
struct OfflineStatus {
    let stateDirectory: String
    let configFile: String?

    func report() -> Result<StatusReport, ControlError> {
        let now = Clock.now()
        var agent = AgentSummary(running: false, stateDirectory: stateDirectory, state: .notRunning,
                                 reason: "no agent runs with this state folder; what follows is from its database")
        if lockHeld {
            agent.reason = "an agent holds this state folder but does not answer on \(ControlSocket.fileName) (starting, or stuck)"
        }
        var report = StatusReport(generatedAt: now, agent: agent, server: ServerSummary())
        let configured = configuredRoots()
        let path = stateDirectory + "/state.db"
        guard access(path, F_OK) == 0 else {
            report.agent.reason = "no agent has run with this state folder (no \(path))"
            report.roots = configured.map { RootStatus(name: $0.name, path: $0.path, files: 0, bytes: 0, state: .notRunning) }
            return .success(report)
        }
        do {
            let database = try StatusQueries.openReadOnly(path)
            let byRoot = try StatusQueries.byRoot(database)
            var names = try StatusQueries.rootNames(database)
            for root in configured where !names.contains(root.name) { names.append(root.name) }
            for name in names {
                let totals = try StatusQueries.totals(database, root: name)
                let waiting = byRoot[name]?.local ?? 0
                report.roots.append(RootStatus(name: name, path: configured.first { $0.name == name }?.path, files: totals.files,
                                               bytes: totals.bytes, state: .notRunning,
                                               reason: waiting > 0 ? "\(waiting) local change(s) wait for the agent" : nil))
            }
            let count = try StatusQueries.counts(database).local
            let changes = try StatusQueries.pending(database, limit: PendingSummary.listed).map { row in
                PendingChange(path: row.path, kind: ChangeKind(rawValue: row.kind) ?? .modify, queuedAt: row.modifiedAt > 0 ? row.modifiedAt : now)
            }
            // What the server refused and what could not be written is known to a running agent only.
            report.pending = PendingSummary(count: count, refused: 0, changes: changes)
            report.conflicts = try StatusQueries.conflicts(database).map(ConflictEntry.init)
            let feed = try StatusQueries.feed(database)
            report.remote = RemoteSummary(upToDate: nil, position: feed.token)
            if let last = try StatusQueries.lastVerify(database) {
                report.verify = VerifySummary(lastRun: last.finishedAt, result: last.result, repaired: last.repaired,
                                              differing: last.result == "differing" ? last.differing : [], detail: last.detail)
            }
            if let server = feed.server {
                report.server.embedded = server == "embedded"
                report.server.url = server == "embedded" ? nil : server
            }
        } catch {
            return .failure(ControlError(.failed, "cannot read the state database \(path): \(error)"))
        }
        return .success(report)
    }

    /// Whether an agent holds the state folder's lock (it runs, but did not answer).
    var lockHeld: Bool {
        let fd = open(stateDirectory + "/agent.lock", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        if flock(fd, LOCK_SH | LOCK_NB) == 0 {
            flock(fd, LOCK_UN)
            return false
        }
        return errno == EWOULDBLOCK
    }

    /// The roots the config names, for their folders (a config that cannot be read is no reason to
    /// refuse status: the database still tells what is pending).
    func configuredRoots() -> [RootSettings] {
        let overrides = Overrides(configFile: configFile, stateDirectory: stateDirectory)
        return (try? ResolvedConfig.resolve(overrides, environment: .current()))?.roots ?? []
    }
}
