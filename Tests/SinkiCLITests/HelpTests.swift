import Foundation
import SinkiCLI
import SinkiTestSupport
import Testing

/// `sinkid help`, `help COMMAND` and `--help` on every command; unknown flags and commands name
/// the nearest known one.
@Suite struct HelpTests {
    @Test(arguments: CommandCatalog.all.map(\.name))
    func everyCommandHasHelpListingEveryFlag(_ name: String) throws {
        let directory = TemporaryDirectory("sinki-help")
        let spec = try #require(CommandCatalog.spec(name))
        let viaHelp = try sinkid(["help", name], in: directory)
        let viaFlag = try sinkid([name, "--help"], in: directory)
        #expect(viaHelp.code == 0 && viaFlag.code == 0)
        #expect(viaHelp.output == viaFlag.output)
        #expect(viaHelp.output.hasPrefix("usage: sinkid"))
        for flag in spec.flags { #expect(viaHelp.output.contains(flag), "sinkid help \(name) does not mention \(flag)") }
        let short = try sinkid([name, "-h"], in: directory)
        #expect(short.code == 0 && short.output == viaHelp.output)
        // Every status the command exits with, from the command table (issue 25, item 5).
        let listed = viaHelp.output.components(separatedBy: "\nexit status:\n").last ?? ""
        for exit in spec.exits { #expect(listed.contains("  \(exit.code.rawValue)   ") || listed.contains("  \(exit.code.rawValue)    "), "help \(name) does not list \(exit.code.rawValue)") }
    }

    /// Issue 25, item 5: the statuses seen are the ones listed. Each line runs a real `sinkid` into one
    /// failure (no agent, no server, a missing file, a port taken ...) and checks the status it exits
    /// with is the one expected and that the command's help and man page list it.
    @Test func everyExitStatusSeenIsListedForItsCommand() async throws {
        let directory = TemporaryDirectory("sinki-exit")
        let state = directory.child("state")
        let root = directory.child("root")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let missingRoot = directory.child("missing.conf")
        try writeFile(missingRoot, "[root Games]\npath = \(directory.child("no-such-folder"))\n")
        let home = ["HOME": directory.child("home"), "XDG_CONFIG_HOME": directory.child("home/.config"), "XDG_STATE_HOME": directory.child("home/.state")]
        // A server to refuse things, and a port it holds.
        let cluster = Cluster("sinki-exit-server")
        try cluster.startServer()
        let data = try #require(cluster.serverData)
        let cases: [(command: String, arguments: [String], code: Int32, says: String)] = [
            ("run", ["--root", directory.child("no-such-folder"), "--state", state], 64, "--root"),
            ("run", ["--config", missingRoot, "--state", state], 78, "missing.conf:1: [root Games]: the folder"),
            ("run", ["--root", root, "--state", state, "--listen", "127.0.0.1:\(cluster.serverPort)"], 69, "embedded server"),
            ("serve", ["token", "revoke", "nosuchid", "--data", data], 65, "no token nosuchid"),
            ("serve", ["token", "frobnicate", "--data", data], 64, "serve token takes add, list or revoke"),
            ("serve", ["--listen", "127.0.0.1:\(cluster.serverPort)", "--data", directory.child("data2")], 69, "cannot serve"),
            ("status", ["--state", state], 3, "not running"),
            ("pause", ["--state", state], 3, "no agent"),
            ("resolve", ["SaveGames/x", "--keep", "local", "--state", state], 3, "no agent"),
            ("resolve", ["SaveGames/x", "--keep", "mine", "--state", state], 64, "--keep takes local, remote or both"),
            ("watch", ["--state", state], 64, "watch needs a PATH"),
            ("upload", [directory.child("none.bin"), "--to", "http://127.0.0.1:\(freePort())/v1/uploads/", "--state", state], 74, "none.bin"),
            ("upload", [missingRoot, "--to", "http://127.0.0.1:\(freePort())/v1/uploads/", "--state", state, "--attempts", "1"], 69, "cannot reach"),
            ("upload", [missingRoot, "--to", "http://127.0.0.1:1/", "--token-file", directory.child("no-token")], 78, "token file"),
            ("completion", ["csh"], 64, "bash, zsh or fish"),
            ("help", ["frobnicate"], 64, "unknown command"),
        ]
        let manual = try ManPageTests.text("packaging/man/sinkid.1")
        for item in cases {
            let run = try sinkid([item.command] + item.arguments, in: directory, environment: home, timeout: 60)
            #expect(run.code == item.code, "sinkid \(item.command) \(item.arguments): \(run.code), not \(item.code): \(run.errors)")
            #expect((run.errors + run.output).contains(item.says), "sinkid \(item.command): \(run.errors)")
            let spec = try #require(CommandCatalog.spec(item.command))
            #expect(spec.exits.contains { $0.code.rawValue == run.code }, "sinkid \(item.command) exits \(run.code), which its help does not list")
            #expect(ManPageTests.exitStatuses(manual, command: item.command).contains(run.code), "sinkid.1 does not list \(run.code) for \(item.command)")
        }
        // Two agents on one state folder: the second exits 75.
        let first = try ChildProcess(sinkidExecutable(), ["--root", root, "--state", state, "--server", cluster.serverURL, "--token-file",
                                                         try #require(try cluster.tokenFile(for: "first"))],
                                     logDirectory: directory.path, label: "first")
        defer { _ = first.stop() }
        try await waitUntil("the first agent to scan", timeout: 30) { first.errors.contains("scanned ") }
        let second = try sinkid(["--root", root, "--state", state, "--server", cluster.serverURL], in: directory)
        #expect(second.code == 75 && second.errors.contains("already running"), "\(second.errors)")
        #expect(CommandCatalog.run.exits.contains { $0.code.rawValue == 75 })
    }

    @Test(arguments: CommandCatalog.all.map(\.name))
    func anUnknownFlagNamesTheNearestOne(_ name: String) throws {
        let directory = TemporaryDirectory("sinki-help")
        let spec = try #require(CommandCatalog.spec(name))
        let flag = spec.valued.first ?? spec.boolean.first!
        // One letter dropped from a real flag.
        let typo = "--" + flag.dropLast()
        let run = try sinkid([name, typo], in: directory)
        #expect(run.code == 64)
        #expect(run.errors.contains("unknown option \(typo)") && run.errors.contains("did you mean --"), "\(run.errors)")
    }

    /// A `--public-url` that is not an origin (a path, another scheme) is a one-line usage error, before
    /// anything starts.
    @Test(arguments: ["https://sync.example.org/sinki", "ftp://sync.example.org", "sync.example.org"])
    func aPublicURLThatIsNotAnOriginIsExit64(_ url: String) throws {
        let directory = TemporaryDirectory("sinki-help")
        let run = try sinkid(["serve", "--listen", "127.0.0.1:0", "--data", directory.child("data"), "--public-url", url], in: directory)
        #expect(run.code == 64)
        #expect(run.errors.contains("--public-url \(url) is not an origin"), "\(run.errors)")
        #expect(run.errors.split(separator: "\n").count == 1, "\(run.errors)")
        #expect(!FileManager.default.fileExists(atPath: directory.child("data")))
    }

    @Test func theOverviewListsEveryCommand() throws {
        let directory = TemporaryDirectory("sinki-help")
        let overview = try sinkid(["help"], in: directory)
        #expect(overview.code == 0)
        for spec in CommandCatalog.all { #expect(overview.output.contains("\n  \(spec.name) "), "the overview misses \(spec.name)") }
        #expect(try sinkid(["--help"], in: directory).output == overview.output)
        let unknown = try sinkid(["stauts"], in: directory)
        #expect(unknown.code == 64 && unknown.errors.contains("unknown command stauts; did you mean status?"))
        let unknownTopic = try sinkid(["help", "pasue"], in: directory)
        #expect(unknownTopic.code == 64 && unknownTopic.errors.contains("did you mean pause?"))
        let version = try sinkid(["--version"], in: directory)
        #expect(version.output == "sinkid \(SinkidCommand.version)\n")
    }

    /// Issue 25: `sinkid` alone runs the agent when the config file names roots (help calls run the
    /// default command); with no config it prints the overview and exits 64, as before.
    @Test func sinkidAloneRunsTheAgentWhenTheConfigNamesRoots() async throws {
        let directory = TemporaryDirectory("sinki-alone")
        let home = directory.child("home")
        let environment = ["HOME": home, "XDG_CONFIG_HOME": home + "/.config", "XDG_STATE_HOME": home + "/.local/state"]
        try FileManager.default.createDirectory(atPath: home + "/.config/sinki", withIntermediateDirectories: true)
        let bare = try sinkid([], in: directory, environment: environment)
        #expect(bare.code == 64 && bare.output.contains("usage:"), "no config: the overview")
        try FileManager.default.createDirectory(atPath: home + "/Games", withIntermediateDirectories: true)
        try put(home + "/.config/sinki/sinki.conf", "[server]\nlisten = 127.0.0.1:\(freePort())\n\n[root Games]\npath = ~/Games\n")
        let agent = try ChildProcess(sinkidExecutable(), [], environment: environment, logDirectory: directory.path, label: "alone")
        defer { _ = agent.stop() }
        try await waitUntil("the agent to scan its root", timeout: 30) { agent.errors.contains("scanned 1 root(s)") }
        #expect(agent.stop() == 0, "\(agent.errors)")
        // No device was named: the host name and a suffix, kept in the state folder for the next start.
        let kept = (try? String(contentsOfFile: home + "/.local/state/sinki/device", encoding: .utf8)) ?? ""
        let suffix = kept.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "-").last ?? ""
        #expect(suffix.count == 6 && suffix.allSatisfy(\.isHexDigit) && kept.count > 8, "\(kept)")
        #expect(agent.errors.contains("this agent's device name is " + kept.trimmingCharacters(in: .whitespacesAndNewlines)))
    }

    @Test func completionScriptsParse() throws {
        let directory = TemporaryDirectory("sinki-help")
        let bash = try sinkid(["completion", "bash"], in: directory)
        #expect(bash.code == 0 && bash.output.contains("complete -F _sinkid sinkid"))
        try put(directory.child("sinkid.bash"), bash.output)
        let check = try ChildProcess("/bin/bash", ["-n", directory.child("sinkid.bash")], logDirectory: directory.path, label: "bash-n")
        #expect(check.waitForExit() == 0, "\(check.errors)")
        let zsh = try sinkid(["completion", "zsh"], in: directory)
        #expect(zsh.code == 0 && zsh.output.hasPrefix("#compdef sinkid"))
        try put(directory.child("_sinkid"), zsh.output)
        let zshCheck = try ChildProcess("/usr/bin/zsh", ["-n", directory.child("_sinkid")], logDirectory: directory.path, label: "zsh-n")
        #expect(zshCheck.waitForExit() == 0, "\(zshCheck.errors)")
        let fish = try sinkid(["completion", "fish"], in: directory)
        #expect(fish.code == 0 && fish.output.hasPrefix("# fish completion for sinkid"))
        for spec in CommandCatalog.all {
            for flag in spec.flags {
                #expect(bash.output.contains(flag) && zsh.output.contains(flag), "completion misses \(spec.name) \(flag)")
                #expect(fish.output.contains("-l " + flag.dropFirst(2)), "fish completion misses \(spec.name) \(flag)")
            }
        }
        let wrong = try sinkid(["completion", "fishh"], in: directory)
        #expect(wrong.code == 64 && wrong.errors.contains("did you mean fish?"))
    }

    /// What the shells offer, asked of real bash and fish with the scripts loaded: commands, serve's
    /// subcommands and their actions (a flag's value is not taken for one), flags.
    @Test func completionsOfferServesSubcommandsInBashAndFish() throws {
        let directory = TemporaryDirectory("sinki-completion")
        try put(directory.child("sinkid.bash"), try sinkid(["completion", "bash"], in: directory).output)
        try put(directory.child("sinkid.fish"), try sinkid(["completion", "fish"], in: directory).output)
        func bash(_ line: String) throws -> Set<String> {
            let words = line.split(separator: " ", omittingEmptySubsequences: false).map { "'\($0)'" }.joined(separator: " ")
            let script = "source \(directory.child("sinkid.bash")); COMP_WORDS=(\(words)); COMP_CWORD=\(line.split(separator: " ", omittingEmptySubsequences: false).count - 1); _sinkid; printf '%s\\n' \"${COMPREPLY[@]}\""
            let run = try ChildProcess("/bin/bash", ["-c", script], logDirectory: directory.path, label: "bash-complete")
            #expect(run.waitForExit() == 0, "\(run.errors)")
            return Set(run.output.split(separator: "\n").map(String.init))
        }
        func fish(_ line: String) throws -> Set<String> {
            let script = "source \(directory.child("sinkid.fish")); complete -C '\(line)'"
            let run = try ChildProcess("/usr/bin/fish", ["--no-config", "-c", script], logDirectory: directory.path, label: "fish-complete")
            #expect(run.waitForExit() == 0, "\(run.errors)")
            return Set(run.output.split(separator: "\n").map { String($0.split(separator: "\t").first ?? "") })
        }
        #expect(try bash("sinkid sta") == ["status"])
        #expect(try bash("sinkid serve ") == ["token", "user"])
        #expect(try bash("sinkid serve token ") == ["add", "list", "revoke"])
        #expect(try bash("sinkid serve --data /srv/sinki user r") == ["remove"])
        #expect(try bash("sinkid serve --li").contains("--listen"))
        #expect(try fish("sinkid sta") == ["status"])
        #expect(try fish("sinkid serve ").isSuperset(of: ["token", "user"]))
        #expect(try fish("sinkid serve token ") == ["add", "list", "revoke"])
        #expect(try fish("sinkid serve user ") == ["list", "quota", "remove"])
        #expect(try bash("sinkid res") == ["resume", "resolve", "restore"])
        #expect(try bash("sinkid restore --d") == ["--dry-run"])
        #expect(try fish("sinkid history --") == ["--json", "--state", "--help"])
        #expect(try fish("sinkid pause --st") == ["--state"])
        #expect(try fish("sinkid completion ") == ["bash", "zsh", "fish"])
    }

    /// Issue 25, item 9: zsh offers what the command table holds, asked of a real zsh in a real
    /// terminal (tmux): Tab after `sinkid serve token ` lists its actions, after `sinkid sta` completes
    /// the command.
    @Test func zshCompletesCommandsAndServesSubcommandsInATerminal() async throws {
        let directory = TemporaryDirectory("sinki-zsh")
        let functions = directory.child("functions"), bin = directory.child("bin")
        try FileManager.default.createDirectory(atPath: functions, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        try put(functions + "/_sinkid", try sinkid(["completion", "zsh"], in: directory).output)
        try FileManager.default.createSymbolicLink(atPath: bin + "/sinkid", withDestinationPath: sinkidExecutable())
        try put(directory.child(".zshrc"), "fpath=(\(functions) $fpath)\npath=(\(bin) /usr/bin /bin)\nautoload -Uz compinit && compinit -u -D\nPS1='%% '\n")
        func offered(_ line: String, _ expected: [String]) async throws {
            let terminal = try Terminal(directory, columns: 120, rows: 20, environment: ["HOME": directory.path, "ZDOTDIR": directory.path],
                                        command: "exec /usr/bin/zsh -d -i")
            defer { terminal.stop() }
            try await waitUntil("zsh to prompt", timeout: 20) { try terminal.screen().contains { $0.hasPrefix("%") } }
            try terminal.send(line, "Tab")
            try await waitUntil("zsh to offer \(expected) for \"\(line)\"", timeout: 20) {
                let text = try terminal.screen().joined(separator: "\n")
                return expected.allSatisfy { text.contains($0) }
            }
        }
        try await offered("sinkid serve token ", ["add", "list", "revoke"])
        try await offered("sinkid serve user ", ["list", "remove"])
        try await offered("sinkid sta", ["% sinkid status"])
        try await offered("sinkid resolve x --ke", ["--keep"])
    }
}
