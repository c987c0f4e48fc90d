import Foundation

/// A real process started by a test, its output captured to files, stopped by process id.
public final class ChildProcess: @unchecked Sendable {
    // @unchecked: Process is thread-safe for the calls used here (pid, isRunning, terminationStatus).
    public let process: Process
    public let outputPath: String
    public let errorPath: String
    public let arguments: [String]

    /// Starts `executable` with `arguments`; stdout and stderr go to files in `logDirectory`.
    public init(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
                logDirectory: String, label: String, workingDirectory: String? = nil) throws {
        self.arguments = arguments
        process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        process.environment = env
        if let workingDirectory { process.currentDirectoryURL = URL(fileURLWithPath: workingDirectory) }
        outputPath = logDirectory + "/\(label).out"
        errorPath = logDirectory + "/\(label).err"
        _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
        _ = FileManager.default.createFile(atPath: errorPath, contents: nil)
        process.standardOutput = FileHandle(forWritingAtPath: outputPath)
        process.standardError = FileHandle(forWritingAtPath: errorPath)
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    public var pid: Int32 { process.processIdentifier }
    public var isRunning: Bool { process.isRunning }

    public var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }
    public var errors: String { (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? "" }

    public func signal(_ signal: Int32) { if process.isRunning { kill(pid, signal) } }

    /// Sends SIGTERM and waits for the exit status (SIGKILL after `timeout`).
    @discardableResult
    public func stop(timeout: Double = 10) -> Int32 {
        signal(SIGTERM)
        return waitForExit(timeout: timeout)
    }

    /// SIGKILL, then the exit.
    public func kill9() {
        signal(SIGKILL)
        waitUntilGone()
    }

    /// Waits for the exit status; kills the process if it outlives `timeout`.
    @discardableResult
    public func waitForExit(timeout: Double = 30) -> Int32 {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { kill(pid, SIGKILL) }
        return waitUntilGone() ? process.terminationStatus : exitedStatus(of: pid) ?? -1
    }

    /// Waits until the process has exited; true when Foundation saw it (its status is then
    /// `terminationStatus`). Not `waitUntilExit`: in some full runs Foundation's child monitor stopped
    /// noticing exits (the children stayed zombies), and every test waiting on one hung the whole run
    /// until CI's timeout. The kernel is asked too, without reaping (Foundation still may).
    @discardableResult
    private func waitUntilGone() -> Bool {
        var exitedAt: Date?
        while process.isRunning {
            // Foundation notices within milliseconds when it works: it is given 10 s after the exit.
            if exitedAt == nil, exitedStatus(of: pid) != nil { exitedAt = Date() }
            if let exitedAt, Date().timeIntervalSince(exitedAt) > 10 { return false }
            usleep(5_000)
        }
        return true
    }

    deinit { if process.isRunning { kill(pid, SIGKILL); waitUntilGone() } }
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

/// The exit status (or killing signal) of child `pid` if it has exited, asked of the kernel without
/// reaping it (`WNOWAIT`); nil while it runs.
func exitedStatus(of pid: Int32) -> Int32? {
    var info = siginfo_t()
    guard waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0, info._sifields._sigchld.si_pid == pid else { return nil }
    return info._sifields._sigchld.si_status
}

extension Process {
    /// The exit status, from Foundation once it has seen the exit, else from the kernel (see
    /// `ChildProcess.waitUntilGone`).
    public func exitStatus() -> Int32 {
        var exitedAt: Date?
        while isRunning {
            if exitedAt == nil, exitedStatus(of: processIdentifier) != nil { exitedAt = Date() }
            if let exitedAt, Date().timeIntervalSince(exitedAt) > 10 { return exitedStatus(of: processIdentifier) ?? -1 }
            usleep(5_000)
        }
        return terminationStatus
    }
}
