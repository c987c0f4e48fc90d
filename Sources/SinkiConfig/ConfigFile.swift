import SinkiRecord
import SinkiSupport

/// The contents of `sinki.conf` (design §5), every default filled in. Read it with
/// `ConfigFile.load(path:environment:)`; `ConfigFile()` is the configuration of an empty file.
public struct ConfigFile: Sendable, Equatable {
    public var server = ServerSettings()
    public var agent = AgentSettings()
    /// `[root NAME]` sections, in file order.
    public var roots: [RootSettings] = []
    public var transfer = TransferSettings()
    public var watch = WatchSettings()
    /// The plain `[merge]` section.
    public var merge = MergeSettings()
    /// `[merge PATTERNS…]` sections, in file order: the first that matches a path chooses its rule.
    public var mergeSections: [MergeSection] = []
    /// `[observe PATH]` sections, in file order.
    public var observers: [ObserverSettings] = []

    public init() {}

    /// The merge settings for a path: those of the first `[merge PATTERNS]` section with a pattern
    /// that matches it, else `keep-both` (issue 5).
    public func ruleFor(path: RecordPath) -> MergePolicy {
        let relative = path.relative
        for section in mergeSections where section.patterns.contains(where: { $0.matches(relativePath: relative) }) {
            return section.policy
        }
        return MergePolicy()
    }

    /// The observers to run for a change at `path`, in file order.
    public func observers(for path: RecordPath) -> [ObserverSettings] {
        observers.filter { $0.matches(path) }
    }
}

/// `[server]`: where the agent syncs to.
public struct ServerSettings: Sendable, Equatable {
    /// `url`: the sinki server (`http://` or `https://`, no trailing `/`); nil runs the embedded server.
    public var url: String?
    /// `token-file`: a file holding the bearer token (absolute); nil sends no token.
    public var tokenFile: String?
    /// `listen`: the embedded server's address when `url` is not set.
    public var listen = ListenAddress.embeddedDefault
    /// `ca-file`: PEM certificates to trust for an `https://` server (a self-signed proxy); nil: the system's.
    public var caFile: String?

    public init(url: String? = nil, tokenFile: String? = nil, listen: ListenAddress = .embeddedDefault) {
        self.url = url
        self.tokenFile = tokenFile
        self.listen = listen
    }
}

/// A `HOST:PORT` address to listen on; an IPv6 host is written in brackets (`[::1]:7071`).
public struct ListenAddress: Sendable, Hashable, CustomStringConvertible {
    /// The host without brackets (`127.0.0.1`, `0.0.0.0`, `::1`, `localhost`).
    public var host: String
    public var port: UInt16

    /// Design §1: the embedded server listens on 127.0.0.1:7071.
    public static let embeddedDefault = ListenAddress(host: "127.0.0.1", port: 7071)

    public init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// Parses `HOST:PORT` or `[V6]:PORT`; nil when it is not one. Port 0 lets the kernel pick (tests).
    public init?(parsing text: String) {
        let host: Substring, portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":"), !text[..<colon].contains(":") else { return nil }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard !host.isEmpty, !host.contains(where: { $0 == " " || $0 == "/" }),
              portText.allSatisfy(\.isASCII), let port = UInt16(portText) else { return nil }
        self.host = String(host)
        self.port = port
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// `[agent]`: this machine's name and how much it logs.
public struct AgentSettings: Sendable, Equatable {
    /// `device`: the name written into records and conflict copies; nil means the host name.
    public var device: String?
    /// `log-level`: debug, info, warning or error (default info).
    public var logLevel: LogLevel = .info
    /// `verify-interval`: how often the agent compares everything with the server (0: never on its own).
    public var verifyInterval: Duration = .seconds(6 * 3600)

    public init(device: String? = nil, logLevel: LogLevel = .info, verifyInterval: Duration = .seconds(6 * 3600)) {
        self.device = device
        self.logLevel = logLevel
        self.verifyInterval = verifyInterval
    }
}

/// `[root NAME]`: one synced folder.
public struct RootSettings: Sendable, Equatable {
    /// The first component of the root's record paths: the section's name, else the folder's base name.
    public var name: String
    /// The folder, absolute and cleaned (`~` expanded, no trailing `/`).
    public var path: String
    /// `ignore`: gitignore-style patterns, as written (the watcher gives them their meaning).
    public var ignore: [String]
    /// The section's line, or nil for a root given only by `--root`.
    public var line: Int?

    public init(name: String, path: String, ignore: [String] = [], line: Int? = nil) {
        self.name = name
        self.path = path
        self.ignore = ignore
        self.line = line
    }
}

/// `[transfer]`: how content moves (issue 4).
public struct TransferSettings: Sendable, Equatable {
    /// `inline-max`: files up to this many bytes travel inside the record; larger ones through tus.
    public var inlineMax: Int64 = 256 << 10
    /// `chunk-size`: bytes per tus PATCH.
    public var chunkSize: Int64 = 16 << 20
    /// `parallel`: files transferred at once.
    public var parallel = 4
    /// `attempts`: tries before a transfer is listed as failed.
    public var attempts = 10
    /// `max-rate`: bytes per second for uploads and for downloads; nil is unlimited.
    public var maxRate: Int64?
    /// `xattrs`: which extended attributes sync (globs over names in the `user.` namespace); empty: none.
    public var xattrs = ["user.*"]

    public init() {}
}

/// `[watch]`: how local changes are noticed (issue 3).
public struct WatchSettings: Sendable, Equatable {
    /// `delay`: how long a file must be quiet before it is read when no close-after-write was seen.
    public var delay: Duration = .milliseconds(50)
    /// `rescan`: the period of the safety rescan (jittered by the watcher).
    public var rescan: Duration = .seconds(3600)

    public init() {}
}

/// The plain `[merge]` section: settings shared by every merge rule (issue 5).
public struct MergeSettings: Sendable, Equatable {
    /// `timeout`: how long a merge or compare command may run.
    public var timeout: Duration = .seconds(60)
    /// `base-cache`: bytes of last-shared versions kept for three-way merges.
    public var baseCache: Int64 = 256 << 20

    public init() {}
}

/// A conflict rule (issue 5). The raw value is the name in the config and in a record's `type`.
public enum MergeRule: String, Sendable, Hashable, CaseIterable {
    case keepBoth = "keep-both"
    case newest, local, remote, larger, union, json, compare, command, ask

    /// Rules that can end without a result and so go to `fallback`.
    public var canFail: Bool {
        switch self {
        case .union, .json, .compare, .command: return true
        case .keepBoth, .newest, .local, .remote, .larger, .ask: return false
        }
    }

    /// Rules that run the section's `command`.
    public var needsCommand: Bool { self == .compare || self == .command }

    /// Rules where one side wins and `keep-loser` decides whether the other is kept as a conflict copy.
    public var picksWinner: Bool { [.newest, .local, .remote, .larger].contains(self) }

    /// Issue 5: the loser is kept by default for `newest` and `larger`.
    public var keepsLoserByDefault: Bool { self == .newest || self == .larger }
}

/// What to do with a conflict on a path: a `[merge PATTERNS]` section's settings, or the default.
public struct MergePolicy: Sendable, Equatable {
    /// `rule`: default `keep-both` (no section matched).
    public var rule: MergeRule = .keepBoth
    /// `command`: for `compare` and `command` rules.
    public var command: CommandTemplate?
    /// `fallback`: when `rule` ends without a result; always a rule that cannot fail.
    public var fallback: MergeRule = .keepBoth
    /// `keep-loser` as written; nil means the default of the rule that picked the winner.
    public var keepLoser: Bool?

    public init(rule: MergeRule = .keepBoth, command: CommandTemplate? = nil, fallback: MergeRule = .keepBoth, keepLoser: Bool? = nil) {
        self.rule = rule
        self.command = command
        self.fallback = fallback
        self.keepLoser = keepLoser
    }

    /// Whether the losing side is kept as a conflict copy when `winner` (the rule or the fallback)
    /// picked the winner.
    public func keepsLoser(after winner: MergeRule) -> Bool { keepLoser ?? winner.keepsLoserByDefault }
}

/// `[merge PATTERNS…]`: the rule for paths that match one of its patterns.
public struct MergeSection: Sendable, Equatable {
    public var patterns: [Glob]
    public var policy: MergePolicy
    /// The section header's line.
    public var line: Int

    public init(patterns: [Glob], policy: MergePolicy, line: Int) {
        self.patterns = patterns
        self.policy = policy
        self.line = line
    }
}

/// `[observe PATH]`: a command run for each remote change applied at or below a path (issue 5).
public struct ObserverSettings: Sendable, Equatable {
    /// The record path as written; with a trailing `/` it covers everything below (`/` alone: all roots).
    public var path: String
    /// `exec`: run with `%path`, `%event` and `%local` substituted.
    public var exec: CommandTemplate
    /// The section header's line.
    public var line: Int

    public init(path: String, exec: CommandTemplate, line: Int) {
        self.path = path
        self.exec = exec
        self.line = line
    }

    /// Whether the observer's path ends in `/` and so covers a whole folder.
    public var isRecursive: Bool { path.hasSuffix("/") }

    /// The root the observer names, nil for `/` (every root).
    public var rootName: String? {
        path == "/" ? nil : String(path.prefix { $0 != "/" })
    }

    /// Whether a change at `recordPath` is for this observer: below the folder when recursive, else exactly the path.
    public func matches(_ recordPath: RecordPath) -> Bool {
        if path == "/" { return true }
        return isRecursive ? recordPath.string.hasPrefix(path) : recordPath.string == path
    }
}
