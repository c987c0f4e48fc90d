import Foundation
import Testing
import SinkiConfig
@testable import SinkiMerge
import SinkiRecord
import SinkiTestSupport

/// `[observe]` commands run by the hub, as real processes.
struct ObserverHubTests {
    let directory = TemporaryDirectory("sinki-observers")
    let log = LogCapture()

    func observer(_ path: String, _ script: String, _ words: String...) -> ObserverSettings {
        ObserverSettings(path: path, exec: CommandTemplate(argv: ["sh", "-c", script, "sh"] + words, executable: "/bin/sh"), line: 1)
    }

    func hub(_ observers: [ObserverSettings], limits: ObserverHub.Limits = ObserverHub.Limits()) -> ObserverHub {
        ObserverHub(observers: observers, environment: ["PATH": "/usr/bin:/bin"], logger: log.logger, limits: limits)
    }

    func change(_ path: String, _ event: ObservedChange.Event = .changed) -> ObservedChange {
        ObservedChange(path: SinkiMergeTests.path(path), event: event, localPath: "/home/u/" + path, type: "json", time: 0)
    }

    func lines(_ file: String) -> [String] { (readFile(directory.child(file)) ?? "").split(separator: "\n").map(String.init) }

    @Test func exactAndRecursivePaths() async {
        let append = #"echo "$1" >> "$2""#
        let hub = hub([
            observer("SaveGames/player1.save", append, "%path", directory.child("exact")),
            observer("SaveGames/", append, "%path", directory.child("recursive")),
            observer("SaveGames/slot/", append, "%path", directory.child("slot")),
            observer("/", append, "%path", directory.child("all")),
        ])
        for path in ["SaveGames/player1.save", "SaveGames/player1.save.bak", "SaveGames/slot/a/b.dat", "Other/x", "SaveGamesX/y"] {
            hub.notify(change(path))
        }
        await hub.idle()
        #expect(lines("exact") == ["SaveGames/player1.save"])
        #expect(lines("recursive") == ["SaveGames/player1.save", "SaveGames/player1.save.bak", "SaveGames/slot/a/b.dat"])
        #expect(lines("slot") == ["SaveGames/slot/a/b.dat"])
        #expect(lines("all").count == 5)
        #expect(hub.counts == ObserverHub.Counts(succeeded: 10, failed: 0, dropped: 0))
    }

    @Test func placeholdersAndEnvironment() async {
        let script = #"printf '%s\n' "$1" "$2" "$3" "$SINKI_PATH" "$SINKI_EVENT" "$SINKI_LOCAL_PATH" "$SINKI_TYPE" "$PATH" > "$4""#
        let hub = hub([observer("SaveGames/", script, "%path", "%event", "sinki: %local", directory.child("seen"))])
        hub.notify(ObservedChange(path: path("SaveGames/a b.json"), event: .merged, localPath: "/home/u/SaveGames/a b.json", type: "json"))
        await hub.idle()
        #expect(lines("seen") == ["SaveGames/a b.json", "merged", "sinki: /home/u/SaveGames/a b.json", "SaveGames/a b.json", "merged",
                                  "/home/u/SaveGames/a b.json", "json", "/usr/bin:/bin"])
    }

    @Test func eachObserverSeesItsChangesInOrder() async {
        let hub = hub([observer("S/", #"echo "$1" >> "$2""#, "%path", directory.child("order"))])
        let paths = (0..<30).map { "S/file\($0)" }
        for path in paths { hub.notify(change(path)) }
        await hub.idle()
        #expect(lines("order") == paths)
    }

    @Test func aSlowObserverDoesNotHoldUpTheOthers() async throws {
        let release = directory.child("release")
        let slow = observer("S/", #"while [ ! -e "$1" ]; do sleep 0.02; done; echo done >> "$2""#, release, directory.child("slow"))
        let fast = observer("S/", #"echo "$1" >> "$2""#, "%path", directory.child("fast"))
        // The slow one's first run waits as long as the fast one takes: on a loaded machine, longer than
        // the default timeout.
        let hub = hub([slow, fast], limits: ObserverHub.Limits(timeout: .seconds(600), running: 2))
        for index in 0..<5 { hub.notify(change("S/f\(index)")) }
        // The fast observer gets through all five while the slow one still waits on its first.
        try await waitUntil("the fast observer to see every change", timeout: 120) { lines("fast").count == 5 }
        #expect(lines("slow").isEmpty)
        try writeFile(release, "")
        await hub.idle()
        #expect(lines("slow").count == 5)
    }

    @Test func aFailingObserverIsLogged() async {
        let hub = hub([observer("S/", "echo broken pipe dream >&2; exit 3"), observer("S/", "exit 0")])
        hub.notify(change("S/x"))
        await hub.idle()
        #expect(hub.counts.failed == 1 && hub.counts.succeeded == 1)
        #expect(log.text.contains("observer [observe S/] for changed \"S/x\": exit 3"))
        #expect(log.text.contains("broken pipe dream"))
    }

    @Test func aHungObserverIsKilledAtItsTimeout() async {
        let hub = hub([observer("S/", "sleep 300")], limits: ObserverHub.Limits(timeout: .milliseconds(300)))
        hub.notify(change("S/x"))
        await hub.idle()
        #expect(hub.counts.failed == 1)
        #expect(log.text.contains("timed out"))
    }

    @Test func aFullQueueDropsTheOldest() async throws {
        let release = directory.child("release")
        let hub = hub([observer("S/", #"while [ ! -e "$1" ]; do sleep 0.02; done; echo "$2" >> "$3""#, release, "%path", directory.child("seen"))],
                      limits: ObserverHub.Limits(queued: 2))
        for index in 0..<6 { hub.notify(change("S/f\(index)")) }
        #expect(hub.counts.dropped == 3)
        try writeFile(release, "")
        await hub.idle()
        // The first was already running; of the rest only the newest two waited.
        #expect(lines("seen") == ["S/f0", "S/f4", "S/f5"])
        #expect(log.text.contains("dropped the oldest"))
    }

    @Test func notifyReturnsAtOnceAndIdleWithNothingQueued() async {
        let hub = hub([observer("Elsewhere/", "exit 0")])
        hub.notify(change("S/x"))
        await hub.idle()
        #expect(hub.counts == ObserverHub.Counts())
    }
}

/// The JSON line `sinkid watch` prints.
struct WatchLineTests {
    @Test func rendersOneObjectPerLine() throws {
        let change = ObservedChange(path: path("SaveGames/a \"quoted\".save"), event: .conflict, localPath: "/home/u/SaveGames/a \"quoted\".save",
                                    type: "compare", time: 1_700_000_000_123_000_000)
        let line = WatchLine.render(change)
        #expect(line.hasSuffix("\n"))
        #expect(line.dropLast().contains("\n") == false)
        let value = try JSONValue.parse(bytes(String(line.dropLast())))
        #expect(value["path"] == .string("SaveGames/a \"quoted\".save"))
        #expect(value["event"] == .string("conflict"))
        #expect(value["localPath"] == .string("/home/u/SaveGames/a \"quoted\".save"))
        #expect(value["type"] == .string("compare"))
        #expect(value["time"] == .string("2023-11-14T22:13:20.123Z"))
    }

    @Test func watchPathsMatchLikeObservers() {
        let change = ObservedChange(path: path("SaveGames/slot/a.save"), event: .changed, localPath: "/x", type: "keep-both")
        #expect(change.matches("/"))
        #expect(change.matches("SaveGames/"))
        #expect(change.matches("SaveGames/slot/"))
        #expect(change.matches("SaveGames/slot/a.save"))
        #expect(!change.matches("SaveGames/slot"))
        #expect(!change.matches("SaveGames/sl/"))
        #expect(!change.matches("SaveGames/slot/a.save/"))
    }
}
