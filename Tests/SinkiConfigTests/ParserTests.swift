import Foundation
import Glibc
import SinkiSupport
import Testing
@testable import SinkiConfig

/// Defaults, every key, and the line syntax of whole files.
@Suite struct ParserTests {
    @Test func everyFileDefault() throws {
        let config = try Fixture().load("")
        #expect(config.server.url == nil)
        #expect(config.server.tokenFile == nil)
        #expect(config.server.listen.description == "127.0.0.1:7071")
        #expect(config.agent.device == nil)
        #expect(config.agent.logLevel == .info)
        #expect(config.roots.isEmpty)
        #expect(config.transfer.inlineMax == 256 * 1024)
        #expect(config.transfer.chunkSize == 16 * 1024 * 1024)
        #expect(config.transfer.parallel == 4)
        #expect(config.transfer.attempts == 10)
        #expect(config.transfer.maxRate == nil)
        #expect(config.watch.delay == .milliseconds(50))
        #expect(config.watch.rescan == .seconds(3600))
        #expect(config.merge.timeout == .seconds(60))
        #expect(config.merge.baseCache == 256 * 1024 * 1024)
        #expect(config.mergeSections.isEmpty)
        #expect(config.observers.isEmpty)
        // Sections that are present but empty keep the defaults too.
        #expect(try Fixture().load("[server]\n[agent]\n[transfer]\n[watch]\n[merge]\n") == ConfigFile())
    }

    @Test func everyKeySet() throws {
        let fixture = Fixture()
        let config = try fixture.load("""
            [server]
            url = http://10.0.0.2:7071/
            token-file = $HOME/token
            listen = [::1]:7072
            [agent]
            device = "Bob's laptop"
            log-level = debug
            [root]
            path = ${HOME}/Documents/
            [root "My Games"]
            path = /srv/games
            ignore = "# literal", !keep.tmp, /build/
            [transfer]
            inline-max = 0
            chunk-size = 1MiB
            parallel = 1
            attempts = 3
            max-rate = 500KB/s
            [watch]
            delay = 0
            rescan = 30m
            [merge]
            timeout = 2s
            base-cache = 0
            [merge *.md]
            rule = local
            keep-loser = yes
            fallback = newest
            """)
        #expect(config.server == ServerSettings(url: "http://10.0.0.2:7071", tokenFile: fixture.home + "/token", listen: ListenAddress(host: "::1", port: 7072)))
        #expect(config.agent == AgentSettings(device: "Bob's laptop", logLevel: .debug))
        #expect(config.roots == [
            RootSettings(name: "Documents", path: fixture.home + "/Documents", line: 8),
            RootSettings(name: "My Games", path: "/srv/games", ignore: ["# literal", "!keep.tmp", "/build/"], line: 10),
        ])
        #expect(config.transfer.inlineMax == 0)
        #expect(config.transfer.chunkSize == 1 << 20)
        #expect(config.transfer.parallel == 1)
        #expect(config.transfer.attempts == 3)
        #expect(config.transfer.maxRate == 500_000)
        #expect(config.watch.delay == .zero)
        #expect(config.watch.rescan == .seconds(1800))
        #expect(config.merge.timeout == .seconds(2))
        #expect(config.merge.baseCache == 0)
        #expect(config.mergeSections.first?.policy == MergePolicy(rule: .local, fallback: .newest, keepLoser: true))
        #expect(try fixture.load("[transfer]\nmax-rate = 0").transfer.maxRate == nil)
        #expect(try fixture.load("[transfer]\nmax-rate = 10MiB").transfer.maxRate == 10 << 20)
        // Extended attributes (issue 25, item 2): every user. name by default; an empty value turns them off.
        #expect(try fixture.load("[transfer]\nparallel = 2").transfer.xattrs == ["user.*"])
        #expect(try fixture.load("[transfer]\nxattrs = user.mime_type, user.xdg.*").transfer.xattrs == ["user.mime_type", "user.xdg.*"])
        #expect(try fixture.load("[transfer]\nxattrs =").transfer.xattrs == [])
    }

    @Test func textInMemoryParsesLikeAFile() throws {
        let fixture = Fixture()
        let config = try ConfigFile.parse("[watch]\ndelay = 1s\n", source: "inline", environment: fixture.environment())
        #expect(config.watch.delay == .seconds(1))
        #expect(throws: ConfigError(.badValue, "rescan must be longer than 0", source: "inline", line: 2)) {
            try ConfigFile.parse("[watch]\nrescan = 0ms\n", source: "inline", environment: fixture.environment())
        }
    }

    /// `--config <(...)` names a pipe (`/dev/fd/63`): read as a stream, not by offset.
    @Test func aConfigFromAPipeLoadsLikeAFile() throws {
        var fds: [Int32] = [-1, -1]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]) }
        let text = Array("[watch]\ndelay = 1s\n".utf8)
        #expect(write(fds[1], text, text.count) == text.count)
        close(fds[1])
        let config = try ConfigFile.load(path: "/proc/self/fd/\(fds[0])", environment: Fixture().environment())
        #expect(config.watch.delay == .seconds(1))
    }

    @Test func commentsAndLineEndings() throws {
        let fixture = Fixture()
        let config = try fixture.load("\u{FEFF}# comment\r\n; another\r\n  [watch]   # trailing\r\n\tdelay=2s\r\n")
        #expect(config.watch.delay == .seconds(2))
        let patterns = try fixture.load("[merge [ab].txt \"with space.md\" 'q*.x'] ; comment\nrule = union\n")
        #expect(patterns.mergeSections.first?.patterns.map(\.pattern) == ["[ab].txt", "with space.md", "q*.x"])
    }
}
