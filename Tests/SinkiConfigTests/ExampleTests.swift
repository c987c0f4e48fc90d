import Foundation
import SinkiRecord
import SinkiSupport
import Testing
@testable import SinkiConfig

@Suite struct ExampleTests {
    /// The example of design §5, verbatim.
    static let designExample = """
        [server]
        url = https://sync.example.net
        token-file = ~/.config/sinki/token

        [root SaveGames]
        path = ~/SaveGames
        ignore = *.tmp, .cache/, *~

        [transfer]
        inline-max = 256KiB
        chunk-size = 8MiB
        parallel = 4

        [merge *.save]
        rule = compare                       # like FileSinki's shouldOverwrite
        command = save-compare %local %remote  # exit 0: keep local, 1: keep remote

        [merge *.json]
        rule = json                          # three-way merge of objects; fallback when it cannot
        fallback = keep-both

        [merge *.txt *.md]
        rule = union

        [merge *.db]
        rule = command                       # like FileSinki's merge(with:); like a git merge driver
        command = sqlite-merge %base %local %remote %out
        fallback = ask

        [observe SaveGames/]                 # trailing slash: every path below, recursively
        exec = notify-send "sinki: %path %event"

        """

    @Test func designExampleParsesToTheExpectedModel() throws {
        let fixture = Fixture()
        let config = try fixture.load(Self.designExample)
        let home = fixture.home, bin = fixture.bin

        var expected = ConfigFile()
        expected.server = ServerSettings(url: "https://sync.example.net", tokenFile: home + "/.config/sinki/token")
        expected.roots = [RootSettings(name: "SaveGames", path: home + "/SaveGames", ignore: ["*.tmp", ".cache/", "*~"], line: 5)]
        expected.transfer.inlineMax = 256 * 1024
        expected.transfer.chunkSize = 8 * 1024 * 1024
        expected.transfer.parallel = 4
        expected.mergeSections = [
            MergeSection(patterns: [try Glob("*.save")], policy: MergePolicy(
                rule: .compare, command: CommandTemplate(argv: ["save-compare", "%local", "%remote"], executable: bin + "/save-compare")), line: 14),
            MergeSection(patterns: [try Glob("*.json")], policy: MergePolicy(rule: .json, fallback: .keepBoth), line: 18),
            MergeSection(patterns: [try Glob("*.txt"), try Glob("*.md")], policy: MergePolicy(rule: .union), line: 22),
            MergeSection(patterns: [try Glob("*.db")], policy: MergePolicy(
                rule: .command, command: CommandTemplate(argv: ["sqlite-merge", "%base", "%local", "%remote", "%out"], executable: bin + "/sqlite-merge"),
                fallback: .ask), line: 25),
        ]
        expected.observers = [ObserverSettings(path: "SaveGames/", exec: CommandTemplate(argv: ["notify-send", "sinki: %path %event"], executable: bin + "/notify-send"), line: 30)]
        #expect(config == expected)

        // The parts the agent asks for, through the lookups it uses.
        #expect(config.ruleFor(path: try RecordPath(validating: "SaveGames/slot1/player.save")).rule == .compare)
        #expect(config.ruleFor(path: try RecordPath(validating: "SaveGames/notes.md")).rule == .union)
        #expect(config.ruleFor(path: try RecordPath(validating: "SaveGames/image.png")) == MergePolicy())
        #expect(config.observers(for: try RecordPath(validating: "SaveGames/a/b.save")).count == 1)
        #expect(config.observers(for: try RecordPath(validating: "Other/a")).isEmpty)
    }

    /// `sinki.conf.example` at the repository root parses on a Debian machine, with the system PATH.
    @Test func repositoryExampleParses() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let example = root.appendingPathComponent("sinki.conf.example").path
        let environment = ProcessEnvironment(variables: ["HOME": "/home/someone", "PATH": "/usr/bin:/bin"], currentDirectory: "/", hostName: "laptop")
        let config = try ConfigFile.load(path: example, environment: environment)
        #expect(config.roots.map(\.name) == ["SaveGames"])
        #expect(config.roots.first?.path == "/home/someone/SaveGames")
        #expect(!config.mergeSections.isEmpty)
        #expect(!config.observers.isEmpty)
        #expect(config.transfer == TransferSettings())
        #expect(config.watch == WatchSettings())
        #expect(config.merge == MergeSettings())
    }
}
