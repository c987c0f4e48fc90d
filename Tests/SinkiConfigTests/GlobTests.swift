import SinkiRecord
import Testing
@testable import SinkiConfig

@Suite struct GlobTests {
    /// (pattern, relative path below the root, matches)
    @Test(arguments: [
        ("*.json", "a.json", true), ("*.json", "deep/er/a.json", true), ("*.json", "a.json.bak", false), ("*.json", "json", false),
        ("*.json", ".json", true),
        ("saves/*.dat", "saves/1.dat", true), ("saves/*.dat", "saves/x/1.dat", false), ("saves/*.dat", "other/saves/1.dat", false),
        ("saves/**", "saves/x/y/z.dat", true), ("saves/**", "saves/z", true), ("saves/**", "savesx/z", false),
        ("**/*.dat", "1.dat", true), ("**/*.dat", "a/b/1.dat", true), ("**/cache/*", "cache/x", true), ("**/cache/*", "a/cache/x", true),
        ("**/cache/*", "a/cache/x/y", false), ("a/**/b", "a/b", true), ("a/**/b", "a/x/y/b", true), ("a/**/b", "ab", false),
        ("/*.json", "a.json", true), ("/*.json", "d/a.json", false),
        ("?.txt", "a.txt", true), ("?.txt", "ab.txt", false), ("d?x", "d/x", false),
        ("[abc].txt", "b.txt", true), ("[abc].txt", "d.txt", false), ("[a-c]1", "c1", true), ("[!a-c]1", "c1", false),
        ("[!a-c]1", "z1", true), ("[^a-c]1", "z1", true), ("[]x]", "]", true), ("[]x]", "x", true), ("[!]]", "]", false),
        ("\\*.txt", "*.txt", true), ("\\*.txt", "a.txt", false), ("[\\]]", "]", true),
        ("*", "anything", true), ("*", "dir/file", true), ("*/*", "dir/file", true), ("*/*", "file", false),
        ("*.tar.gz", "a.tar.gz", true), ("*a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false),
        ("plåyer-?.save", "plåyer-ü.save", true), ("Save*", "save1", false),
    ])
    func matching(_ pattern: String, _ path: String, _ expected: Bool) throws {
        let glob = try Glob(pattern)
        #expect(glob.matches(relativePath: path) == expected)
    }

    @Test(arguments: [
        ("", "empty pattern"), ("/", "\"/\" alone matches no file"), ("[abc", "unterminated ["), ("a[!", "unterminated ["),
        ("[z-a]", "reversed range z-a"), ("a\\", "lone backslash at the end"), ("a//b", "empty folder name (//)"),
        ("[a/b]", "/ inside [ ], which never matches"), ("dir/", "ends with /, but a pattern names files; write DIR/** for what is inside a folder"),
    ])
    func badPatterns(_ pattern: String, _ reason: String) {
        #expect(throws: ValueError(reason)) { try Glob(pattern) }
    }

    @Test func wholeMatchIgnoresNames() throws {
        #expect(try Glob("*.json").matches(whole: "a/b.json") == false)
        #expect(try Glob("**.json").matches(whole: "a/b.json") == true)
        #expect(try Glob("a**b").matches(whole: "a/x/b") == true)
        #expect(try Glob("d?x").matches(whole: "d/x") == false, "? does not match /")
        #expect(try Glob("a*b").matches(whole: "a/b") == false, "* does not cross /")
        #expect(try Glob("a[!x]b").matches(whole: "a/b") == false, "a class never matches /")
        #expect(try Glob("a**b").matches(whole: "a/x/b/c") == false)
        #expect(try Glob("a**b").matches(relativePath: "a/x/b") == false, "without a / the pattern is for the file name")
    }

    @Test func longPathsMatch() throws {
        let path = String(repeating: "d/", count: 2000) + "x.json"
        #expect(try Glob("*.json").matches(relativePath: path))
        #expect(try Glob("**/x.json").matches(relativePath: path))
        #expect(try Glob("d/**/*.json").matches(relativePath: path))
        #expect(try Glob("d/*/x.json").matches(relativePath: path) == false)
    }

    /// The first section whose pattern matches chooses, in file order; none gives keep-both.
    @Test func ruleSelectionIsFirstMatchInFileOrder() throws {
        let fixture = Fixture()
        let config = try fixture.load("""
            [merge saves/*.dat]
            rule = newest
            [merge *.dat *.sav]
            rule = larger
            keep-loser = no
            [merge *]
            rule = ask
            [merge *.json]
            rule = json
            """)
        func rule(_ path: String) throws -> MergePolicy { config.ruleFor(path: try RecordPath(validating: "Root/" + path)) }
        #expect(try rule("saves/1.dat").rule == .newest)
        #expect(try rule("saves/1.dat").keepsLoser(after: .newest) == true)
        #expect(try rule("other/1.dat").rule == .larger)
        #expect(try rule("x.sav").keepsLoser(after: .larger) == false)
        #expect(try rule("a.json").rule == .ask)
        #expect(try rule("anything/at/all").rule == .ask)
        #expect(ConfigFile().ruleFor(path: try RecordPath(validating: "Root/a.json")) == MergePolicy(rule: .keepBoth, fallback: .keepBoth))
    }

    @Test func keepLoserDefaults() {
        for rule in MergeRule.allCases {
            #expect(MergePolicy(rule: rule).keepsLoser(after: rule) == (rule == .newest || rule == .larger))
        }
        #expect(MergePolicy(rule: .local, keepLoser: true).keepsLoser(after: .local) == true)
        #expect(MergePolicy(rule: .json, fallback: .newest).keepsLoser(after: .newest) == true)
    }

    @Test func observersExactAndRecursive() throws {
        let fixture = Fixture()
        let config = try fixture.load("""
            [observe SaveGames/]
            exec = notify-send all %path
            [observe SaveGames/slot1/]
            exec = notify-send slot1
            [observe SaveGames/player1.save]
            exec = notify-send exact
            [observe Other/notes.txt]
            exec = notify-send other
            [observe /]
            exec = notify-send everything
            """)
        func names(_ path: String) throws -> [String] {
            try config.observers(for: RecordPath(validating: path)).map { $0.exec.argv[1] }
        }
        #expect(try names("SaveGames/player1.save") == ["all", "exact", "everything"])
        #expect(try names("SaveGames/slot1/a/b.save") == ["all", "slot1", "everything"])
        #expect(try names("SaveGames/slot10/a") == ["all", "everything"])
        #expect(try names("SaveGames/player1.save.bak") == ["all", "everything"])
        #expect(try names("SaveGamesX/a") == ["everything"])
        #expect(try names("Other/notes.txt") == ["other", "everything"])
        #expect(config.observers.map(\.isRecursive) == [true, true, false, false, true])
        #expect(config.observers.map(\.rootName) == ["SaveGames", "SaveGames", "SaveGames", "Other", nil])
    }
}
