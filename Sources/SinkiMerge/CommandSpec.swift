import SinkiConfig

/// A program to run for a merge rule or an observer: argv as the config split it, never through a
/// shell, with its environment, working folder and time limit.
public struct CommandSpec: Sendable, Equatable {
    /// The absolute path of the program.
    public var executable: String
    /// The whole argv, `argv[0]` included (the program as the user wrote it).
    public var arguments: [String]
    /// The child's complete environment.
    public var environment: [String: String]
    /// The child's working folder; nil keeps the agent's.
    public var directory: String?
    /// After this, the child's whole process group is killed (SIGKILL) and the run counts as failed.
    public var timeout: Duration
    /// Bytes of stdout and of stderr kept (the last ones: that is where errors usually are).
    public var outputLimit: Int
    /// Whether what the program left running in its process group is killed once it exits. Merge
    /// commands: yes (their folder is about to be removed). Observers: no (one may start a program
    /// that outlives it on purpose).
    public var killGroupOnExit: Bool
    /// Whether to wait through a pidfd; false takes the path for kernels without one. Not meant to
    /// be changed, but changeable for tests.
    var usePidfd = true

    public init(executable: String, arguments: [String], environment: [String: String], directory: String? = nil,
                timeout: Duration, outputLimit: Int = 64 << 10, killGroupOnExit: Bool) {
        self.executable = executable
        self.arguments = arguments
        self.environment = environment
        self.directory = directory
        self.timeout = timeout
        self.outputLimit = outputLimit
        self.killGroupOnExit = killGroupOnExit
    }

    /// A config command with its placeholders substituted.
    public init(_ template: CommandTemplate, substituting values: [Placeholder: String], environment: [String: String],
                directory: String? = nil, timeout: Duration, outputLimit: Int = 64 << 10, killGroupOnExit: Bool) {
        self.init(executable: template.executable, arguments: template.arguments(substituting: values), environment: environment,
                  directory: directory, timeout: timeout, outputLimit: outputLimit, killGroupOnExit: killGroupOnExit)
    }
}

/// How a command ended and what it printed.
public struct CommandResult: Sendable, Equatable {
    /// How the process ended.
    public enum Termination: Sendable, Equatable {
        case exited(Int32)
        case signaled(Int32)
        /// Still running at the deadline: its process group was killed.
        case timedOut
        /// It could not be started (the message says why: `posix_spawn: No such file or directory`).
        case notStarted(String)
        /// It ended, but its status was collected by someone else in this process.
        case unknown
    }

    public var termination: Termination
    public var stdout: CapturedOutput
    public var stderr: CapturedOutput
    public var elapsed: Duration

    public init(termination: Termination, stdout: CapturedOutput = CapturedOutput(), stderr: CapturedOutput = CapturedOutput(),
                elapsed: Duration = .zero) {
        self.termination = termination
        self.stdout = stdout
        self.stderr = stderr
        self.elapsed = elapsed
    }

    /// The exit code when the process exited on its own.
    public var exitCode: Int32? {
        if case let .exited(code) = termination { return code }
        return nil
    }

    /// One line for the log: how it ended, how long it took, and the last line of its stderr.
    public var summary: String {
        var text: String
        switch termination {
        case let .exited(code): text = "exit \(code)"
        case let .signaled(signal): text = "killed by signal \(signal)"
        case .timedOut: text = "timed out, killed"
        case let .notStarted(why): text = "not started (\(why))"
        case .unknown: text = "ended with an unknown status"
        }
        let milliseconds = elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000
        text += " after \(milliseconds) ms"
        if let line = stderr.lastLine { text += ": " + line }
        return text
    }
}

/// The end of what a command wrote to one stream, bounded.
public struct CapturedOutput: Sendable, Equatable {
    /// The last bytes written (at most the command's `outputLimit`).
    public var bytes: [UInt8]
    /// How many bytes were written in all.
    public var total: Int

    public init(bytes: [UInt8] = [], total: Int = 0) {
        self.bytes = bytes
        self.total = total
    }

    /// Whether bytes were dropped from the front.
    public var truncated: Bool { total > bytes.count }

    /// The kept bytes as text (invalid UTF-8 repaired).
    public var text: String { String(decoding: bytes, as: UTF8.self) }

    /// The last line that is not blank, for a one-line log, at most 200 characters.
    public var lastLine: String? {
        let line = text.split(whereSeparator: \.isNewline).last { !$0.allSatisfy(\.isWhitespace) }
        return line.map { String($0.prefix(200)) }
    }

    mutating func append(_ chunk: UnsafeRawBufferPointer, limit: Int) {
        total += chunk.count
        bytes += chunk
        // Trim in large steps so that a chatty command costs amortised O(1) per byte.
        if bytes.count > 2 * limit { bytes.removeFirst(bytes.count - limit) }
    }

    mutating func finish(limit: Int) {
        if bytes.count > limit { bytes.removeFirst(bytes.count - limit) }
    }
}
