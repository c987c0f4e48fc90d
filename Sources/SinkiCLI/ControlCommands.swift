import Glibc
import SinkiConfig
import SinkiControl
import SinkiRecord
import SinkiSupport

/// `pause`, `resume`, `sync`, `retry`, `conflicts`, `resolve` and `watch`: one request to the agent
/// found through `--state`, its answer printed (as JSON with `--json`).
enum ControlCommands {
    static func run(_ name: String, _ words: [String]) throws(UsageError) -> ExitCode {
        guard let spec = CommandCatalog.spec(name) else { throw UsageError("unknown command \(name)") }
        guard let arguments = try Arguments.orHelp(words, spec) else { return .success }
        let request = try request(name, arguments)
        let json = arguments.has("json")
        let state = try stateDirectory(arguments)
        do throws(ControlError) {
            // A full comparison reads every record of the server: it may take a while.
            let timeout: Double = request == .sync(verify: true) ? 3600 : 30
            let client = try ControlClient(stateDirectory: state, timeout: timeout)
            if case .watch = request { return try follow(client, request) }
            let result = try client.send(request)
            if json {
                Output.json(result)
            } else {
                Output.line(try describe(request, result))
            }
            return .success
        } catch {
            return report(error, json: json, stateDirectory: state)
        }
    }

    /// The request a command line asks for; operands and `--keep` are checked here.
    static func request(_ name: String, _ arguments: Arguments) throws(UsageError) -> ControlRequest {
        let operands = arguments.positional
        let maxOperands = ["retry": 1, "resolve": 1, "watch": 1, "pause": 1, "resume": 1][name] ?? 0
        if operands.count > maxOperands { throw UsageError("unexpected argument \(operands[maxOperands]) (see sinkid help \(name))") }
        switch name {
        case "pause": return .pause(root: operands.first.map(rootName))
        case "resume": return .resume(root: operands.first.map(rootName))
        case "sync": return .sync(verify: arguments.has("verify"))
        case "conflicts": return .conflicts
        case "retry": return .retry(path: operands.first.map(recordPath))
        case "resolve":
            guard let path = operands.first else { throw UsageError("resolve needs a PATH (see sinkid conflicts)") }
            guard let keep = arguments.value("keep") else { throw UsageError("resolve needs --keep local, remote or both") }
            guard let choice = ResolveChoice(rawValue: keep) else {
                var message = "--keep takes local, remote or both, not \(keep)"
                if let guess = nearest(keep, in: ResolveChoice.allCases.map(\.rawValue)) { message += "; did you mean \(guess)?" }
                throw UsageError(message)
            }
            return .resolve(path: recordPath(path), keep: choice)
        case "watch":
            guard let path = operands.first else { throw UsageError("watch needs a PATH: a record path, SaveGames/ for a whole root, or / for all") }
            do { return .watch(try WatchPath(path)) } catch { throw UsageError(error.message) }
        default: throw UsageError("unknown command \(name)")
        }
    }

    /// Record paths are `/`-separated and never start with one; a leading `./` typed by habit goes.
    /// A root as typed: its name (`SaveGames`, `SaveGames/`) as is; a folder (`.`, `~/SaveGames`) as
    /// the absolute path the agent compares with its roots' folders.
    static func rootName(_ text: String) -> String {
        var name = Substring(text)
        while name.count > 1 && name.hasSuffix("/") { name = name.dropLast() }
        guard name.contains("/") || name == "." || name == ".." else { return String(name) }
        guard let resolved = realpath(String(name), nil) else { return String(name) }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    static func recordPath(_ text: String) -> String {
        var path = Substring(text)
        while path.hasPrefix("./") { path = path.dropFirst(2) }
        while path.count > 1 && path.hasSuffix("/") { path = path.dropLast() }
        return String(path)
    }

    /// One line for people from an answer.
    static func describe(_ request: ControlRequest, _ result: JSONValue) throws(ControlError) -> String {
        switch request {
        case .retry:
            var count: Int64 = 0
            if case let .int(number)? = result["requeued"] { count = number }
            var paths: [String] = []
            if case let .array(items)? = result["paths"] { for case let .string(path) in items { paths.append(path) } }
            if count == 0 { return "nothing to retry: the server refused no change" }
            return "sending \(count) refused change(s) again: " + paths.prefix(10).joined(separator: ", ") + (paths.count > 10 ? ", …" : "")
        case .conflicts:
            let list = try ConflictEntry.list(json: result)
            if list.isEmpty { return "no conflicts wait for sinkid resolve" }
            let now = Clock.now()
            return (list.flatMap { Format.conflict($0, now: now) }
                + ["settle one with sinkid resolve PATH --keep local|remote|both"]).joined(separator: "\n")
        default:
            return try ControlAck(json: result).message
        }
    }

    /// `watch`: the acknowledgement, then each event line as it comes, until the agent hangs up.
    static func follow(_ client: ControlClient, _ request: ControlRequest) throws(ControlError) -> ExitCode {
        _ = try client.send(request)
        client.setTimeout(0)
        while let line = try client.readLine() {
            Output.line(String(decoding: line, as: UTF8.self))
        }
        SinkidCommand.printError("the agent closed the connection (it stopped)")
        return .temporaryFailure
    }

    /// Prints a control error (and with `--json`, an error document on stdout); returns the exit code.
    static func report(_ error: ControlError, json: Bool, stateDirectory: String) -> ExitCode {
        var message = error.message
        if error.code == .notRunning { message += "; start it with sinkid --root PATH (or systemctl --user start sinkid)" }
        SinkidCommand.printError(message)
        if json { Output.json(.object([("error", .object([("code", .string(error.code.rawValue)), ("message", .string(message))]))])) }
        return exitCode(error)
    }

    static func exitCode(_ error: ControlError) -> ExitCode {
        switch error.code {
        case .notRunning: .notRunning
        case .badRequest, .unknownCommand: .usage
        case .notFound: .dataError
        case .forbidden: .noPermission
        case .unavailable, .failed: .temporaryFailure
        case .badResponse: .software
        }
    }

    /// `--state DIR`, else the default state folder.
    static func stateDirectory(_ arguments: Arguments) throws(UsageError) -> String {
        do {
            return try ResolvedConfig.stateDirectory(for: Overrides(stateDirectory: arguments.value("state")), environment: .current())
        } catch {
            throw UsageError(error.description, code: error.exitCode)
        }
    }
}

/// Lines on stdout, flushed at once (a `watch` reader waits for each).
enum Output {
    static func line(_ text: String) {
        print(text)
        fflush(nil)
    }

    static func json(_ value: JSONValue) {
        var writer = JSONWriter()
        value.write(to: &writer)
        line(String(decoding: writer.bytes, as: UTF8.self))
    }

    /// The columns of the terminal stdout is, nil when it is none (a pipe, a file).
    static var terminalColumns: Int? {
        guard isatty(STDOUT_FILENO) == 1 else { return nil }
        var size = winsize()
        guard ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return nil }
        return Int(size.ws_col)
    }

    /// Whether stdout is a terminal that takes colour (and `NO_COLOR` is not set).
    static var isTerminal: Bool { isatty(STDOUT_FILENO) == 1 && getenv("NO_COLOR") == nil && getenv("TERM").map { String(cString: $0) } != "dumb" }
}
