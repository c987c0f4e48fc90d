import Foundation
import SinkiSupport
import Testing
@testable import SinkiConfig

@Suite struct OverridesTests {
    @Test func noConfigAndNoFlagsGivesTheDefaults() throws {
        let fixture = Fixture()
        let settings = try ResolvedConfig.resolve(Overrides(), environment: fixture.environment())
        #expect(settings.configPath == nil)
        #expect(settings.stateDirectory == fixture.home + "/.local/state/sinki")
        #expect(settings.device.hasPrefix("testhost-") && settings.deviceIsNew, "a new state folder: the host name and a suffix")
        #expect(settings.config == ConfigFile())
        #expect(settings.server == ServerSettings(url: nil, tokenFile: nil, listen: ListenAddress(host: "127.0.0.1", port: 7071)))
        #expect(settings.logLevel == .info)
        #expect(settings.roots.isEmpty)
        #expect(settings.warnings.isEmpty)
    }

    @Test func configPathComesFromFlagThenXDGThenHome() throws {
        let fixture = Fixture()
        let environment = fixture.environment(["XDG_CONFIG_HOME": fixture.path + "/xdg"])
        #expect(try ResolvedConfig.configPath(for: Overrides(), environment: environment) == nil)

        let home = fixture.write("[agent]\ndevice = from-home\n", to: fixture.home + "/.config/sinki/sinki.conf")
        #expect(try ResolvedConfig.configPath(for: Overrides(), environment: environment) == home)
        #expect(try ResolvedConfig.resolve(Overrides(), environment: environment).device == "from-home")

        let xdg = fixture.write("[agent]\ndevice = from-xdg\n", to: fixture.path + "/xdg/sinki/sinki.conf")
        #expect(try ResolvedConfig.configPath(for: Overrides(), environment: environment) == xdg)
        #expect(try ResolvedConfig.resolve(Overrides(), environment: environment).device == "from-xdg")

        let flagged = fixture.write("[agent]\ndevice = from-flag\n", to: fixture.path + "/elsewhere.conf")
        let relative = Overrides(configFile: "../elsewhere.conf")
        #expect(try ResolvedConfig.configPath(for: relative, environment: environment) == flagged)
        #expect(try ResolvedConfig.resolve(relative, environment: environment).device == "from-flag")
        #expect(try ResolvedConfig.resolve(Overrides(configFile: flagged, device: "from-cli"), environment: environment).device == "from-cli")

        let missing = Overrides(configFile: "missing.conf")
        #expect(throws: ConfigError(.unreadable, "cannot read: No such file or directory", source: "missing.conf", line: nil)) {
            try ResolvedConfig.resolve(missing, environment: environment)
        }
    }

    @Test func stateDirectoryComesFromFlagThenXDGThenHome() throws {
        let fixture = Fixture()
        #expect(try ResolvedConfig.stateDirectory(for: Overrides(), environment: fixture.environment()) == fixture.home + "/.local/state/sinki")
        #expect(try ResolvedConfig.stateDirectory(for: Overrides(), environment: fixture.environment(["XDG_STATE_HOME": "/x/state"])) == "/x/state/sinki")
        #expect(try ResolvedConfig.stateDirectory(for: Overrides(), environment: fixture.environment(["XDG_STATE_HOME": "relative"]))
            == fixture.home + "/.local/state/sinki")
        #expect(try ResolvedConfig.stateDirectory(for: Overrides(stateDirectory: "agent-b"), environment: fixture.environment(currentDirectory: "/w")) == "/w/agent-b")
        #expect(try ResolvedConfig.stateDirectory(for: Overrides(stateDirectory: "~/s"), environment: fixture.environment()) == fixture.home + "/s")
        let homeless = ProcessEnvironment(variables: [:], currentDirectory: "/", hostName: "h")
        #expect(throws: ConfigError(.badValue, "no state folder: HOME and XDG_STATE_HOME are not set; pass --state DIR", source: "--state", line: nil)) {
            try ResolvedConfig.stateDirectory(for: Overrides(), environment: homeless)
        }
    }

    @Test func flagsWinOverTheFile() throws {
        let fixture = Fixture()
        let path = fixture.write("""
            [server]
            url = https://file.example.net
            token-file = ~/file-token
            listen = 127.0.0.1:9000
            [agent]
            device = file-device
            log-level = warning
            [transfer]
            parallel = 2
            """)
        let fromFile = try ResolvedConfig.resolve(Overrides(configFile: path), environment: fixture.environment())
        #expect(fromFile.server == ServerSettings(url: "https://file.example.net", tokenFile: fixture.home + "/file-token",
                                                  listen: ListenAddress(host: "127.0.0.1", port: 9000)))
        #expect(fromFile.device == "file-device")
        #expect(fromFile.logLevel == .warning)

        let flags = Overrides(configFile: path, server: "http://cli:7071", device: "cli-device", logLevel: "debug",
                              tokenFile: "tok", listen: "0.0.0.0:7071")
        let settings = try ResolvedConfig.resolve(flags, environment: fixture.environment(currentDirectory: "/w"))
        #expect(settings.server == ServerSettings(url: "http://cli:7071", tokenFile: "/w/tok", listen: ListenAddress(host: "0.0.0.0", port: 7071)))
        #expect(settings.device == "cli-device")
        #expect(settings.config.agent.device == "cli-device")
        #expect(settings.logLevel == .debug)
        #expect(settings.config.transfer.parallel == 2)
        #expect(settings.configPath == path)
    }

    @Test func rootFlagsReplaceTheFileRootsAndTakeTheirNames() throws {
        let fixture = Fixture()
        let path = fixture.write("""
            [root Saves]
            path = ~/Games/SaveGames
            ignore = *.tmp
            [root]
            path = ~/Documents
            [observe Saves/]
            exec = notify-send %path
            [observe Documents/]
            exec = notify-send %path
            """)
        let environment = fixture.environment(currentDirectory: fixture.home + "/Games")
        let fileRoots = try ResolvedConfig.resolve(Overrides(configFile: path), environment: environment)
        #expect(fileRoots.roots.map(\.name) == ["Saves", "Documents"])
        #expect(fileRoots.warnings.isEmpty)

        let settings = try ResolvedConfig.resolve(Overrides(configFile: path, roots: ["SaveGames/", "~/Music", fixture.home + "/Games/SaveGames"]),
                                            environment: environment)
        #expect(settings.roots == [
            RootSettings(name: "Saves", path: fixture.home + "/Games/SaveGames", ignore: ["*.tmp"], line: 1),
            RootSettings(name: "Music", path: fixture.home + "/Music"),
        ])
        #expect(settings.warnings == [
            "\(path):8: [observe Documents/] names root \"Documents\", which is not synced (roots: Music, Saves)",
        ])
    }

    @Test func badFlagsNameTheFlag() throws {
        let fixture = Fixture()
        let environment = fixture.environment(currentDirectory: "/w")
        func failure(_ overrides: Overrides) -> String? {
            do {
                _ = try ResolvedConfig.resolve(overrides, environment: environment)
                return nil
            } catch {
                #expect(error.exitCode == .usage)
                return error.description
            }
        }
        #expect(failure(Overrides(roots: ["/a/SaveGames", "/b/SaveGames"]))
            == "--root: two roots named \"SaveGames\": /a/SaveGames and /b/SaveGames; name them in [root NAME] sections of the config")
        #expect(failure(Overrides(roots: ["/a", "/a/b"])) == "--root: root \"b\" (/a/b) is inside root \"a\" (/a)")
        #expect(failure(Overrides(roots: ["/"])) == "--root: \"/\" cannot be a root: its name \"\" is empty")
        #expect(failure(Overrides(roots: [""])) == "--root: empty path")
        #expect(failure(Overrides(server: "sync.example.net")) == "--server: bad URL \"sync.example.net\": expected http://HOST[:PORT] or https://HOST[:PORT]")
        #expect(failure(Overrides(server: "https://")) == "--server: bad URL \"https://\": no host")
        #expect(failure(Overrides(logLevel: "warnnig")) == "--log-level: unknown log level \"warnnig\"; did you mean \"warning\"?")
        #expect(failure(Overrides(device: "")) == "--device: bad device name \"\": empty")
        #expect(failure(Overrides(listen: "localhost")) == "--listen: bad address \"localhost\": expected HOST:PORT with a port from 0 to 65535 (127.0.0.1:7071, [::1]:7071)")
        #expect(failure(Overrides(roots: ["/a", "/a/"])) == nil, "the same folder twice counts once")
    }

    @Test func aBadConfigFileIsAConfigError() {
        let fixture = Fixture()
        let path = fixture.write("[transfer]\nparallel = many\n")
        #expect(throws: ConfigError(.badValue, "bad number \"many\" for parallel: expected a whole number from 1 to 256", source: path, line: 2)) {
            try ResolvedConfig.resolve(Overrides(configFile: path), environment: fixture.environment())
        }
    }

    /// Issue 25: two agents on one machine (two state folders) are two devices; one state folder keeps
    /// its name; a state folder from before the rule keeps the bare host name its records carry.
    @Test func theDefaultDeviceIsTheHostNameAndASuffixKeptPerStateFolder() throws {
        let fixture = Fixture()
        let environment = fixture.environment(hostName: "desk.local")
        let first = try ResolvedConfig.resolve(Overrides(stateDirectory: fixture.home + "/one"), environment: environment)
        let second = try ResolvedConfig.resolve(Overrides(stateDirectory: fixture.home + "/two"), environment: environment)
        #expect(first.device.hasPrefix("desk.local-") && first.device.count == "desk.local-".count + 6 && first.deviceIsNew)
        #expect(second.device != first.device)
        try FileManager.default.createDirectory(atPath: fixture.home + "/one", withIntermediateDirectories: true)
        try DefaultDevice.keep(first.device, stateDirectory: fixture.home + "/one")
        let again = try ResolvedConfig.resolve(Overrides(stateDirectory: fixture.home + "/one"), environment: environment)
        #expect(again.device == first.device && !again.deviceIsNew, "kept")
        try FileManager.default.createDirectory(atPath: fixture.home + "/old", withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: fixture.home + "/old/state.db", contents: Data()))
        let old = try ResolvedConfig.resolve(Overrides(stateDirectory: fixture.home + "/old"), environment: environment)
        #expect(old.device == "desk.local" && !old.deviceIsNew, "an older state folder keeps the host name")
        #expect(try ResolvedConfig.resolve(Overrides(stateDirectory: fixture.home + "/two", device: "named"), environment: environment).device == "named")
    }

    @Test func currentEnvironmentReadsTheProcess() {
        let current = ProcessEnvironment.current()
        #expect(current.currentDirectory.hasPrefix("/"))
        #expect(!current.hostName.isEmpty)
        #expect(current.home != nil)
        #expect(current.findExecutable("sh") != nil)
        #expect(current.findExecutable("surely-not-a-program-sinki") == nil)
    }
}
