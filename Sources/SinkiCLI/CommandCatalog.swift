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
    public let help: String

    /// What follows a command besides flags.
    public enum Operands: Sendable { case none, path, command, root }

    /// Every flag, as typed (`--state`).
    public var flags: [String] { (valued + boolean).map { "--" + $0 } }
}

/// Every command `sinkid` knows.
public enum CommandCatalog {
    public static let run = CommandSpec(
        name: "run", summary: "run the agent (the default command)",
        valued: ["root", "server", "listen", "state", "device", "token-file", "config", "log-level"], boolean: ["help"],
        operands: .none, help: Help.run)
    public static let serve = CommandSpec(
        name: "serve", summary: "run the sync server; its users and tokens (serve token, serve user)",
        valued: ["listen", "data", "database", "tokens", "log-level", "public-url", "max-upload-size", "upload-expiry", "chunk-grace", "tombstone-days", "history-days", "quota", "rate-limit", "device", "prefix", "max-upload", "max-uploads", "expires", "output"],
        boolean: ["insecure-no-auth", "behind-proxy", "read-only", "yes", "json", "help"],
        operands: .none, help: Help.serve)
    public static let status = CommandSpec(
        name: "status", summary: "what is pending, moving and in conflict", valued: ["state", "config"],
        boolean: ["json", "watch", "help"], operands: .none, help: Help.status)
    public static let pause = CommandSpec(
        name: "pause", summary: "stop sending and applying changes (of all roots or one)", valued: ["state"], boolean: ["json", "help"],
        operands: .root, help: Help.pause)
    public static let resume = CommandSpec(
        name: "resume", summary: "go on after pause; confirm a safety stop", valued: ["state"], boolean: ["json", "help"],
        operands: .root, help: Help.resume)
    public static let sync = CommandSpec(
        name: "sync", summary: "look at the disk and ask the server now", valued: ["state"], boolean: ["json", "verify", "help"],
        operands: .none, help: Help.sync)
    public static let retry = CommandSpec(
        name: "retry", summary: "send again what the server refused", valued: ["state"], boolean: ["json", "help"],
        operands: .path, help: Help.retry)
    public static let conflicts = CommandSpec(
        name: "conflicts", summary: "list conflicts left by the ask rule", valued: ["state"], boolean: ["json", "help"],
        operands: .none, help: Help.conflicts)
    public static let resolve = CommandSpec(
        name: "resolve", summary: "settle a conflict", valued: ["keep", "state"], boolean: ["json", "help"],
        operands: .path, help: Help.resolve)
    public static let watch = CommandSpec(
        name: "watch", summary: "print remote changes applied under a path", valued: ["state"], boolean: ["help"],
        operands: .path, help: Help.watch)
    public static let history = CommandSpec(
        name: "history", summary: "list the versions the server keeps of a path", valued: ["state"], boolean: ["json", "help"],
        operands: .path, help: Help.history)
    public static let cat = CommandSpec(
        name: "cat", summary: "write one kept version of a file to standard output", valued: ["version", "state"], boolean: ["help"],
        operands: .path, help: Help.cat)
    public static let restore = CommandSpec(
        name: "restore", summary: "make a kept version current again, or a folder what it was at a moment",
        valued: ["version", "to", "at", "state"], boolean: ["dry-run", "json", "help"], operands: .path, help: Help.restore)
    public static let upload = CommandSpec(
        name: "upload", summary: "upload one file to a tus server (resumable)",
        valued: ["to", "header", "metadata", "state", "token-file", "ca-file", "chunk-size", "parallel", "attempts", "max-rate", "log-level"],
        boolean: ["help", "no-checksum"], operands: .path, help: Help.upload)
    public static let completion = CommandSpec(
        name: "completion", summary: "print the bash, zsh or fish completion script", valued: [], boolean: ["help"],
        operands: .none, help: Help.completion)
    public static let help = CommandSpec(
        name: "help", summary: "help for a command", valued: [], boolean: ["help"], operands: .command, help: Help.helpCommand)

    public static let all = [run, serve, upload, status, pause, resume, sync, retry, conflicts, resolve, watch, history, cat, restore, completion, help]

    public static func spec(_ name: String) -> CommandSpec? { all.first { $0.name == name } }
}

extension Arguments {
    /// Parses `words` against the flags of `spec`.
    init(_ words: [String], _ spec: CommandSpec) throws(UsageError) {
        try self.init(words, valued: spec.valued, boolean: spec.boolean)
    }
}
