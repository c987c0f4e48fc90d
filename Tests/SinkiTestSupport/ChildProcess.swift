import Foundation

/// A real process started by a test, its output captured to files, stopped by process id.
public final class ChildProcess: @unchecked Sendable {
    // @unchecked: Process is thread-safe for the calls used here (pid, terminate, waitUntilExit).
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
        process.waitUntilExit()
    }

    /// Waits for the exit status; kills the process if it outlives `timeout`.
    @discardableResult
    public func waitForExit(timeout: Double = 30) -> Int32 {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { kill(pid, SIGKILL) }
        process.waitUntilExit()
        return process.terminationStatus
    }

    deinit { if process.isRunning { kill(pid, SIGKILL); process.waitUntilExit() } }
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
