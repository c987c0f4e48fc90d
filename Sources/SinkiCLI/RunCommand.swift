import Foundation
import SinkiAgent
import SinkiConfig
import SinkiRecord
import SinkiLoop
import SinkiState
import SinkiSupport
import Synchronization

/// `sinkid [run] --root PATH...`: the agent in the foreground.
enum RunCommand {
    static func run(_ words: [String]) throws(UsageError) -> ExitCode {
        guard let arguments = try Arguments.orHelp(words, CommandCatalog.run) else { return .success }
        if let extra = arguments.positional.first { throw UsageError("unexpected argument \(extra) (roots are given with --root)") }
        let (configuration, settings) = try resolve(arguments)
        let logger = Logger(label: "sinkid", level: configuration.logLevel)
        for warning in configuration.warnings { logger.warning(warning) }
        let loop = EventLoop()
        let agent = Agent(configuration: configuration, loop: loop, logger: logger)
        let code = Mutex(ExitCode.success)
        // SIGHUP reads the config again with the same flags.
        let startPath = settings.configPath
        let reloader: ConfigReloader = { () throws(AgentError) -> AgentReload in
            // A pipe (`--config <(...)`) was read to its end at start: read again it would be an empty
            // config, every rule and setting back to its default.
            if let path = startPath, !isRegularFile(path) {
                throw AgentError(.config, "\(path) is not a file (a pipe, read once at start); restart sinkid to change its settings")
            }
            do throws(UsageError) {
                let (configuration, settings) = try resolve(arguments)
                return AgentReload(configuration: configuration, settings: settings)
            } catch {
                throw AgentError(error.code, error.message)
            }
        }
        Task {
            await agent.prepareControl(version: SinkidCommand.version, settings: settings, reloader: reloader)
            let result = await agent.run()
            code.withLock { $0 = result }
            loop.stop()
        }
        loop.run()
        return code.withLock { $0 }
    }

    static func logLevel(_ name: String?) throws(UsageError) -> LogLevel {
        guard let name else { return .info }
        guard let level = LogLevel(name: name) else {
            throw UsageError("unknown log level \(name) (debug, info, warning, error)")
        }
        return level
    }

    /// The config file, flags over it, and defaults (design §1); also the settings they came from.
    static func resolve(_ arguments: Arguments) throws(UsageError) -> (AgentConfiguration, ResolvedConfig) {
        let overrides = Overrides(configFile: arguments.value("config"), stateDirectory: arguments.value("state"),
                                  server: arguments.value("server"), roots: arguments.values("root"),
                                  device: arguments.value("device"), logLevel: arguments.value("log-level"),
                                  tokenFile: arguments.value("token-file"), listen: arguments.value("listen"))
        let environment = ProcessEnvironment.current()
        let resolved: ResolvedConfig
        do { resolved = try ResolvedConfig.resolve(overrides, environment: environment) } catch {
            throw UsageError(error.description, code: error.exitCode)
        }
        let config = resolved.config
        if config.roots.isEmpty { throw UsageError("no root to sync: give one with --root PATH or a [root NAME] section in the config") }
        for root in config.roots {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: root.path, isDirectory: &isDirectory), isDirectory.boolValue else {
                let what = FileManager.default.fileExists(atPath: root.path) ? "is not a folder" : "does not exist"
                // A root the config file names is the config's error, with its line (78); one given by
                // --root is the command line's (64).
                if let line = root.line, let file = arguments.value("config") ?? resolved.configPath {
                    throw UsageError("\(file):\(line): [root \(root.name)]: the folder \(root.path) \(what) (make it, or fix path =)", code: .config)
                }
                throw UsageError("--root \(root.path): the folder \(what)")
            }
        }
        var token: String?
        var tokenWarning: String?
        if let file = config.server.tokenFile {
            guard let text = try? String(contentsOfFile: file, encoding: .utf8) else {
                throw UsageError("cannot read the token file \(file)", code: .config)
            }
            token = text.trimmingCharacters(in: .whitespacesAndNewlines)
            if token?.isEmpty == true { throw UsageError("the token file \(file) is empty", code: .config) }
            tokenWarning = Self.looseModeWarning(file)
        }
        let typeFor: @Sendable (String) -> String = { path in
            guard let checked = try? RecordPath(validating: path) else { return Record.defaultType }
            return config.ruleFor(path: checked).rule.rawValue
        }
        var configuration = AgentConfiguration(
            roots: config.roots.map { RootSpec(name: $0.name, path: $0.path, ignore: $0.ignore) }, serverURL: config.server.url,
            listen: config.server.listen.description, stateDirectory: resolved.stateDirectory, device: resolved.device,
            token: token, typeFor: typeFor)
        configuration.tokenFile = config.server.tokenFile
        configuration.deviceIsNew = resolved.deviceIsNew
        configuration.caFile = config.server.caFile
        configuration.watchDelayMilliseconds = UInt64(config.watch.delay.components.seconds * 1000
            + config.watch.delay.components.attoseconds / 1_000_000_000_000_000)
        configuration.warnings = resolved.warnings + (tokenWarning.map { [$0] } ?? [])
        configuration.rescanSeconds = Double(config.watch.rescan.components.seconds)
        configuration.verifySeconds = Double(config.agent.verifyInterval.components.seconds)
        configuration.logLevel = resolved.logLevel
        configuration.transfer.inlineMax = config.transfer.inlineMax
        configuration.transfer.chunkSize = config.transfer.chunkSize
        configuration.transfer.parallel = config.transfer.parallel
        configuration.transfer.attempts = config.transfer.attempts
        configuration.transfer.maxRate = config.transfer.maxRate ?? 0
        configuration.transfer.xattrs = config.transfer.xattrs
        configuration.mergeSections = config.mergeSections
        configuration.mergeSettings = config.merge
        configuration.observers = config.observers
        configuration.environment = environment.variables
        return (configuration, resolved)
    }

    static func absolute(_ path: String) -> String {
        let joined = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        return URL(fileURLWithPath: joined).standardizedFileURL.path
    }

    /// A secret others on this machine can read is taken, with one line saying so and what to do (as
    /// ssh does for keys): the README's `tail -1 > laptop.token` makes such a file under a usual umask.
    static func looseModeWarning(_ file: String) -> String? {
        var info = stat()
        guard stat(file, &info) == 0, info.st_mode & 0o077 != 0 else { return nil }
        return "the token file \(file) can be read by others (mode \(String(info.st_mode & 0o777, radix: 8))): run chmod 600 \(file)"
    }
}

/// Whether `path` names a regular file (following symlinks).
private func isRegularFile(_ path: String) -> Bool {
    var info = stat()
    return stat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFREG
}
