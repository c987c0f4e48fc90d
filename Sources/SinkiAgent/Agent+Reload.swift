import SinkiConfig
import SinkiControl
import SinkiLoop
import SinkiSupport

extension Agent {
    /// SIGHUP: reads the config again with the start-up flags. A config with an error is refused
    /// with its error line and the running settings stay. What can change live (log level, watch
    /// delay, merge rules, `[merge]` settings, observers, `[transfer] max-rate`) changes; anything else is logged as
    /// needing a restart.
    func reload() {
        // A new token in the same file needs no restart.
        Task { await self.rereadToken() }
        guard let reloader = control.reloader else {
            logger.warning("SIGHUP: this agent was started without a config to read again")
            return
        }
        guard !control.reloading, !stopping else { return }
        control.reloading = true
        control.notifier?.reloading()
        Task {
            // Reading the file is blocking I/O: off the loop.
            let result = await Blocking.run { () -> Result<AgentReload, AgentError> in
                do throws(AgentError) { return .success(try reloader()) } catch { return .failure(error) }
            }
            await self.finishReload(result)
        }
    }

    private func finishReload(_ result: Result<AgentReload, AgentError>?) async {
        control.reloading = false
        defer { control.notifier?.ready(status: serviceStatus) }
        switch result {
        case nil:
            logger.error("config reload failed; keeping the running settings")
        case let .failure(error)?:
            logger.error("config reload refused: \(error.message); keeping the running settings")
        case let .success(new)?:
            let source = new.settings.configPath ?? "the command line"
            var applied: [String] = []
            let level = new.configuration.logLevel
            if level != logger.minimumLevel {
                logger.setLevel(level)
                applied.append("log level \(level.name)")
            }
            let delay = new.configuration.watchDelayMilliseconds
            if let watcher, watcher.delayMilliseconds != delay {
                watcher.delayMilliseconds = delay
                applied.append("watch delay \(delay) ms")
            }
            let rate = new.configuration.transfer.maxRate
            if let http = client?.http, rate != http.maxReceiveRate {
                http.maxSendRate = rate
                http.maxReceiveRate = rate
                applied.append("max-rate " + (rate > 0 ? HumanUnits.bytes(rate) + "/s" : "unlimited"))
            }
            if let old = control.settings?.config, old.merge != new.settings.config.merge || old.mergeSections != new.settings.config.mergeSections
                || old.observers != new.settings.config.observers {
                await reloadMerge(new.configuration)
                applied.append("merge rules and observers")
            }
            let restart = control.settings.map { Self.needingRestart($0, new.settings) } ?? []
            control.settings = new.settings
            var line = "reloaded \(source): " + (applied.isEmpty ? "nothing to change live" : applied.joined(separator: ", "))
            if !restart.isEmpty { line += "; takes a restart: " + restart.joined(separator: ", ") }
            logger.info(line)
            for warning in new.configuration.warnings { logger.warning(warning) }
        }
    }

    /// The settings that differ between `old` and `new` and only take effect at start.
    static func needingRestart(_ old: ResolvedConfig, _ new: ResolvedConfig) -> [String] {
        var out: [String] = []
        let (a, b) = (old.config, new.config)
        if a.server.url != b.server.url { out.append("[server] url") }
        if a.server.tokenFile != b.server.tokenFile { out.append("[server] token-file") }
        if a.server.listen != b.server.listen { out.append("[server] listen") }
        if old.device != new.device { out.append("[agent] device") }
        if a.roots != b.roots { out.append("roots") }
        var (transferA, transferB) = (a.transfer, b.transfer)
        // max-rate changes live.
        (transferA.maxRate, transferB.maxRate) = (nil, nil)
        if transferA != transferB { out.append("[transfer]") }
        if a.watch.rescan != b.watch.rescan { out.append("[watch] rescan") }
        if old.stateDirectory != new.stateDirectory { out.append("the state folder") }
        return out
    }
}
