import Glibc
import SinkiConfig
import SinkiSupport

/// The `sinkid` command line (design §1).
public enum SinkidCommand {
    public static let version = "0.1.0"

    static var commands: [String] { CommandCatalog.all.map(\.name) }

    /// Runs the command line and returns the process exit code.
    public static func main(_ arguments: [String]) -> Int32 {
        Digest.keepLibraryUntilExit()
        // A peer that hangs up mid-response must not kill the process.
        signal(SIGPIPE, SIG_IGN)
        var words = Array(arguments.dropFirst())
        // `sinkid` alone is `sinkid run` when the config file names roots (help calls run the
        // default command); without one it prints the overview, as before.
        if words.isEmpty, configNamesRoots() { words = ["run"] }
        // The agent holds these blocked until its loop watches them (`LoopSignal` unblocks each): a
        // SIGTERM in its first milliseconds then stops it cleanly instead of killing it. Every other
        // command takes them at their defaults, whatever mask a parent left (one inherited through a
        // worker thread would otherwise keep Ctrl-C from ending `sinkid status`). Children of the
        // agent (observers, merge commands) get an empty mask from `CommandRunner`.
        var signals = sigset_t()
        sigemptyset(&signals)
        for number in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&signals, number) }
        let runsTheAgent = words.first.map { $0 == "run" || ($0.hasPrefix("-") && !["--version", "--help", "-h"].contains($0)) } ?? false
        pthread_sigmask(runsTheAgent ? SIG_BLOCK : SIG_UNBLOCK, &signals, nil)
        if words.first == "--version" || words.first == "version" {
            print("sinkid \(version)")
            return ExitCode.success.rawValue
        }
        if words.isEmpty || words.first == "--help" || words.first == "-h" {
            print(Help.overview)
            return words.isEmpty ? ExitCode.usage.rawValue : ExitCode.success.rawValue
        }
        let command: String
        if let first = words.first, !first.hasPrefix("-") {
            command = first
            words.removeFirst()
        } else {
            command = "run"
        }
        do throws(UsageError) {
            switch command {
            case "run": return try RunCommand.run(words).rawValue
            case "serve": return try ServeCommand.run(words).rawValue
            case "status": return try StatusCommand.run(words).rawValue
            case "pause", "resume", "sync", "retry", "conflicts", "resolve", "watch":
                return try ControlCommands.run(command, words).rawValue
            case "history", "cat", "restore": return try HistoryCommands.run(command, words).rawValue
            case "completion": return try CompletionCommand.run(words).rawValue
            case "upload": return try UploadCommand.run(words).rawValue
            case "help":
                let arguments = try Arguments(words, CommandCatalog.help)
                if arguments.has("help") { print(CommandCatalog.help.fullHelp); return 0 }
                guard let topic = arguments.positional.first else { print(Help.overview); return 0 }
                guard let text = Help.command(topic) else { throw UsageError(unknownCommand(topic)) }
                print(text)
                return 0
            default:
                throw UsageError(unknownCommand(command))
            }
        } catch {
            printError(error.message)
            return error.code.rawValue
        }
    }

    /// Whether the default config file (`$XDG_CONFIG_HOME/sinki/sinki.conf` or `~/.config/sinki/sinki.conf`)
    /// exists and has a `[root]`. A config that cannot be read counts: the agent then says why, with its
    /// file and line, rather than the overview hiding it.
    static func configNamesRoots() -> Bool {
        let environment = ProcessEnvironment.current()
        guard let path = try? ResolvedConfig.configPath(for: Overrides(), environment: environment) else { return false }
        guard let config = try? ConfigFile.load(path: path, environment: environment, source: path) else { return true }
        return !config.roots.isEmpty
    }

    static func unknownCommand(_ word: String) -> String {
        var message = "unknown command \(word)"
        if let guess = nearest(word, in: commands) { message += "; did you mean \(guess)?" }
        return message + " (see sinkid --help)"
    }

    static func printError(_ message: String) {
        var line = Array("sinkid: \(message)\n".utf8)
        _ = line.withUnsafeMutableBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }
}
