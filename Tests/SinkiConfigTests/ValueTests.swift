import Testing
@testable import SinkiConfig

@Suite struct ValueTests {
    @Test(arguments: [
        ("4096", Int64(4096)), ("0", 0), ("256KiB", 262_144), ("8MiB", 8_388_608), ("1GiB", 1_073_741_824), ("2TiB", 2 << 40),
        ("1.5MB", 1_500_000), ("1KB", 1000), ("1.5KiB", 1536), ("8 MiB", 8_388_608), ("8mib", 8_388_608), ("12B", 12), ("0.3KiB", 307),
    ])
    func sizes(_ text: String, _ bytes: Int64) {
        #expect(ConfigValues.size(text) == bytes)
    }

    @Test(arguments: ["", "8M", "8 K", "1.5", "-1KiB", "KiB", "1..5MB", "1.MB", "1e6", "99999999999TiB", "1.2345678MB", "8MiBs"])
    func badSizes(_ text: String) {
        #expect(ConfigValues.size(text) == nil)
    }

    @Test(arguments: [
        ("50ms", Duration.milliseconds(50)), ("2s", .seconds(2)), ("30m", .seconds(1800)), ("1h", .seconds(3600)), ("1d", .seconds(86400)),
        ("1.5s", .milliseconds(1500)), ("1h30m", .seconds(5400)), ("1h 30m", .seconds(5400)), ("0", .zero), ("0ms", .zero),
    ])
    func durations(_ text: String, _ duration: Duration) {
        #expect(ConfigValues.duration(text) == duration)
    }

    @Test(arguments: ["", "50", "1.5", "2S", "1w", "ms", "-1s", "1.2345s", "1h30"])
    func badDurations(_ text: String) {
        #expect(ConfigValues.duration(text) == nil)
    }

    @Test func booleans() {
        for yes in ["yes", "true", "on", "Yes", "TRUE"] { #expect(ConfigValues.bool(yes) == true) }
        for no in ["no", "false", "off", "No"] { #expect(ConfigValues.bool(no) == false) }
        for bad in ["", "1", "y", "maybe"] { #expect(ConfigValues.bool(bad) == nil) }
    }

    @Test(arguments: [
        (" value", "value"),
        (" value   # a comment", "value"),
        (" ~/My Games", "~/My Games"),
        (" a#b", "a#b"),
        (" \"a # b\"  # comment", "a # b"),
        (" ' padded '", " padded "),
        (" \"say \\\"hi\\\"\"", "say \"hi\""),
        (" Bob's Games # comment", "Bob's Games"),
        ("\tvalue\t", "value"),
        ("#not-a-comment", "#not-a-comment"),
        ("   # only a comment", ""),
    ])
    func scalarsAndInlineComments(_ raw: String, _ value: String) throws {
        #expect(try ConfigValues.scalar(raw) == value)
    }

    @Test func scalarErrors() {
        #expect(throws: ValueError("unterminated \" quote")) { try ConfigValues.scalar(" \"open") }
        #expect(throws: ValueError("unexpected text after the closing quote")) { try ConfigValues.scalar(" \"a\" b") }
    }

    @Test(arguments: [
        (" *.tmp, .cache/, *~", ["*.tmp", ".cache/", "*~"]),
        (" a,b ,  c  ", ["a", "b", "c"]),
        (" a, , b,", ["a", "b"]),
        (" a, \"#b, c\" # comment", ["a", "#b, c"]),
        (" a\\,b, c", ["a,b", "c"]),
        (" ", []),
        (" # nothing", []),
    ])
    func lists(_ raw: String, _ items: [String]) throws {
        #expect(try ConfigValues.list(raw) == items)
    }

    @Test(arguments: [
        ("save-compare %local %remote", ["save-compare", "%local", "%remote"]),
        ("notify-send \"sinki: %path %event\"", ["notify-send", "sinki: %path %event"]),
        ("sh -c 'echo \"$1\" > %out' merge %local", ["sh", "-c", "echo \"$1\" > %out", "merge", "%local"]),
        ("a\\ b c", ["a b", "c"]),
        ("tool '' \"\"", ["tool", "", ""]),
        ("tool \"a\\\"b\\\\c\\d\"", ["tool", "a\"b\\c\\d"]),
        ("tool arg # comment", ["tool", "arg"]),
        ("tool a#b \"#x\"", ["tool", "a#b", "#x"]),
        ("  tool\targ  ", ["tool", "arg"]),
        ("tool $HOME *.txt ~/x", ["tool", "$HOME", "*.txt", "~/x"]),
        ("pre\"mid dle\"post", ["premid dlepost"]),
    ])
    func commandWords(_ text: String, _ words: [String]) throws {
        #expect(try ConfigValues.splitCommand(text) == words)
    }

    @Test func commandErrors() {
        #expect(throws: ValueError("unterminated ' quote")) { try ConfigValues.splitCommand("tool 'open") }
        #expect(throws: ValueError("unterminated \" quote")) { try ConfigValues.splitCommand("tool \"open") }
        #expect(throws: ValueError("ends with a lone backslash")) { try ConfigValues.splitCommand("tool \\") }
    }

    @Test func placeholdersAreSubstitutedInsideWords() {
        let command = CommandTemplate(argv: ["tool", "%local", "--out=%out", "%%local", "%localx", "%unknown", "100%"], executable: "/bin/tool")
        #expect(command.placeholders == [.local, .out])
        let words = command.arguments(substituting: [.local: "/tmp/a %remote", .out: "/tmp/o"])
        #expect(words == ["tool", "/tmp/a %remote", "--out=/tmp/o", "%local", "/tmp/a %remotex", "%unknown", "100%"])
    }

    @Test func homeExpansion() throws {
        #expect(try ConfigValues.expandHome("~", home: "/h") == "/h")
        #expect(try ConfigValues.expandHome("~/x", home: "/h") == "/h/x")
        #expect(try ConfigValues.expandHome("$HOME/x", home: "/h") == "/h/x")
        #expect(try ConfigValues.expandHome("${HOME}/x", home: "/h") == "/h/x")
        #expect(try ConfigValues.expandHome("$HOMEDIR/x", home: "/h") == "$HOMEDIR/x")
        #expect(try ConfigValues.expandHome("/a/~", home: "/h") == "/a/~")
        #expect(throws: ValueError("cannot expand ~: HOME is not set")) { try ConfigValues.expandHome("~/x", home: nil) }
        #expect(ConfigValues.absolute("a/./b/../c/", from: "/w") == "/w/a/c")
        #expect(ConfigValues.absolute("/x//y/", from: "/w") == "/x/y")
        #expect(ConfigValues.absolute("../..", from: "/w") == "/")
    }

    @Test func listenAddresses() {
        #expect(ListenAddress(parsing: "0.0.0.0:7071") == ListenAddress(host: "0.0.0.0", port: 7071))
        #expect(ListenAddress(parsing: "[::1]:8080") == ListenAddress(host: "::1", port: 8080))
        #expect(ListenAddress(parsing: "[::1]:8080")?.description == "[::1]:8080")
        #expect(ListenAddress(parsing: "localhost:1")?.host == "localhost")
        for bad in ["7071", ":7071", "host:", "host:65536", "::1:80", "[::1]8080", "a b:1"] {
            #expect(ListenAddress(parsing: bad) == nil)
        }
    }

    @Test func suggestions() {
        #expect(nearest(to: "inline-mx", among: ["inline-max", "chunk-size"]) == "inline-max")
        #expect(nearest(to: "paralel", among: ["parallel", "attempts"]) == "parallel")
        #expect(nearest(to: "atempts", among: ["parallel", "attempts"]) == "attempts")
        #expect(nearest(to: "LOG-LEVEL", among: ["log-level", "device"]) == "log-level")
        #expect(nearest(to: "xyz", among: ["parallel", "attempts"]) == nil)
        #expect(editDistance("abcd", "abdc") == 1)
        #expect(editDistance("", "abc") == 3)
    }
}
