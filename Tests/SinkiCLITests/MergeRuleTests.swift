import Foundation
import SinkiTestSupport
import Testing

/// Each `[merge]` rule with two real agents and a real concurrent edit (issue 5): `b` is stopped
/// while both sides edit, then started; `b` finds the conflict and runs the rule. Both end with the
/// same tree, and nothing loops.
@Suite(.serialized) struct MergeRuleTests {
    @Test func keepBothGivesThePathToTheRemoteAndKeepsTheLocalAsACopy() async throws {
        let scenario = try MergeScenario("sinki-keep-both", config: "[merge *.sav]\nrule = keep-both\n")
        try await scenario.share(["slot.sav": "base"])
        try await scenario.editBothSides(a: ["slot.sav": .write("edited on a")], b: ["slot.sav": .write("edited on b")])
        try await scenario.converge { _ in scenario.copies(of: "slot.sav").count == 1 }
        #expect(readFile(scenario.a + "/slot.sav") == "edited on a")
        let copy = try #require(scenario.copies(of: "slot.sav").first)
        #expect(copy.hasSuffix("-b.sav"), "named after the device whose version it keeps")
        #expect(readFile(scenario.a + "/" + copy) == "edited on b")
        try await scenario.expectNoLoop()
    }

    @Test func newestTakesTheLaterVersionAndKeepsTheLoserOnlyWhenAsked() async throws {
        let scenario = try MergeScenario("sinki-newest", config: """
            [merge *.cfg]
            rule = newest
            keep-loser = no

            [merge *.sav]
            rule = newest
            """)
        try await scenario.share(["a-newer.sav": "base", "b-newer.cfg": "base"])
        try await scenario.editBothSides(a: ["a-newer.sav": .writeAt("newer, from a", ago(10)), "b-newer.cfg": .writeAt("older, from a", ago(3600))],
                                         b: ["a-newer.sav": .writeAt("older, from b", ago(3600)), "b-newer.cfg": .writeAt("newer, from b", ago(10))])
        try await scenario.converge { _ in
            readFile(scenario.a + "/b-newer.cfg") == "newer, from b" && scenario.copies(of: "a-newer.sav").count == 1
        }
        // The remote version was newer: it takes the path, the local one is kept (keep-loser's default for newest).
        #expect(readFile(scenario.a + "/a-newer.sav") == "newer, from a")
        let copy = try #require(scenario.copies(of: "a-newer.sav").first)
        #expect(copy.hasSuffix("-b.sav") && readFile(scenario.a + "/" + copy) == "older, from b")
        // The local version was newer: it stays and is sent; with keep-loser = no the other is dropped.
        #expect(scenario.copies(of: "b-newer.cfg").isEmpty)
        try await scenario.expectNoLoop()
    }

    @Test func localAndRemoteKeepTheirSideAndDropTheOther() async throws {
        let scenario = try MergeScenario("sinki-local-remote", config: "[merge *.mine]\nrule = local\n\n[merge *.theirs]\nrule = remote\n")
        try await scenario.share(["x.mine": "base", "x.theirs": "base"])
        try await scenario.editBothSides(a: ["x.mine": .write("a's mine"), "x.theirs": .write("a's theirs")],
                                         b: ["x.mine": .write("b's mine"), "x.theirs": .write("b's theirs")])
        try await scenario.converge { _ in readFile(scenario.a + "/x.mine") == "b's mine" }
        #expect(readFile(scenario.a + "/x.theirs") == "a's theirs")
        #expect(scenario.copies(of: "x.mine").isEmpty && scenario.copies(of: "x.theirs").isEmpty)
        try await scenario.expectNoLoop()
    }

    @Test func largerKeepsTheLargerVersionAndTheLoserAsACopy() async throws {
        let scenario = try MergeScenario("sinki-larger", config: "[merge *.dat]\nrule = larger\nkeep-loser = yes\n")
        try await scenario.share(["w.dat": "base"])
        try await scenario.editBothSides(a: ["w.dat": .write("short")], b: ["w.dat": .write("the longer one, from b")])
        try await scenario.converge { _ in scenario.copies(of: "w.dat").count == 1 }
        #expect(readFile(scenario.a + "/w.dat") == "the longer one, from b")
        let copy = try #require(scenario.copies(of: "w.dat").first)
        #expect(copy.hasSuffix("-a.dat") && readFile(scenario.a + "/" + copy) == "short")
        try await scenario.expectNoLoop()
    }

    @Test func unionKeepsTheLinesBothSidesAdded() async throws {
        let scenario = try MergeScenario("sinki-union", config: "[merge *.txt *.md]\nrule = union\n")
        try await scenario.share(["list.txt": "milk\neggs\n"])
        try await scenario.editBothSides(a: ["list.txt": .write("milk\neggs\njam\n")], b: ["list.txt": .write("milk\nbread\neggs\n")])
        try await scenario.converge { _ in readFile(scenario.a + "/list.txt") == "milk\nbread\neggs\njam\n" }
        #expect(scenario.copies(of: "list.txt").isEmpty)
        #expect(try scenario.cluster.serverRecords().first { $0.path == "SaveGames/list.txt" }?.type == "union")
        try await scenario.expectNoLoop()
    }

    @Test func jsonMergesObjectsKeyByKey() async throws {
        let scenario = try MergeScenario("sinki-json", config: "[merge *.json]\nrule = json\n")
        try await scenario.share(["p.json": #"{"hp":10,"items":["sword"]}"#])
        try await scenario.editBothSides(a: ["p.json": .write(#"{"hp":10,"items":["sword","shield"],"gold":5}"#)],
                                         b: ["p.json": .write(#"{"hp":7,"items":["sword"]}"#)])
        try await scenario.converge { _ in readFile(scenario.a + "/p.json") == #"{"hp":7,"items":["sword","shield"],"gold":5}"# }
        try await scenario.expectNoLoop()
    }

    @Test func compareLetsTheCommandChoose() async throws {
        // Exit 0 (local's level is at least remote's) keeps local, exit 1 keeps remote.
        let scenario = try MergeScenario("sinki-compare", config: """
            [merge *.save]
            rule = compare
            command = sh -c 'test "$(cut -d" " -f2 "$1")" -ge "$(cut -d" " -f2 "$2")"' compare %local %remote
            """)
        try await scenario.share(["one.save": "level 1", "two.save": "level 1"])
        try await scenario.editBothSides(a: ["one.save": .write("level 5"), "two.save": .write("level 9")],
                                         b: ["one.save": .write("level 7"), "two.save": .write("level 8")])
        try await scenario.converge { _ in
            readFile(scenario.a + "/one.save") == "level 7" && readFile(scenario.b + "/two.save") == "level 9"
        }
        #expect(scenario.copies(of: "one.save").isEmpty && scenario.copies(of: "two.save").isEmpty)
        try await scenario.expectNoLoop()
    }

    @Test func commandWritesTheResultAtOut() async throws {
        let scenario = try MergeScenario("sinki-command", config: """
            [merge *.db]
            rule = command
            command = sh -c 'sort -u "$2" "$3" > "$4"' merge %base %local %remote %out
            """)
        try await scenario.share(["s.db": "b\n"])
        try await scenario.editBothSides(a: ["s.db": .write("b\nc\n")], b: ["s.db": .write("a\nb\n")])
        try await scenario.converge { _ in readFile(scenario.a + "/s.db") == "a\nb\nc\n" }
        #expect(scenario.copies(of: "s.db").isEmpty)
        try await scenario.expectNoLoop()
    }

    @Test func mergeCommandsThatFailHangOrWriteNothingGoToTheFallback() async throws {
        let scenario = try MergeScenario("sinki-command-fails", config: """
            [merge]
            timeout = 1s

            [merge *.fail]
            rule = command
            command = sh -c 'echo broken merge >&2; exit 3' merge %base %local %remote %out

            [merge *.hang]
            rule = command
            command = sleep 30
            fallback = remote

            [merge *.none]
            rule = command
            command = true
            fallback = local
            """)
        try await scenario.share(["x.fail": "base", "x.hang": "base", "x.none": "base"])
        try await scenario.editBothSides(a: ["x.fail": .write("a"), "x.hang": .write("a"), "x.none": .write("a")],
                                         b: ["x.fail": .write("b"), "x.hang": .write("b"), "x.none": .write("b")])
        try await scenario.converge(timeout: 20) { _ in
            scenario.copies(of: "x.fail").count == 1 && readFile(scenario.a + "/x.none") == "b" && readFile(scenario.b + "/x.hang") == "a"
        }
        // keep-both (the default fallback): the remote takes the path, the local is kept.
        #expect(readFile(scenario.a + "/x.fail") == "a")
        #expect(scenario.copies(of: "x.hang").isEmpty && scenario.copies(of: "x.none").isEmpty)
        // The hung command was killed at the timeout, not waited for: waited for, `sleep 30` would have
        // outlasted the 20 s the convergence had, and exited 0 having written nothing (a log line of its own).
        let log = scenario.cluster.agent("b")?.errors ?? ""
        #expect(log.contains("command failed (") && log.contains("broken merge"), "the failure and the command's last stderr line are logged")
        #expect(log.contains("timed out, killed"), "\(log.suffix(3000))")
        #expect(log.contains("wrote nothing to %out"))
        try await scenario.expectNoLoop()
    }

    @Test func aStopHeldByAMergeSaysWhatItWaitsFor() async throws {
        // The command waits for a file the test makes: the stop that comes meanwhile waits for the merge
        // (its result is the user's), and says so in the log instead of hanging without a word.
        let scenario = try MergeScenario("sinki-stop-held", config: """
            [merge]
            timeout = 60s

            [merge *.hold]
            rule = command
            command = sh -c 'touch "$0.started"; while [ ! -e "$0.release" ]; do sleep 0.05; done; cat "$3" > "$4"' {DIR}/flag %base %local %remote %out
            """)
        let flag = scenario.cluster.directory.child("flag")
        try await scenario.share(["x.hold": "base"])
        try await scenario.editBothSides(a: ["x.hold": .write("a")], b: ["x.hold": .write("b")])
        try await waitUntil("b to run the merge command", timeout: 20) { FileManager.default.fileExists(atPath: flag + ".started") }
        let b = try #require(scenario.cluster.agent("b"))
        b.signal(SIGTERM)
        try await waitUntil("b to say what its stop waits for", timeout: 20) { b.errors.contains("still stopping after 5 s: waiting for 1 merge(s)") }
        #expect(b.isRunning)
        try writeFile(flag + ".release", "")
        #expect(b.waitForExit(timeout: 20) == 0, "\(b.errors.suffix(3000))")
    }

    @Test func aBaseDroppedFromTheCacheGoesToTheFallback() async throws {
        // 100 bytes hold one of the two 60-byte bases: the older is dropped when the newer comes.
        let scenario = try MergeScenario("sinki-base-evicted", config: "[merge]\nbase-cache = 100B\n\n[merge *.txt]\nrule = union\n")
        let first = "first\n" + String(repeating: "shared line\n", count: 4), second = "second\n" + String(repeating: "shared line\n", count: 4)
        try await scenario.share(["first.txt": first])
        try await scenario.share(["second.txt": second])
        try await scenario.editBothSides(a: ["first.txt": .write(first + "from a\n"), "second.txt": .write(second + "from a\n")],
                                         b: ["first.txt": .write("from b\n" + first), "second.txt": .write("from b\n" + second)])
        try await scenario.converge { _ in
            scenario.copies(of: "first.txt").count == 1 && readFile(scenario.a + "/second.txt") == "from b\n" + second + "from a\n"
        }
        // Without its base, first.txt could not be merged: keep-both (the fallback) kept both versions.
        #expect(readFile(scenario.a + "/first.txt") == first + "from a\n")
        let copy = try #require(scenario.copies(of: "first.txt").first)
        #expect(readFile(scenario.a + "/" + copy) == "from b\n" + first)
        #expect(scenario.copies(of: "second.txt").isEmpty)
        #expect(scenario.cluster.agent("b")?.errors.contains("union failed (the last shared version is not known") == true)
        try await scenario.expectNoLoop()
    }

    @Test func aDeleteAgainstAnEditKeepsTheEditEitherWayAndTwoDeletesAreOne() async throws {
        let scenario = try MergeScenario("sinki-delete-edit", config: "[merge *.txt]\nrule = union\n")
        try await scenario.share(["deleted-on-a.txt": "v1\n", "deleted-on-b.txt": "v1\n", "deleted-on-both.txt": "v1\n", "keeper.txt": "k\n"])
        try await scenario.editBothSides(a: ["deleted-on-a.txt": .delete, "deleted-on-b.txt": .write("v2 from a\n"), "deleted-on-both.txt": .delete],
                                         b: ["deleted-on-a.txt": .write("v2 from b\n"), "deleted-on-b.txt": .delete, "deleted-on-both.txt": .delete])
        try await scenario.converge { snapshot in
            snapshot.entries["deleted-on-a.txt"] != nil && snapshot.entries["deleted-on-b.txt"] != nil
                && snapshot.entries["deleted-on-both.txt"] == nil
        }
        #expect(readFile(scenario.a + "/deleted-on-a.txt") == "v2 from b\n")
        #expect(readFile(scenario.a + "/deleted-on-b.txt") == "v2 from a\n")
        let log = scenario.cluster.agent("b")?.errors ?? ""
        #expect(log.contains("deleted on a but edited here: the edit is kept"))
        #expect(log.contains("deleted here but edited on a: the edit is kept"))
        // One tombstone: a's; b found the same delete there and sent nothing.
        let tombstone = try #require(try scenario.cluster.serverRecords().first { $0.path == "SaveGames/deleted-on-both.txt" })
        #expect(tombstone.deleted && tombstone.device == "a")
        try await scenario.expectNoLoop()
    }

    /// Files above `inline-max` travel through tus: their remote version is a checked download, and
    /// every rule reads it from there (a copy kept aside, a union, a version kept for `resolve`).
    @Test func largeFilesFromTusAreSettledByTheirRulesToo() async throws {
        let scenario = try MergeScenario("sinki-large-merge", config: """
            [transfer]
            inline-max = 4KiB

            [merge *.sav]
            rule = keep-both

            [merge *.log]
            rule = union

            [merge *.db]
            rule = ask
            """)
        func big(_ tag: String) -> String { (0..<800).map { "\(tag) line \($0) of a large file\n" }.joined() }
        let log = big("shared")
        try await scenario.share(["slot.sav": big("base"), "events.log": log, "world.db": big("base")])
        try await scenario.editBothSides(a: ["slot.sav": .write(big("a")), "events.log": .write(log + "added on a\n"), "world.db": .write(big("a"))],
                                         b: ["slot.sav": .write(big("b")), "events.log": .write(log + "added on b\n"), "world.db": .write(big("b"))])
        // The ask rule keeps both versions aside (the remote one copied from its download) until resolve.
        try await waitUntil("b to list the conflict on world.db", timeout: 15) { try scenario.conflictCount() == 1 }
        guard case let .array(listed)? = try scenario.onB(["conflicts", "--json"]).json()["conflicts"],
              case let .string(remoteCopy)? = listed.first?["remote"]?["copy"] else {
            Issue.record("no copy of a's world.db kept for resolve")
            return
        }
        #expect(readFile(remoteCopy) == big("a"))
        #expect(readFile(scenario.b + "/world.db") == big("b"))
        #expect(try scenario.onB(["resolve", "SaveGames/world.db", "--keep", "remote"]).code == 0)
        try await scenario.converge { _ in
            scenario.copies(of: "slot.sav").count == 1 && (readFile(scenario.a + "/events.log")?.contains("added on b") ?? false)
                && readFile(scenario.b + "/world.db") == big("a")
        }
        #expect(readFile(scenario.a + "/slot.sav") == big("a"))
        let copy = try #require(scenario.copies(of: "slot.sav").first)
        #expect(readFile(scenario.a + "/" + copy) == big("b"))
        let merged = readFile(scenario.b + "/events.log") ?? ""
        #expect(merged.hasPrefix(log) && merged.contains("added on a\n") && merged.contains("added on b\n"))
        try await scenario.expectNoLoop()
    }
}

/// Merge rules and observers follow a config reload; a bad config is refused at start and on reload.
@Suite(.serialized) struct MergeConfigTests {
    @Test func aReloadChangesTheRulesLiveAndABadOneKeepsThem() async throws {
        let scenario = try MergeScenario("sinki-merge-reload", config: "")
        try writeFile(scenario.config, "[merge *.txt]\nrule = union\n")
        let b = try #require(scenario.cluster.agent("b"))
        b.signal(SIGHUP)
        try await waitUntil("the reload", timeout: 10) { b.errors.contains("reloaded ") }
        #expect(b.errors.contains("merge rules and observers"), "\(b.errors.suffix(2000))")
        try writeFile(scenario.config, "[merge *.txt]\nrule = onion\n")
        b.signal(SIGHUP)
        try await waitUntil("the refusal", timeout: 10) { b.errors.contains("config reload refused") }
        #expect(b.errors.contains(":2: unknown rule"), "\(b.errors.suffix(2000))")
        // From the reload on, b keeps the base of paths whose rule merges three ways.
        try await scenario.share(["notes.txt": "one\n"])
        try await scenario.editWhilePaused(a: ["notes.txt": .write("one\ntwo from a\n")], b: ["notes.txt": .write("zero from b\none\n")])
        try await scenario.converge { _ in readFile(scenario.a + "/notes.txt") == "zero from b\none\ntwo from a\n" }
        #expect(try scenario.cluster.serverRecords().first { $0.path == "SaveGames/notes.txt" }?.type == "union",
                "b stamps the reloaded rule's name on what it sends")
        try await scenario.expectNoLoop()
    }

    @Test func aBadRuleOrAMissingCommandStopsTheAgentAtStart() throws {
        let directory = TemporaryDirectory("sinki-merge-config")
        let root = directory.child("SaveGames")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        for (text, problem) in [("[merge *.txt]\nrule = onion\n", ":2: unknown rule"),
                                ("[merge *.db]\nrule = command\ncommand = no-such-merge-tool %base %local %remote %out\n", ":3: "),
                                ("[merge [z-a].txt]\nrule = union\n", ":1: bad pattern")] {
            let config = directory.child("bad-\(UInt32.random(in: 0...UInt32.max)).conf")
            try writeFile(config, text)
            let run = try sinkid(["--root", root, "--state", directory.child("state"), "--config", config, "--server", "http://127.0.0.1:9"],
                                 in: directory)
            #expect(run.code == 78, "\(run.errors)")
            #expect(run.errors.contains(problem), "\(run.errors)")
        }
    }
}
