import Foundation
import Testing
import SinkiConfig
@testable import SinkiMerge
import SinkiRecord
import SinkiSupport
import SinkiTestSupport

/// Each rule's decision through `MergeEngine.resolve`, with real files and real commands.
struct MergeEngineTests {
    let directory = TemporaryDirectory("sinki-merge")
    let file = path("SaveGames/slot1.save")

    @Test func keepBothTakesRemoteAndKeepsLocalAsACopy() async {
        let outcome = await engine(directory).resolve(path: file, policy: MergePolicy(), local: version("mine"), remote: version("theirs", device: "b"), base: nil)
        #expect(outcome.resolution == .takeRemote(keepLocalCopy: true))
        #expect(outcome.decidedBy == .keepBoth)
        #expect(outcome.event(remoteDeleted: false) == .conflict)
    }

    @Test func newestPicksTheLaterVersionAndKeepsTheLoserByDefault() async {
        let engine = engine(directory)
        let policy = MergePolicy(rule: .newest)
        let older = version("old", at: 100, device: "a"), newer = version("new", at: 200, device: "b")
        #expect(await engine.resolve(path: file, policy: policy, local: older, remote: newer, base: nil).resolution == .takeRemote(keepLocalCopy: true))
        #expect(await engine.resolve(path: file, policy: policy, local: newer, remote: older, base: nil).resolution == .keepLocal(keepRemoteCopy: true))
        let dropping = MergePolicy(rule: .newest, keepLoser: false)
        #expect(await engine.resolve(path: file, policy: dropping, local: older, remote: newer, base: nil).resolution == .takeRemote(keepLocalCopy: false))
    }

    @Test func newestBreaksTiesTheSameWayOnEveryDevice() async {
        let engine = engine(directory)
        let policy = MergePolicy(rule: .newest)
        // Same time: the larger wins; same size too: the device name decides.
        let small = version("ab", at: 5, device: "a"), large = version("abc", at: 5, device: "b")
        #expect(await engine.resolve(path: file, policy: policy, local: small, remote: large, base: nil).resolution == .takeRemote(keepLocalCopy: true))
        #expect(await engine.resolve(path: file, policy: policy, local: large, remote: small, base: nil).resolution == .keepLocal(keepRemoteCopy: true))
        let onA = version("xy", at: 5, device: "alpha"), onB = version("zw", at: 5, device: "beta")
        #expect(await engine.resolve(path: file, policy: policy, local: onA, remote: onB, base: nil).resolution == .takeRemote(keepLocalCopy: true))
        #expect(await engine.resolve(path: file, policy: policy, local: onB, remote: onA, base: nil).resolution == .keepLocal(keepRemoteCopy: true))
    }

    @Test func largerPicksTheBiggerVersion() async {
        let engine = engine(directory)
        let big = version("a much longer save", at: 1, device: "a"), small = version("short", at: 9, device: "b")
        #expect(await engine.resolve(path: file, policy: MergePolicy(rule: .larger), local: big, remote: small, base: nil).resolution
                == .keepLocal(keepRemoteCopy: true))
        #expect(await engine.resolve(path: file, policy: MergePolicy(rule: .larger, keepLoser: false), local: small, remote: big, base: nil).resolution
                == .takeRemote(keepLocalCopy: false))
    }

    @Test func localAndRemoteDropTheLoserUnlessTold() async {
        let engine = engine(directory)
        let local = version("mine"), remote = version("theirs", device: "b")
        #expect(await engine.resolve(path: file, policy: MergePolicy(rule: .local), local: local, remote: remote, base: nil).resolution
                == .keepLocal(keepRemoteCopy: false))
        #expect(await engine.resolve(path: file, policy: MergePolicy(rule: .remote), local: local, remote: remote, base: nil).resolution
                == .takeRemote(keepLocalCopy: false))
        #expect(await engine.resolve(path: file, policy: MergePolicy(rule: .remote, keepLoser: true), local: local, remote: remote, base: nil).resolution
                == .takeRemote(keepLocalCopy: true))
    }

    @Test func askOverwritesNothing() async {
        let outcome = await engine(directory).resolve(path: file, policy: MergePolicy(rule: .ask), local: version("a"), remote: version("b"), base: nil)
        #expect(outcome.resolution == .ask)
        #expect(outcome.event(remoteDeleted: false) == .conflict)
    }

    @Test func aDeleteAgainstAnEditKeepsTheEditBothWays() async {
        let engine = engine(directory)
        for rule in MergeRule.allCases {
            let policy = MergePolicy(rule: rule, command: rule.needsCommand ? shell("exit 0") : nil)
            let deletedHere = await engine.resolve(path: file, policy: policy, local: .deletion(modifiedAt: 9, device: "a"),
                                                   remote: version("edited", device: "b"), base: bytes("orig"))
            #expect(deletedHere.resolution == .takeRemote(keepLocalCopy: false), "\(rule)")
            let deletedThere = await engine.resolve(path: file, policy: policy, local: version("edited"),
                                                    remote: .deletion(modifiedAt: 9, device: "b"), base: bytes("orig"))
            #expect(deletedThere.resolution == .keepLocal(keepRemoteCopy: false), "\(rule)")
            let both = await engine.resolve(path: file, policy: policy, local: .deletion(modifiedAt: 9, device: "a"),
                                            remote: .deletion(modifiedAt: 9, device: "b"), base: nil)
            #expect(both.resolution == .takeRemote(keepLocalCopy: false), "\(rule)")
            #expect(both.event(remoteDeleted: true) == .deleted)
        }
    }

    @Test func sameContentIsNoConflict() async {
        let outcome = await engine(directory).resolve(path: file, policy: MergePolicy(rule: .ask), local: version("same", device: "a"),
                                                      remote: version("same", device: "b"), base: nil)
        #expect(outcome.resolution == .takeRemote(keepLocalCopy: false))
    }

    @Test func unionMergesAgainstTheBase() async {
        let notes = path("Notes/todo.txt")
        let outcome = await engine(directory).resolve(path: notes, policy: MergePolicy(rule: .union), local: version("a\nb\nmine\n"),
                                                      remote: version("a\ntheirs\nb\n", device: "b"), base: bytes("a\nb\n"))
        #expect(outcome.resolution == .merged(bytes("a\ntheirs\nb\nmine\n")))
        #expect(outcome.decidedBy == .union)
        #expect(outcome.event(remoteDeleted: false) == .merged)
    }

    @Test func threeWayRulesWithoutABaseGoToTheFallback() async {
        let engine = engine(directory)
        for rule in [MergeRule.union, .json, .command] {
            let policy = MergePolicy(rule: rule, command: rule == .command ? shell("cp \"$1\" \"$2\"", "%local", "%out") : nil, fallback: .newest)
            let outcome = await engine.resolve(path: file, policy: policy, local: version("{}", at: 1), remote: version("[]", at: 2, device: "b"), base: nil)
            #expect(outcome.decidedBy == .newest, "\(rule)")
            #expect(outcome.resolution == .takeRemote(keepLocalCopy: true), "\(rule)")
            #expect(outcome.fallbackReason?.contains("last shared version") == true)
        }
    }

    @Test func onlyOneSideChangedNeedsNoMerge() async {
        let engine = engine(directory)
        let policy = MergePolicy(rule: .command, command: shell("exit 9"))
        let base = bytes("v1")
        #expect(await engine.resolve(path: file, policy: policy, local: version("v1"), remote: version("v2", device: "b"), base: base).resolution
                == .takeRemote(keepLocalCopy: false))
        #expect(await engine.resolve(path: file, policy: policy, local: version("v2"), remote: version("v1", device: "b"), base: base).resolution
                == .keepLocal(keepRemoteCopy: false))
    }

    @Test func jsonConflictGoesToTheFallback() async {
        let save = path("SaveGames/state.json")
        let engine = engine(directory)
        let conflicting = await engine.resolve(path: save, policy: MergePolicy(rule: .json, fallback: .ask), local: version(#"{"hp":1}"#),
                                               remote: version(#"{"hp":2}"#, device: "b"), base: bytes(#"{"hp":3}"#))
        #expect(conflicting.resolution == .ask)
        #expect(conflicting.decidedBy == .ask)
        #expect(conflicting.fallbackReason == "both sides changed /hp differently")
        let merging = await engine.resolve(path: save, policy: MergePolicy(rule: .json, fallback: .ask), local: version(#"{"hp":1,"a":1}"#),
                                           remote: version(#"{"hp":3,"b":1}"#, device: "b"), base: bytes(#"{"hp":3}"#))
        #expect(merging.resolution == .merged(bytes(#"{"hp":1,"a":1,"b":1}"#)))
    }

    @Test func binaryTextGoesToTheFallback() async {
        let outcome = await engine(directory).resolve(path: file, policy: MergePolicy(rule: .union), local: .bytes([1, 0, 2], modifiedAt: 1, device: "a"),
                                                      remote: version("x\n", device: "b"), base: bytes("y\n"))
        #expect(outcome.decidedBy == .keepBoth)
        #expect(outcome.resolution == .takeRemote(keepLocalCopy: true))
    }

    @Test func inputsMayBeFiles() async throws {
        let local = directory.child("local.txt")
        let content = "a\nb\nc\nlocal\n"
        try writeFile(local, content)
        let localVersion = MergeVersion(content: .file(local), size: Int64(content.utf8.count), modifiedAt: 1, device: "a",
                                        sha256: Digest.sha256Hex(bytes(content)))
        let outcome = await engine(directory).resolve(path: path("R/x.txt"), policy: MergePolicy(rule: .union), local: localVersion,
                                                      remote: version("b\nc\n", device: "b"), base: bytes("a\nb\nc\n"))
        #expect(outcome.resolution == .merged(bytes("b\nc\nlocal\n")))
    }

    // MARK: compare

    @Test func compareExitCodesChooseTheSide() async {
        let engine = engine(directory)
        // The command sees both files: exit 0 when local holds the bigger score.
        let script = #"[ "$(cat "$1")" -ge "$(cat "$2")" ] && exit 0; exit 1"#
        let policy = MergePolicy(rule: .compare, command: shell(script, "%local", "%remote"))
        let high = version("90", device: "a"), low = version("12", device: "b")
        let keepLocal = await engine.resolve(path: file, policy: policy, local: high, remote: low, base: nil)
        #expect(keepLocal.resolution == .keepLocal(keepRemoteCopy: false))
        #expect(keepLocal.command?.exitCode == 0)
        let keepRemote = await engine.resolve(path: file, policy: policy, local: low, remote: high, base: nil)
        #expect(keepRemote.resolution == .takeRemote(keepLocalCopy: false))
        let keeping = MergePolicy(rule: .compare, command: shell(script, "%local", "%remote"), keepLoser: true)
        #expect(await engine.resolve(path: file, policy: keeping, local: low, remote: high, base: nil).resolution == .takeRemote(keepLocalCopy: true))
    }

    @Test func compareWithAnyOtherExitGoesToTheFallback() async {
        let log = LogCapture()
        let engine = engine(directory, log: log)
        let policy = MergePolicy(rule: .compare, command: shell("echo cannot decide >&2; exit 2"), fallback: .larger)
        let outcome = await engine.resolve(path: file, policy: policy, local: version("longer"), remote: version("s", device: "b"), base: nil)
        #expect(outcome.decidedBy == .larger)
        #expect(outcome.resolution == .keepLocal(keepRemoteCopy: true))
        #expect(outcome.fallbackReason?.contains("exit 2") == true)
        #expect(outcome.command?.stderr.text == "cannot decide\n")
        #expect(log.text.contains("compare failed"))
        #expect(log.text.contains("cannot decide"))
    }

    @Test func aCommandThatCannotStartGoesToTheFallback() async {
        let policy = MergePolicy(rule: .compare, command: CommandTemplate(argv: ["gone"], executable: directory.child("no-such-program")))
        let outcome = await engine(directory).resolve(path: file, policy: policy, local: version("a"), remote: version("b", device: "b"), base: nil)
        #expect(outcome.decidedBy == .keepBoth)
        #expect(outcome.fallbackReason?.contains("not started") == true)
    }

    // MARK: command

    @Test func mergeCommandWritesTheResult() async {
        let engine = engine(directory)
        // Argument order and placeholders as the config gives them; the result names every input.
        let script = #"{ echo "base=$(cat "$1")"; echo "local=$(cat "$2")"; echo "remote=$(cat "$3")"; echo "path=$SINKI_PATH"; } > "$4""#
        let policy = MergePolicy(rule: .command, command: shell(script, "%base", "%local", "%remote", "%out"))
        let outcome = await engine.resolve(path: file, policy: policy, local: version("L"), remote: version("R", device: "b"), base: bytes("B"))
        #expect(outcome.resolution == .merged(bytes("base=B\nlocal=L\nremote=R\npath=SaveGames/slot1.save\n")))
        #expect(outcome.decidedBy == .command)
    }

    @Test func mergeCommandRunsInAFreshFolderThatIsRemovedAfterwards() async throws {
        let engine = engine(directory)
        let record = directory.child("seen")
        let script = #"pwd > "$1"; ls >> "$1"; echo "$2" >> "$1"; echo merged > "$3""#
        let policy = MergePolicy(rule: .command, command: shell(script, record, "%local", "%out"))
        let outcome = await engine.resolve(path: file, policy: policy, local: version("L"), remote: version("R", device: "b"), base: bytes("B"))
        #expect(outcome.resolution == .merged(bytes("merged\n")))
        let seen = (readFile(record) ?? "").split(separator: "\n").map(String.init)
        #expect(seen.count == 5)
        let folder = seen[0]
        #expect(folder.hasPrefix(directory.clean("work") + "/merge-"))
        #expect(Array(seen[1...3]) == ["base.save", "local.save", "remote.save"])
        #expect(seen[4] == folder + "/local.save")
        #expect(!FileManager.default.fileExists(atPath: folder))
    }

    @Test func mergeCommandThatFailsGoesToTheFallback() async {
        let policy = MergePolicy(rule: .command, command: shell("echo half > \"$1\"; exit 1", "%out"), fallback: .local)
        let outcome = await engine(directory).resolve(path: file, policy: policy, local: version("L"), remote: version("R", device: "b"), base: bytes("B"))
        #expect(outcome.decidedBy == .local)
        #expect(outcome.resolution == .keepLocal(keepRemoteCopy: false))
        #expect(outcome.command?.exitCode == 1)
    }

    @Test func mergeCommandThatWritesNothingGoesToTheFallback() async {
        let policy = MergePolicy(rule: .command, command: shell("exit 0"), fallback: .ask)
        let outcome = await engine(directory).resolve(path: file, policy: policy, local: version("L"), remote: version("R", device: "b"), base: bytes("B"))
        #expect(outcome.resolution == .ask)
        #expect(outcome.fallbackReason?.contains("wrote nothing") == true)
    }

    @Test func aSymlinkAtOutIsNotFollowed() async throws {
        let secret = directory.child("secret")
        try writeFile(secret, "not for the synced folder")
        let policy = MergePolicy(rule: .command, command: shell(#"ln -s "$1" "$2""#, secret, "%out"), fallback: .ask)
        let outcome = await engine(directory).resolve(path: file, policy: policy, local: version("L"), remote: version("R", device: "b"), base: bytes("B"))
        #expect(outcome.resolution == .ask)
        #expect(outcome.fallbackReason?.contains("%out") == true)
    }

    @Test func mergeCommandThatHangsIsKilledAtTheTimeout() async throws {
        let pids = directory.child("pids")
        // The command and a child of its own both hang; both must go.
        let script = #"sleep 300 & echo $! > "$1"; echo $$ >> "$1"; wait"#
        let policy = MergePolicy(rule: .command, command: shell(script, pids), fallback: .remote)
        // Long enough for a loaded machine to start both and write their ids (400 ms was not).
        let outcome = await engine(directory, timeout: .seconds(2)).resolve(path: file, policy: policy, local: version("L"),
                                                                                    remote: version("R", device: "b"), base: bytes("B"))
        // The runner's own clock: the test's wait to be resumed on a busy pool is not the command's.
        #expect(try #require(outcome.command).elapsed < .seconds(20))
        #expect(outcome.command?.termination == .timedOut)
        #expect(outcome.decidedBy == .remote)
        #expect(outcome.resolution == .takeRemote(keepLocalCopy: false))
        let ids = (readFile(pids) ?? "").split(separator: "\n").compactMap { Int32($0) }
        #expect(ids.count == 2)
        try await waitUntil("the hung processes to be gone", timeout: 10) { ids.allSatisfy(processIsGone) }
    }

    @Test func mergeResultEqualToOneSideIsThatSide() async {
        let engine = engine(directory)
        let policy = MergePolicy(rule: .command, command: shell(#"cp "$1" "$2""#, "%remote", "%out"))
        let outcome = await engine.resolve(path: file, policy: policy, local: version("L"), remote: version("R", device: "b"), base: bytes("B"))
        #expect(outcome.resolution == .takeRemote(keepLocalCopy: false))
    }

    @Test func leftoverWorkspacesAreRemoved() throws {
        let engine = engine(directory)
        let stale = directory.child("work/merge-abc123")
        try FileManager.default.createDirectory(atPath: stale + "/deep/er", withIntermediateDirectories: true)
        try writeFile(stale + "/deep/er/file", "x")
        try writeFile(directory.child("work/keep-me"), "y")
        try engine.removeLeftovers()
        #expect(!FileManager.default.fileExists(atPath: stale))
        #expect(FileManager.default.fileExists(atPath: directory.child("work/keep-me")))
    }
}

/// A `sh -c SCRIPT` command as the config would hold it; `words` follow as `$1`, `$2`…
func shell(_ script: String, _ words: String...) -> CommandTemplate {
    CommandTemplate(argv: ["sh", "-c", script, "sh"] + words, executable: "/bin/sh")
}

/// A version held in memory.
func version(_ content: String, at time: Int64 = 1_000, device: String = "a") -> MergeVersion {
    .bytes(bytes(content), modifiedAt: time, device: device)
}

/// An engine with its workspace folder in `directory`, logging to `log` (which must outlive it) or,
/// without one, only errors to stderr.
func engine(_ directory: TemporaryDirectory, timeout: Duration = .seconds(30), log: LogCapture? = nil) -> MergeEngine {
    var settings = MergeSettings()
    settings.timeout = timeout
    return MergeEngine(settings: settings, workDirectory: directory.clean("work"), environment: ProcessInfo.processInfo.environment,
                       logger: log?.logger ?? Logger(label: "test", level: .error))
}

