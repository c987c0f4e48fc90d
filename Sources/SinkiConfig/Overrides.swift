import SinkiRecord
import SinkiSupport

/// Command-line flags that override the config file (design §1), as typed; nil or empty means not given.
public struct Overrides: Sendable, Equatable {
    /// `--config FILE`
    public var configFile: String?
    /// `--state DIR`
    public var stateDirectory: String?
    /// `--server URL`
    public var server: String?
    /// `--root PATH`, repeatable; when given, these are the roots and the file's `[root]` sections
    /// only name them and give their ignore patterns.
    public var roots: [String]
    /// `--device NAME`
    public var device: String?
    /// `--log-level LEVEL`
    public var logLevel: String?
    /// `--token-file FILE`
    public var tokenFile: String?
    /// `--listen ADDR` (the embedded server's address)
    public var listen: String?

    public init(configFile: String? = nil, stateDirectory: String? = nil, server: String? = nil, roots: [String] = [],
                device: String? = nil, logLevel: String? = nil, tokenFile: String? = nil, listen: String? = nil) {
        self.configFile = configFile
        self.stateDirectory = stateDirectory
        self.server = server
        self.roots = roots
        self.device = device
        self.logLevel = logLevel
        self.tokenFile = tokenFile
        self.listen = listen
    }
}

/// What the agent runs with: the config file, the flags over it, and every default resolved.
public struct ResolvedConfig: Sendable, Equatable {
    /// The config file read, absolute; nil when there was none.
    public var configPath: String?
    /// The state folder, absolute (database, `control.sock`, caches).
    public var stateDirectory: String
    /// This machine's device name.
    public var device: String
    /// The device name was made now for a new state folder (none configured): the agent keeps it in
    /// the state folder (`DefaultDevice.keep`) so that it stays the same.
    public var deviceIsNew = false
    /// The file's settings with the flags applied: `server`, `roots` and `agent` hold the winners.
    public var config: ConfigFile
    /// Things that are allowed but probably wrong (an observer for a root not synced), each one line
    /// for the log.
    public var warnings: [String]

    public init(configPath: String?, stateDirectory: String, device: String, config: ConfigFile, warnings: [String] = []) {
        self.configPath = configPath
        self.stateDirectory = stateDirectory
        self.device = device
        self.config = config
        self.warnings = warnings
    }

    public var roots: [RootSettings] { config.roots }
    public var server: ServerSettings { config.server }
    public var logLevel: LogLevel { config.agent.logLevel }

    /// Reads the config file (`configPath(for:environment:)`), applies the flags over it (flags win)
    /// and resolves the defaults. Roots are not required here: `sinkid status` has none.
    public static func resolve(_ overrides: Overrides, environment: ProcessEnvironment) throws(ConfigError) -> ResolvedConfig {
        let path = try configPath(for: overrides, environment: environment)
        var config = ConfigFile()
        if let path { config = try ConfigFile.load(path: path, environment: environment, source: overrides.configFile ?? path) }

        if let url = overrides.server {
            do { config.server.url = try Checks.serverURL(url) } catch { throw flag("--server", "bad URL \(quoted(url)): \(error.message)") }
        }
        if let file = overrides.tokenFile { config.server.tokenFile = try flagPath("--token-file", file, environment) }
        if let listen = overrides.listen {
            do { config.server.listen = try Checks.listenAddress(listen) } catch { throw flag("--listen", "bad address \(quoted(listen)): \(error.message)") }
        }
        if let level = overrides.logLevel {
            do { config.agent.logLevel = try Checks.logLevel(level) } catch { throw flag("--log-level", error.message) }
        }
        if let device = overrides.device {
            do { config.agent.device = try Checks.deviceName(device) } catch { throw flag("--device", "bad device name \(quoted(device)): \(error.message)") }
        }
        let device: String
        var deviceIsNew = false
        let stateDirectory = try stateDirectory(for: overrides, environment: environment)
        if let chosen = config.agent.device {
            device = chosen
        } else {
            (device, deviceIsNew) = try DefaultDevice.name(stateDirectory: stateDirectory, hostName: environment.hostName)
        }
        if !overrides.roots.isEmpty { config.roots = try flagRoots(overrides.roots, config.roots, environment) }

        var warnings: [String] = []
        let names = Set(config.roots.map(\.name))
        for observer in config.observers {
            if let root = observer.rootName, !names.contains(root) {
                let known = names.isEmpty ? "no roots" : "roots: " + names.sorted().joined(separator: ", ")
                warnings.append("\(overrides.configFile ?? path ?? "config"):\(observer.line): [observe \(observer.path)] names root \(quoted(root)), which is not synced (\(known))")
            }
        }
        var resolved = ResolvedConfig(configPath: path, stateDirectory: stateDirectory, device: device, config: config, warnings: warnings)
        resolved.deviceIsNew = deviceIsNew
        return resolved
    }

    /// The config file to read: `--config FILE` (which must then exist), else
    /// `$XDG_CONFIG_HOME/sinki/sinki.conf` if it exists, else `~/.config/sinki/sinki.conf` if it
    /// exists, else none.
    public static func configPath(for overrides: Overrides, environment: ProcessEnvironment) throws(ConfigError) -> String? {
        if let file = overrides.configFile { return try flagPath("--config", file, environment) }
        if let base = environment["XDG_CONFIG_HOME"], base.hasPrefix("/") {
            let candidate = ConfigValues.absolute(base + "/sinki/sinki.conf", from: "/")
            if ProcessEnvironment.isFile(candidate) { return candidate }
        }
        if let home = environment.home {
            let candidate = ConfigValues.absolute(home + "/.config/sinki/sinki.conf", from: "/")
            if ProcessEnvironment.isFile(candidate) { return candidate }
        }
        return nil
    }

    /// The state folder: `--state DIR`, else `$XDG_STATE_HOME/sinki`, else `~/.local/state/sinki`.
    /// A relative `XDG_STATE_HOME` is ignored, as the XDG base directory spec says.
    public static func stateDirectory(for overrides: Overrides, environment: ProcessEnvironment) throws(ConfigError) -> String {
        if let directory = overrides.stateDirectory { return try flagPath("--state", directory, environment) }
        if let base = environment["XDG_STATE_HOME"], base.hasPrefix("/") { return ConfigValues.absolute(base + "/sinki", from: "/") }
        guard let home = environment.home else { throw flag("--state", "no state folder: HOME and XDG_STATE_HOME are not set; pass --state DIR") }
        return ConfigValues.absolute(home + "/.local/state/sinki", from: "/")
    }

    /// `--root` paths as roots: a folder that a `[root]` section names keeps that section's name and
    /// ignore patterns; any other is named by its base name. The same folder twice counts once.
    private static func flagRoots(_ paths: [String], _ sections: [RootSettings], _ environment: ProcessEnvironment) throws(ConfigError) -> [RootSettings] {
        var roots: [RootSettings] = []
        for text in paths {
            let path = try flagPath("--root", text, environment)
            if roots.contains(where: { $0.path == path }) { continue }
            var root = sections.first { $0.path == path } ?? RootSettings(name: Checks.baseName(path), path: path)
            root.path = path
            do { try Checks.rootName(root.name) } catch { throw flag("--root", "\(quoted(text)) cannot be a root: its name \(quoted(root.name)) is \(error.message)") }
            for other in roots {
                if let clash = Checks.clash(root, other) {
                    throw flag("--root", clash + (root.name == other.name ? "; name them in [root NAME] sections of the config" : ""))
                }
            }
            roots.append(root)
        }
        return roots
    }

    /// A path from a flag: `~` and `$HOME` expanded, made absolute against the working directory.
    private static func flagPath(_ name: String, _ text: String, _ environment: ProcessEnvironment) throws(ConfigError) -> String {
        guard !text.isEmpty else { throw flag(name, "empty path") }
        let expanded: String
        do { expanded = try ConfigValues.expandHome(text, home: environment.home) } catch { throw flag(name, error.message) }
        return ConfigValues.absolute(expanded, from: environment.currentDirectory)
    }

    private static func flag(_ name: String, _ message: String) -> ConfigError {
        ConfigError(.badValue, message, source: name, line: nil)
    }
}
