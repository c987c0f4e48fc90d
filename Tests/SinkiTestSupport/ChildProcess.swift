import CSystemShim
import Foundation
import Glibc
import SinkiSupport

/// A real process started by a test, its output captured to files, stopped by process id.
///
/// Spawned with `posix_spawn`, not Foundation's `Process`: the child opens its own output files, so
/// the test process holds no descriptor of them for another thread's spawn or close to trip over.
/// With `Process` and `FileHandle`s, a full run once found what reads as a log line at the start of a
/// `sinkid status --json` run's stdout file; and its child monitor at times stopped noticing exits.
public final class ChildProcess: @unchecked Sendable {
    // @unchecked: the one mutable field, the wait status, is read and written under `lock`.
    /// How a process ended.
    public enum Termination: Equatable, Sendable {
        case exit(Int32)
        case signal(Int32)
    }

    public let pid: Int32
    public let outputPath: String
    public let errorPath: String
    public let arguments: [String]
    private let lock = NSLock()
    private var ended: Termination?

    /// Starts `executable` with `arguments`; stdout and stderr go to files in `logDirectory`.
    public init(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
                logDirectory: String, label: String, workingDirectory: String? = nil) throws {
        self.arguments = arguments
        outputPath = logDirectory + "/\(label).out"
        errorPath = logDirectory + "/\(label).err"
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, errorPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        if let workingDirectory { sinki_spawn_addchdir(&actions, workingDirectory) }
        // Descriptors another thread opened without O_CLOEXEC (a test's own files, Foundation's) stay here.
        sinki_spawn_addclosefrom(&actions, 3)

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = env.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var child = pid_t()
        let status = SpawnAttributes.withFreshSignals(ownGroup: false) { attributes in
            posix_spawn(&child, executable, &actions, attributes, argv, envp)
        }
        guard status == 0 else { throw SpawnFailed(executable: executable, errno: status) }
        pid = child
    }

    /// Until the process has exited; it is reaped here, its end kept for `termination`.
    public var isRunning: Bool { lock.withLock { poll(blocking: false) } == nil }

    /// How the process ended; nil while it runs.
    public var termination: Termination? { lock.withLock { poll(blocking: false) } }

    public var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }
    public var errors: String { (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? "" }

    public func signal(_ signal: Int32) { if isRunning { kill(pid, signal) } }

    /// Sends SIGTERM and waits for the exit status (SIGKILL after `timeout`).
    @discardableResult
    public func stop(timeout: Double = 10) -> Int32 {
        signal(SIGTERM)
        return waitForExit(timeout: timeout)
    }

    /// SIGKILL, then the exit.
    public func kill9() {
        signal(SIGKILL)
        _ = lock.withLock { poll(blocking: true) }
    }

    /// Waits for the exit status (the signal's number for a killed process); kills the process if it
    /// outlives `timeout`.
    @discardableResult
    public func waitForExit(timeout: Double = 30) -> Int32 {
        let deadline = Date().addingTimeInterval(timeout)
        while isRunning && Date() < deadline { usleep(5_000) }
        if isRunning { kill(pid, SIGKILL) }
        switch lock.withLock({ poll(blocking: true) }) {
        case let .exit(code)?: return code
        case let .signal(number)?: return number
        case nil: return -1
        }
    }

    /// Reaps the child if it has exited (or, `blocking`, once it has); called under `lock`.
    private func poll(blocking: Bool) -> Termination? {
        if let ended { return ended }
        var status: Int32 = 0
        while true {
            let result = waitpid(pid, &status, blocking ? 0 : WNOHANG)
            if result == 0 { return nil }
            if result < 0 && errno == EINTR { continue }
            if result < 0 {
                // Reaped by someone else (nothing here does): it has ended, how is unknown.
                ended = .exit(-1)
                return ended
            }
            break
        }
        // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift does not import.
        ended = status & 0x7f == 0 ? .exit((status >> 8) & 0xff) : .signal(status & 0x7f)
        return ended
    }

    deinit {
        if isRunning {
            kill(pid, SIGKILL)
            _ = lock.withLock { poll(blocking: true) }
        }
    }
}

extension ChildProcess {
    /// Whether the process has taken `signal` into its own hands: blocked it or set a handler (its main
    /// thread's `SigBlk` and `SigCgt`). Before that, in the instant between exec and the first lines of
    /// main, the signal's default action ends any program, sinkid too.
    public func handles(_ signal: Int32) -> Bool {
        let bit: UInt64 = 1 << UInt64(signal - 1)
        return ((Self.signalSet("SigBlk", of: pid) ?? 0) | (Self.signalSet("SigCgt", of: pid) ?? 0)) & bit != 0
    }

    /// A signal set of `pid`'s main thread from `/proc/PID/status` (`SigBlk`, `SigIgn`, `SigCgt`); nil
    /// once it is gone.
    public static func signalSet(_ field: String, of pid: Int32) -> UInt64? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") }) else { return nil }
        return UInt64(line.dropFirst(field.count + 1).trimmingCharacters(in: .whitespaces), radix: 16)
    }
}

/// `posix_spawn` refused to start a test's child.
public struct SpawnFailed: Error, CustomStringConvertible {
    public var executable: String
    public var errno: Int32
    public var description: String { "cannot start \(executable): \(String(cString: strerror(errno)))" }
}

/// Where the built `sinkid` executable is: next to the test bundle in the build folder.
public func sinkidExecutable() -> String {
    if let override = ProcessInfo.processInfo.environment["SINKID"] { return override }
    let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    var directory = URL(fileURLWithPath: exe).deletingLastPathComponent()
    for _ in 0..<4 {
        let candidate = directory.appendingPathComponent("sinkid").path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        directory = directory.deletingLastPathComponent()
    }
    fatalError("sinkid executable not found near \(exe); build it first (swift build)")
}
