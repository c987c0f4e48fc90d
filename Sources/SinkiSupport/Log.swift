import Glibc
import Synchronization

/// How much a log line matters; lines below the logger's level are dropped.
public enum LogLevel: Int, Sendable, Comparable, CaseIterable {
    case debug, info, warning, error

    public init?(name: String) {
        switch name.lowercased() {
        case "debug", "trace": self = .debug
        case "info": self = .info
        case "warning", "warn": self = .warning
        case "error": self = .error
        default: return nil
        }
    }

    public var name: String { ["debug", "info", "warning", "error"][rawValue] }
    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// One line per event on stderr, with time, level and component; colour only on a terminal.
public final class Logger: Sendable {
    private let level: Mutex<LogLevel>
    private let label: String
    private let colour: Bool
    private let sink: Int32

    public init(label: String, level: LogLevel = .info, fd: Int32 = STDERR_FILENO) {
        self.level = Mutex(level)
        self.label = label
        self.sink = fd
        self.colour = isatty(fd) == 1 && getenv("NO_COLOR") == nil
    }

    private init(label: String, level: LogLevel, colour: Bool, sink: Int32) {
        self.level = Mutex(level)
        self.label = label
        self.colour = colour
        self.sink = sink
    }

    /// A logger for a sub-component, sharing this one's output.
    public func child(_ label: String) -> Logger {
        Logger(label: label, level: level.withLock { $0 }, colour: colour, sink: sink)
    }

    public var minimumLevel: LogLevel {
        get { level.withLock { $0 } }
    }

    public func setLevel(_ newLevel: LogLevel) { level.withLock { $0 = newLevel } }

    public func isEnabled(_ lineLevel: LogLevel) -> Bool { lineLevel >= level.withLock { $0 } }

    public func log(_ lineLevel: LogLevel, _ message: @autoclosure () -> String) {
        guard isEnabled(lineLevel) else { return }
        let stamp = Clock.iso8601(Clock.now())
        var tag = lineLevel.name.uppercased()
        if colour {
            let code = ["2", "0", "33", "31"][lineLevel.rawValue]
            tag = "\u{1B}[\(code)m\(tag)\u{1B}[0m"
        }
        let text = "\(stamp) \(tag) \(label): \(message())\n"
        // One write per line keeps lines whole when several threads log at once.
        var bytes = Array(text.utf8)
        _ = bytes.withUnsafeMutableBytes { write(sink, $0.baseAddress, $0.count) }
    }

    public func debug(_ message: @autoclosure () -> String) { log(.debug, message()) }
    public func info(_ message: @autoclosure () -> String) { log(.info, message()) }
    public func warning(_ message: @autoclosure () -> String) { log(.warning, message()) }
    public func error(_ message: @autoclosure () -> String) { log(.error, message()) }
}
