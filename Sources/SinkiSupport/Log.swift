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

/// The last warning or error a logger wrote, for `sinkid status`.
public struct LoggedProblem: Sendable, Equatable {
    /// Nanoseconds since the epoch.
    public var at: Int64
    public var level: LogLevel
    /// The component and message, as in the line.
    public var message: String
    /// Times it was logged in a row (the same level and words): a problem that repeats is one problem.
    public var count = 1
}

/// One line per event on stderr, with time, level and component; colour only on a terminal.
/// A logger and its children share one level (a reload changes them all) and one memory of the
/// last problem logged.
public final class Logger: Sendable {
    private final class Shared: Sendable {
        let level: Mutex<LogLevel>
        let lastProblem = Mutex<LoggedProblem?>(nil)
        init(level: LogLevel) { self.level = Mutex(level) }
    }

    private let shared: Shared
    private let label: String
    private let colour: Bool
    /// The line goes to systemd's journal: it starts with its syslog priority, so `journalctl -p` filters it.
    private let journal: Bool
    private let sink: Int32

    public init(label: String, level: LogLevel = .info, fd: Int32 = STDERR_FILENO) {
        self.shared = Shared(level: level)
        self.label = label
        self.sink = fd
        self.journal = Self.isJournal(fd)
        self.colour = !journal && isatty(fd) == 1 && getenv("NO_COLOR") == nil
    }

    private init(label: String, shared: Shared, colour: Bool, journal: Bool, sink: Int32) {
        self.shared = shared
        self.label = label
        self.colour = colour
        self.journal = journal
        self.sink = sink
    }

    /// A logger for a sub-component, sharing this one's output, level and last problem.
    public func child(_ label: String) -> Logger {
        Logger(label: label, shared: shared, colour: colour, journal: journal, sink: sink)
    }

    /// Whether `fd` is the stream systemd connected to the journal: `JOURNAL_STREAM` names its device
    /// and inode (`DEV:INO`), so output redirected elsewhere by the unit's command is not taken for it.
    static func isJournal(_ fd: Int32) -> Bool {
        guard let value = getenv("JOURNAL_STREAM").map({ String(cString: $0) }) else { return false }
        let parts = value.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return false }
        return UInt64(info.st_dev) == device && UInt64(info.st_ino) == inode
    }

    /// The syslog priority prefix of a line of `level` (sd-daemon(3)): debug 7, info 6, warning 4, error 3.
    static func journalPrefix(_ level: LogLevel) -> String { ["<7>", "<6>", "<4>", "<3>"][level.rawValue] }

    public var minimumLevel: LogLevel {
        get { shared.level.withLock { $0 } }
    }

    /// Changes the level of this logger and of every logger that shares it.
    public func setLevel(_ newLevel: LogLevel) { shared.level.withLock { $0 = newLevel } }

    public func isEnabled(_ lineLevel: LogLevel) -> Bool { lineLevel >= shared.level.withLock { $0 } }

    /// The last warning or error logged through this logger or a relative, even if not written.
    public var lastProblem: LoggedProblem? { shared.lastProblem.withLock { $0 } }

    public func log(_ lineLevel: LogLevel, _ message: @autoclosure () -> String) {
        if lineLevel >= .warning {
            let now = Clock.now()
            let text = message()
            let line = "\(label): \(text)"
            shared.lastProblem.withLock { last in
                let again = last.map { $0.level == lineLevel && $0.message == line } ?? false
                last = LoggedProblem(at: now, level: lineLevel, message: line, count: again ? (last?.count ?? 0) + 1 : 1)
            }
            emit(lineLevel, text, at: now)
            return
        }
        guard isEnabled(lineLevel) else { return }
        emit(lineLevel, message(), at: Clock.now())
    }

    private func emit(_ lineLevel: LogLevel, _ message: String, at now: Int64) {
        guard isEnabled(lineLevel) else { return }
        let stamp = Clock.iso8601(now)
        var tag = lineLevel.name.uppercased()
        if colour {
            let code = ["2", "0", "33", "31"][lineLevel.rawValue]
            tag = "\u{1B}[\(code)m\(tag)\u{1B}[0m"
        }
        let text = (journal ? Self.journalPrefix(lineLevel) : "") + "\(stamp) \(tag) \(label): \(Self.oneLine(message))\n"
        // One write per line keeps lines whole when several threads log at once.
        var bytes = Array(text.utf8)
        _ = bytes.withUnsafeMutableBytes { write(sink, $0.baseAddress, $0.count) }
    }

    /// `message` as one line: control characters (a newline from a peer's device name, a command's
    /// output, an escape sequence) written as `\n`, `\t` or `\u{1B}`, so nothing a peer or a file
    /// says can forge a log line or drive a terminal.
    static func oneLine(_ message: String) -> String {
        guard message.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F || $0 == 0xC2 || $0 == 0xE2 }) else { return message }
        var out = ""
        out.reserveCapacity(message.utf8.count + 8)
        for scalar in message.unicodeScalars {
            switch scalar {
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.properties.generalCategory == .control || scalar == "\u{2028}" || scalar == "\u{2029}":
                out += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            default:
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    public func debug(_ message: @autoclosure () -> String) { log(.debug, message()) }
    public func info(_ message: @autoclosure () -> String) { log(.info, message()) }
    public func warning(_ message: @autoclosure () -> String) { log(.warning, message()) }
    public func error(_ message: @autoclosure () -> String) { log(.error, message()) }
}
