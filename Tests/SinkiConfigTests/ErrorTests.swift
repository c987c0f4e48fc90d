import Foundation
import Testing
@testable import SinkiConfig

/// One config text per problem, with the line and the exact message the user sees.
@Suite struct ErrorTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var text: String
        var line: Int
        var message: String
        var code: ConfigError.Code
        var testDescription: String { message }
    }

    static let cases: [Case] = [
        Case(text: "[trnasfer]\nparallel = 4", line: 1,
             message: "unknown section [trnasfer]; did you mean [transfer]?", code: .unknownSection),
        Case(text: "# sinki\n[bogus]", line: 2,
             message: "unknown section [bogus]; sections are [server], [agent], [root], [transfer], [watch], [merge], [observe]", code: .unknownSection),
        Case(text: "[Server]", line: 1, message: "unknown section [Server]; did you mean [server]?", code: .unknownSection),
        Case(text: "[root A]\npath = /x\nurl = http://x", line: 3,
             message: "unknown key \"url\" in [root A]; \"url\" belongs in [server]", code: .unknownKey),
        Case(text: "[watch]\nfoo = 1", line: 2, message: "unknown key \"foo\" in [watch]; keys are delay, rescan", code: .unknownKey),
        Case(text: "[transfer]\nParallel = 2", line: 2,
             message: "unknown key \"Parallel\" in [transfer]; did you mean \"parallel\"?", code: .unknownKey),
        Case(text: "[merge *.db]\nrule = newest\ntimeout = 5s", line: 3,
             message: "unknown key \"timeout\" in [merge *.db]; \"timeout\" belongs in [merge]", code: .unknownKey),
        Case(text: "[merge *.txt]\nrule = newset", line: 2,
             message: "unknown rule \"newset\" in [merge *.txt]; did you mean \"newest\"?", code: .unknownRule),
        Case(text: "[merge *.txt]\nrule = magic", line: 2,
             message: "unknown rule \"magic\" in [merge *.txt]; rules are keep-both, newest, local, remote, larger, union, json, compare, command, ask",
             code: .unknownRule),
        Case(text: "[merge *.txt]\nrule = union\nfallback = keepboth", line: 3,
             message: "unknown fallback rule \"keepboth\" in [merge *.txt]; did you mean \"keep-both\"?", code: .unknownRule),
        Case(text: "[merge *.txt]\nrule = union\nfallback = json", line: 3,
             message: "fallback json in [merge *.txt] can fail itself; use one of keep-both, newest, local, remote, larger, ask", code: .badValue),
        Case(text: "[transfer]\n\ninline-max = 8M", line: 3,
             message: "bad size \"8M\" for inline-max: expected bytes or a number with KB, KiB, MB, MiB, GB, GiB, TB or TiB", code: .badValue),
        Case(text: "[merge]\nbase-cache = lots", line: 2,
             message: "bad size \"lots\" for base-cache: expected bytes or a number with KB, KiB, MB, MiB, GB, GiB, TB or TiB", code: .badValue),
        Case(text: "[watch]\ndelay = 50", line: 2,
             message: "bad duration \"50\" for delay: expected a number with ms, s, m, h or d (50ms, 2s, 1h30m)", code: .badValue),
        Case(text: "[watch]\nrescan = 0", line: 2, message: "rescan must be longer than 0", code: .badValue),
        Case(text: "[merge *.txt]\nrule = newest\nkeep-loser = maybe", line: 3,
             message: "bad boolean \"maybe\" for keep-loser: expected yes, no, true, false, on or off", code: .badValue),
        Case(text: "[transfer]\nparallel = 0", line: 2,
             message: "bad number \"0\" for parallel: expected a whole number from 1 to 256", code: .badValue),
        Case(text: "[transfer]\nmax-rate = fast", line: 2,
             message: "bad rate \"fast\" for max-rate: expected unlimited or a size per second (10MiB, 500KB/s)", code: .badValue),
        Case(text: "[transfer]\nparallel = 2\nxattrs = user.*, trusted.*", line: 3,
             message: "bad pattern \"trusted.*\" for xattrs: a pattern names attributes in the user. namespace, as in user.* or user.mime_type "
                 + "(an empty value turns them off)", code: .badValue),
        Case(text: "[server]\nurl = ftp://example.net", line: 2,
             message: "bad URL \"ftp://example.net\" for url: expected http://HOST[:PORT] or https://HOST[:PORT]", code: .badValue),
        Case(text: "[server]\nlisten = 7071", line: 2,
             message: "bad address \"7071\" for listen: expected HOST:PORT with a port from 0 to 65535 (127.0.0.1:7071, [::1]:7071)", code: .badValue),
        Case(text: "[agent]\nlog-level = verbose", line: 2,
             message: "unknown log level \"verbose\"; use debug, info, warning, error", code: .badValue),
        Case(text: "[agent]\nlog-level = inof", line: 2, message: "unknown log level \"inof\"; did you mean \"info\"?", code: .badValue),
        Case(text: "[agent]\ndevice = my/laptop", line: 2,
             message: "bad device name \"my/laptop\": it goes into file names, so it cannot hold /, \\ or control characters", code: .badValue),
        Case(text: "[server]\nurl =   # none yet", line: 2, message: "no value for url in [server]", code: .badValue),
        Case(text: "[root A]\npath = SaveGames", line: 2,
             message: "path \"SaveGames\" for path must be absolute or start with ~ or $HOME", code: .badValue),
        Case(text: "[root A]\npath = ~bob/SaveGames", line: 2,
             message: "bad path \"~bob/SaveGames\" for path: \"~user\" paths are not supported; write the full path", code: .badValue),
        Case(text: "[root A]\npath = \"/x", line: 2, message: "bad value for path: unterminated \" quote", code: .badValue),
        Case(text: "[merge [abc]\nrule = union", line: 1, message: "bad pattern \"[abc\" in [merge [abc]: unterminated [", code: .badGlob),
        Case(text: "[merge *.txt [z-a].md]\nrule = union", line: 1,
             message: "bad pattern \"[z-a].md\" in [merge *.txt [z-a].md]: reversed range z-a", code: .badGlob),
        Case(text: "[merge saves/]\nrule = union", line: 1,
             message: "bad pattern \"saves/\" in [merge saves/]: ends with /, but a pattern names files; write DIR/** for what is inside a folder",
             code: .badGlob),
        Case(text: "[root A]\npath = /x\nignore = *.tmp, [oops", line: 3,
             message: "bad ignore pattern \"[oops\" in [root A]: unterminated [", code: .badGlob),
        Case(text: "[root A]\nignore = *.tmp", line: 1, message: "[root A] has no path", code: .missingKey),
        Case(text: "\n[root A]\npath = /x/a\n\n[root A]\npath = /y/a", line: 5,
             message: "two roots named \"A\": /x/a and /y/a (the other root is at line 2)", code: .badRoot),
        Case(text: "[root]\npath = /x/SaveGames\n[root]\npath = /y/SaveGames/", line: 3,
             message: "two roots named \"SaveGames\": /x/SaveGames and /y/SaveGames (the other root is at line 1)", code: .badRoot),
        Case(text: "[root A]\npath = /x/a\n[root B]\npath = /x/a/b", line: 3,
             message: "root \"B\" (/x/a/b) is inside root \"A\" (/x/a) (the other root is at line 1)", code: .badRoot),
        Case(text: "[root A]\npath = /x/a\n[root B]\npath = /x/./a", line: 3,
             message: "roots \"A\" and \"B\" are the same folder /x/a (the other root is at line 1)", code: .badRoot),
        Case(text: "[root a/b]\npath = /x", line: 1, message: "bad root name \"a/b\" in [root a/b]: a name cannot hold /, \\ or NUL", code: .badSection),
        // Issue 25, item 6: the server keeps the conflicts every device lists under `.sinki/`.
        Case(text: "[root .sinki]\npath = /x", line: 1,
             message: "bad root name \".sinki\" in [root .sinki]: reserved for sinki's own records (a [root NAME] section names the folder otherwise)",
             code: .badSection),
        Case(text: "[root My Games]\npath = /x", line: 1,
             message: "[root My Games]: a root has one name; quote a name with spaces, as in [root \"My Games\"]", code: .badSection),
        Case(text: "[merge *.save]\nrule = compare", line: 1, message: "[merge *.save] has rule compare but no command", code: .missingKey),
        Case(text: "[merge *.db]\nfallback = ask\n\nrule = command", line: 1, message: "[merge *.db] has rule command but no command", code: .missingKey),
        Case(text: "[merge *.txt]\nfallback = ask", line: 1, message: "[merge *.txt] has no rule", code: .missingKey),
        Case(text: "[merge *.txt]\nrule = union\ncommand = merge-tool %base", line: 3,
             message: "command in [merge *.txt] is only run by rules compare and command, not union", code: .badValue),
        Case(text: "[merge *.db]\nrule = command\ncommand = no-such-merge %base %local %remote %out", line: 3,
             message: "command \"no-such-merge\" not found on PATH", code: .commandNotFound),
        Case(text: "[merge *.db]\nrule = command\ncommand = /nonexistent/merge %out", line: 3,
             message: "command \"/nonexistent/merge\" does not exist or is not executable", code: .commandNotFound),
        Case(text: "[merge *.db]\nrule = command\ncommand = ./merge %out", line: 3,
             message: "command \"./merge\" must be a name on PATH or an absolute path", code: .badCommand),
        Case(text: "[merge *.db]\nrule = command\ncommand = not-executable %out", line: 3,
             message: "command \"not-executable\" not found on PATH", code: .commandNotFound),
        Case(text: "[observe A/]\nexec = notify-send \"oops", line: 2, message: "bad command for exec: unterminated \" quote", code: .badCommand),
        Case(text: "[observe A/]\nexec =    # later", line: 2, message: "no command for exec in [observe A/]", code: .badCommand),
        Case(text: "[observe A/]", line: 1, message: "[observe A/] has no exec", code: .missingKey),
        Case(text: "[observe SaveGames]\nexec = true", line: 1,
             message: "bad observe path \"SaveGames\": this is a root; write \"SaveGames/\" to observe everything in it", code: .badSection),
        Case(text: "[observe ../x]\nexec = true", line: 1,
             message: "bad observe path \"../x\": path \"../x\" has a '.' or '..' component", code: .badSection),
        Case(text: "[observe]\nexec = true", line: 1,
             message: "[observe] needs one path, as in [observe SaveGames/] or [observe SaveGames/player1.save]", code: .badSection),
        Case(text: "[transfer]\nparallel = 2\nchunk-size = 1MiB\nparallel = 3", line: 4,
             message: "duplicate key \"parallel\" in [transfer] (first at line 2)", code: .duplicateKey),
        Case(text: "[watch]\ndelay = 0\n[watch]", line: 3, message: "duplicate section [watch] (first at line 1)", code: .badSection),
        Case(text: "[merge]\n[merge]", line: 2, message: "duplicate section [merge] (first at line 1)", code: .badSection),
        Case(text: "[transfer fast]", line: 1, message: "section [transfer] takes no name", code: .badSection),
        Case(text: "url = http://x", line: 1, message: "key \"url\" comes before any [section]", code: .syntax),
        Case(text: "[server]\njust words", line: 2, message: "expected KEY = VALUE or [SECTION], found \"just words\"", code: .syntax),
        Case(text: "[server]\nmy key = 1", line: 2, message: "expected KEY = VALUE, found \"my key = 1\"", code: .syntax),
        Case(text: "[server", line: 1, message: "section header \"[server\" does not end with ]", code: .syntax),
        Case(text: "[]", line: 1, message: "empty section header []", code: .syntax),
        // Reported in line order: the earlier problem first, whatever its kind.
        Case(text: "[transfer]\nparallel = x\n[bogus]", line: 2,
             message: "bad number \"x\" for parallel: expected a whole number from 1 to 256", code: .badValue),
        Case(text: "[root A]\nwhat\npath = /x", line: 2, message: "expected KEY = VALUE or [SECTION], found \"what\"", code: .syntax),
        Case(text: "[root A]\nignore = x\n[bogus]", line: 1, message: "[root A] has no path", code: .missingKey),
    ]

    @Test(arguments: cases)
    func reportsLineAndMessage(_ testCase: Case) throws {
        let fixture = Fixture()
        let error = try #require(fixture.error(testCase.text))
        let file = fixture.path + "/sinki.conf"
        #expect(error.description == "\(file):\(testCase.line): \(testCase.message)")
        #expect(error.code == testCase.code)
        #expect(error.exitCode == .config)
        #expect(!error.description.contains("\n"))
    }

    /// The example of the brief: line 12, the nearest key suggested.
    @Test func unknownKeyOnLineTwelveSuggestsTheNearest() throws {
        let text = """
            # sinki.conf
            [server]
            url = http://127.0.0.1:7071

            [root SaveGames]
            path = ~/SaveGames

            [transfer]
            parallel = 4
            chunk-size = 8MiB
            attempts = 3
            inline-mx = 128KiB
            """
        let fixture = Fixture()
        let path = fixture.write(text)
        #expect(throws: ConfigError(.unknownKey, "unknown key \"inline-mx\" in [transfer]; did you mean \"inline-max\"?", source: "sinki.conf", line: 12)) {
            try ConfigFile.load(path: path, environment: fixture.environment(), source: "sinki.conf")
        }
        do {
            _ = try ConfigFile.load(path: path, environment: fixture.environment(), source: "sinki.conf")
        } catch {
            #expect(error.description == "sinki.conf:12: unknown key \"inline-mx\" in [transfer]; did you mean \"inline-max\"?")
        }
    }

    @Test func missingFileIsUnreadable() {
        let fixture = Fixture()
        let path = fixture.path + "/absent.conf"
        #expect(throws: ConfigError(.unreadable, "cannot read: No such file or directory", source: path, line: nil)) {
            try ConfigFile.load(path: path, environment: fixture.environment())
        }
    }

    @Test func invalidUTF8NamesItsLine() throws {
        let fixture = Fixture()
        let path = fixture.path + "/bad.conf"
        try Data([0x5B, 0x77, 0x61, 0x74, 0x63, 0x68, 0x5D, 0x0A, 0x23, 0xFF, 0xFE, 0x0A]).write(to: URL(fileURLWithPath: path))
        #expect(throws: ConfigError(.unreadable, "not valid UTF-8 text", source: path, line: 2)) {
            try ConfigFile.load(path: path, environment: fixture.environment())
        }
    }
}
