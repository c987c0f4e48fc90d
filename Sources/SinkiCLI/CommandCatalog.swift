import SinkiSupport

/// One `sinkid` command: its flags and help. The parser, `help`, the shell completions and the
/// man-page test all read this table, so they cannot drift apart.
public struct CommandSpec: Sendable {
    public let name: String
    /// One line for the overview.
    public let summary: String
    /// Flags that take a value.
    public let valued: [String]
    /// Flags that do not.
    public let boolean: [String]
    /// Positional arguments, as the usage line writes them (for completions: none, a path, a command).
    public let operands: Operands
    /// Words that name an action after the command (`serve token add`): each noun and its actions.
    public var subcommands: [Subcommand] = []
    /// Every status the command exits with, and what each means for it (help, man page, tests).
    public let exits: [Exit]
    public let help: String

    /// What follows a command besides flags.
    public enum Operands: Sendable { case none, path, command, root }

    /// `serve token` with `add`, `list`, `revoke`.
    public struct Subcommand: Sendable {
        public let noun: String
        public let actions: [String]
    }

    /// An exit status and its meaning for this command.
    public struct Exit: Sendable {
        public let code: ExitCode
        public let meaning: String
        init(_ code: ExitCode, _ meaning: String) {
            self.code = code
            self.meaning = meaning
        }
    }

    init(name: String, summary: String, valued: [String], boolean: [String], operands: Operands, subcommands: [Subcommand] = [],
         exits: [Exit], help: String) {
        self.name = name
        self.summary = summary
        self.valued = valued
        self.boolean = boolean
        self.operands = operands
        self.subcommands = subcommands
        self.exits = exits
        self.help = help
    }

    /// The help text with the exit statuses after it, as `help COMMAND` and `COMMAND --help` print it.
    public var fullHelp: String {
        let lines = exits.map { "  " + String($0.code.rawValue).padding(5) + $0.meaning }
        return help + "\n\nexit status:\n" + lines.joined(separator: "\n")
    }

    /// The actions of `noun` (`serve token`: add, list, revoke), as "add, list or revoke".
    public func actionList(_ noun: String) -> String {
        let actions = subcommands.first { $0.noun == noun }?.actions ?? []
        guard actions.count > 1 else { return actions.joined() }
        return actions.dropLast().joined(separator: ", ") + " or " + actions.last!
    }

    /// Every flag, as typed (`--state`).
    public var flags: [String] { (valued + boolean).map { "--" + $0 } }
}

/// Every command `sinkid` knows.
public enum CommandCatalog {
    typealias Exit = CommandSpec.Exit
    typealias Subcommand = CommandSpec.Subcommand

    public static let run = CommandSpec(
        name: "run", summary: "run the agent (the default command)",
        valued: ["root", "server", "listen", "state", "device", "token-file", "config", "log-level"], boolean: ["help"],
        operands: .none, exits: [Exit(.success, "stopped by SIGTERM or SIGINT"), Exit(.usage, "a wrong command line: an unknown flag, no root, a --root that does not exist"),
               Exit(.unavailable, "the embedded server cannot listen on --listen (another sinkid uses it?)"),
               Exit(.software, "inotify cannot be started, or an unexpected failure (its message says which)"),
               Exit(.ioError, "the state folder or its database cannot be made, read or written"),
               Exit(.temporaryFailure, "another sinkid runs with the same state folder"),
               Exit(.config, "FILE:LINE: the config file's error, a root it names that does not exist, a token or CA file that cannot be read")],
        help: Help.run)
    public static let serve = CommandSpec(
        name: "serve", summary: "run the sync server; its users and tokens (serve token, serve user)",
        valued: ["listen", "data", "database", "tokens", "log-level", "public-url", "max-upload-size", "upload-expiry", "chunk-grace", "tombstone-days", "history-days", "quota", "rate-limit", "device", "prefix", "max-upload", "max-uploads", "expires", "output"],
        boolean: ["insecure-no-auth", "behind-proxy", "read-only", "yes", "json", "help"],
        operands: .none, subcommands: [Subcommand(noun: "token", actions: ["add", "list", "revoke"]), Subcommand(noun: "user", actions: ["list", "quota", "remove"])],
        exits: [Exit(.success, "stopped by SIGTERM or SIGINT, or a token or user command done"), Exit(.usage, "a wrong command line"),
               Exit(.dataError, "token revoke, user remove: no such token or user"),
               Exit(.unavailable, "the address cannot be listened on, or the database cannot be opened"),
               Exit(.software, "a bug (its message says which)"),
               Exit(.ioError, "token add --output: the file cannot be written"),
               Exit(.config, "a --tokens file that cannot be read, or --data that is no server's data folder")],
        help: Help.serve)
    public static let status = CommandSpec(
        name: "status", summary: "what is pending, moving and in conflict", valued: ["state", "config"],
        boolean: ["json", "watch", "help"], operands: .none, exits: [Exit(.success, "the agent answered"), Exit(.notRunning, "no agent runs with the state folder (what its database holds is shown)"),
               Exit(.usage, "a wrong command line"), Exit(.software, "the agent's answer is not what this sinkid understands"),
               Exit(.temporaryFailure, "the agent could not answer (stopping), or the state database cannot be read"),
               Exit(.noPermission, "the agent runs as another user"), Exit(.config, "the state folder cannot be worked out (no HOME)")],
        help: Help.status)
    public static let pause = CommandSpec(
        name: "pause", summary: "stop sending and applying changes (of all roots or one)", valued: ["state"], boolean: ["json", "help"],
        operands: .root, exits: controlExits,
        help: Help.pause)
    public static let resume = CommandSpec(
        name: "resume", summary: "go on after pause; confirm a safety stop", valued: ["state"], boolean: ["json", "help"],
        operands: .root, exits: controlExits,
        help: Help.resume)
    public static let sync = CommandSpec(
        name: "sync", summary: "look at the disk and ask the server now", valued: ["state"], boolean: ["json", "verify", "help"],
        operands: .none, exits: controlExits,
        help: Help.sync)
    public static let retry = CommandSpec(
        name: "retry", summary: "send again what the server refused", valued: ["state"], boolean: ["json", "help"],
        operands: .path, exits: controlExits,
        help: Help.retry)
    public static let conflicts = CommandSpec(
        name: "conflicts", summary: "list conflicts left by the ask rule", valued: ["state"], boolean: ["json", "help"],
        operands: .none, exits: controlExits,
        help: Help.conflicts)
    public static let resolve = CommandSpec(
        name: "resolve", summary: "settle a conflict", valued: ["keep", "state"], boolean: ["json", "help"],
        operands: .path, exits: controlExits,
        help: Help.resolve)
    public static let watch = CommandSpec(
        name: "watch", summary: "print remote changes applied under a path", valued: ["state"], boolean: ["help"],
        operands: .path, exits: controlExits,
        help: Help.watch)
    public static let history = CommandSpec(
        name: "history", summary: "list the versions the server keeps of a path", valued: ["state"], boolean: ["json", "help"],
        operands: .path, exits: historyExits, help: Help.history)
    public static let cat = CommandSpec(
        name: "cat", summary: "write one kept version of a file to standard output", valued: ["version", "state"], boolean: ["help"],
        operands: .path, exits: historyExits, help: Help.cat)
    public static let restore = CommandSpec(
        name: "restore", summary: "make a kept version current again, or a folder what it was at a moment",
        valued: ["version", "to", "at", "state"], boolean: ["dry-run", "json", "help"], operands: .path, exits: historyExits, help: Help.restore)
    public static let upload = CommandSpec(
        name: "upload", summary: "upload one file to a tus server (resumable)",
        valued: ["to", "header", "metadata", "state", "token-file", "ca-file", "chunk-size", "parallel", "attempts", "max-rate", "log-level"],
        boolean: ["help", "no-checksum"], operands: .path, exits: [Exit(.success, "uploaded: the upload's URL is printed"), Exit(.usage, "a wrong command line"),
               Exit(.dataError, "the server refused the data, or the file changed while it was sent"),
               Exit(.unavailable, "the server is out of reach (after --attempts tries)"),
               Exit(.software, "an unexpected failure (its message says which)"),
               Exit(.ioError, "the file or the state database cannot be read or written"), Exit(.temporaryFailure, "the server failed (5xx): try again later"),
               Exit(.config, "a token or CA file that cannot be read, a config file's error, a server certificate not trusted (--ca-file)")],
        help: Help.upload)
    public static let completion = CommandSpec(
        name: "completion", summary: "print the bash, zsh or fish completion script", valued: [], boolean: ["help"],
        operands: .none, exits: [Exit(.success, "the script was printed"), Exit(.usage, "no such shell")],
        help: Help.completion)
    public static let help = CommandSpec(
        name: "help", summary: "help for a command", valued: [], boolean: ["help"], operands: .command, exits: [Exit(.success, "the help was printed"), Exit(.usage, "no such command")],
        help: Help.helpCommand)

    /// history, cat and restore: the agent is asked where its server is, the server answers.
    static let historyExits = [
        Exit(.success, "done (cat: the version's bytes were written)"), Exit(.notRunning, "no agent runs with the state folder"),
        Exit(.usage, "a wrong command line, or a request the server refused as malformed"),
        Exit(.dataError, "no such path, version or moment at the server (or a version that is a delete or a folder, for cat)"),
        Exit(.unavailable, "the server is out of reach"),
        Exit(.software, "an answer this sinkid does not understand, or content that does not match its hash"),
        Exit(.temporaryFailure, "the server is busy or its storage is full; try again later"),
        Exit(.noPermission, "the token may not do it (read-only, or beyond its prefix), or the agent runs as another user"),
        Exit(.config, "the agent's token file cannot be read, or the state folder cannot be worked out")]

    /// The commands that talk to a running agent exit alike.
    static let controlExits = [
        Exit(.success, "done"), Exit(.notRunning, "no agent runs with the state folder"), Exit(.usage, "a wrong command line"),
        Exit(.dataError, "nothing at the path or root given (no such conflict, refusal or root)"),
        Exit(.software, "the agent's answer is not what this sinkid understands"),
        Exit(.temporaryFailure, "the agent could not carry it out now (starting, stopping, or it failed), or watch: the agent stopped"),
        Exit(.noPermission, "the agent runs as another user"), Exit(.config, "the state folder cannot be worked out (no HOME)")]

    public static let all = [run, serve, upload, status, pause, resume, sync, retry, conflicts, resolve, watch, history, cat, restore, completion, help]

    public static func spec(_ name: String) -> CommandSpec? { all.first { $0.name == name } }
}

extension Arguments {
    /// Parses `words` against the flags of `spec`.
    init(_ words: [String], _ spec: CommandSpec) throws(UsageError) {
        try self.init(words, valued: spec.valued, boolean: spec.boolean)
    }

    /// `words` parsed against `spec`, or nil when they ask for help: the help (exit statuses
    /// included) is printed here, so every command answers `--help` and `-h` alike and exits 0.
    static func orHelp(_ words: [String], _ spec: CommandSpec) throws(UsageError) -> Arguments? {
        let arguments = try Arguments(words, spec)
        guard arguments.has("help") else { return arguments }
        print(spec.fullHelp)
        return nil
    }
}
