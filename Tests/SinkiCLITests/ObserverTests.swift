import Foundation
import SinkiRecord
import SinkiTestSupport
import Testing

/// `[observe PATH]` hooks and `sinkid watch` (issue 5): they hear of remote changes applied here —
/// changed, deleted, merged, conflict — and never of this machine's own edits.
@Suite(.serialized) struct ObserverTests {
    @Test func observersRunForRemoteChangesAtTheirPathOnlyAndNeverForOwnEdits() async throws {
        let cluster = Cluster("sinki-observe")
        let log = cluster.directory.child("observed.log")
        let config = cluster.directory.child("b.conf")
        try writeFile(config, """
            [observe SaveGames/exact.txt]
            exec = sh -c 'echo "exact $SINKI_EVENT $SINKI_PATH $SINKI_TYPE $SINKI_LOCAL_PATH" >> "$0"' \(log)

            [observe SaveGames/dir/]
            exec = sh -c 'echo "recursive $1 $2 $3" >> "$0"' \(log) %event %path %local

            # A slow observer holds one slot and never syncing.
            [observe /]
            exec = sleep 2
            """)
        try cluster.startServer()
        try cluster.startAgent("a")
        try cluster.startAgent("b", extra: ["--config", config])
        let a = cluster.root("a").replacingOccurrences(of: "//", with: "/"), b = cluster.root("b").replacingOccurrences(of: "//", with: "/")
        func lines() -> [String] { (readFile(log) ?? "").split(separator: "\n").map(String.init).filter { $0.contains(".txt") }.sorted() }

        for path in ["exact.txt", "exact.txt.old", "dir/sub/deep.txt", "dirx/near.txt", "other.txt"] { try writeFile(a + "/" + path, path) }
        try writeFile(b + "/dir/own.txt", "written on b")
        try await cluster.waitForConvergence("a", "b", timeout: 10) { $0.entries["dir/own.txt"] != nil && $0.entries["dir/sub/deep.txt"] != nil }
        try FileManager.default.removeItem(atPath: a + "/dir/sub/deep.txt")
        try writeFile(b + "/exact.txt", "edited on b")
        try await cluster.waitForConvergence("a", "b", timeout: 10) { $0.entries["dir/sub/deep.txt"] == nil && readFile(a + "/exact.txt") == "edited on b" }
        let expected = [
            "exact changed SaveGames/exact.txt keep-both \(b)/exact.txt",
            "recursive changed SaveGames/dir/sub/deep.txt \(b)/dir/sub/deep.txt",
            "recursive deleted SaveGames/dir/sub/deep.txt \(b)/dir/sub/deep.txt",
        ].sorted()
        try await waitUntil("the observers' lines", timeout: 10) { lines() == expected }
        // Nothing more comes: b's own files (dir/own.txt, its edit of exact.txt) and paths outside
        // the observed ones never ran an observer. A round trip of one more remote change says so.
        try writeFile(a + "/dir/last.txt", "last")
        try await waitUntil("the last line", timeout: 10) { lines().contains { $0.contains("dir/last.txt") } }
        #expect(lines() == (expected + ["recursive changed SaveGames/dir/last.txt \(b)/dir/last.txt"]).sorted())
    }

    @Test func watchAndObserversHearOfMergesAndConflicts() async throws {
        let scenario = try MergeScenario("sinki-watch-merge", config: """
            [merge *.txt]
            rule = union

            [observe SaveGames/]
            exec = sh -c 'echo "$1 $2 $3" >> "$0"' {DIR}/observed.log %event %path %local
            """)
        let log = scenario.cluster.directory.child("observed.log")
        try await scenario.share(["notes.txt": "one\n", "slot.sav": "base"])
        let watcher = try ChildProcess(sinkidExecutable(), ["watch", "SaveGames/", "--state", scenario.stateB],
                                       logDirectory: scenario.cluster.directory.path, label: "watch")
        defer { watcher.stop() }
        try await waitUntil("the watch to be registered") { scenario.cluster.agent("b")!.errors.contains("watch SaveGames/ for pid \(watcher.pid)") }
        // The watch stays connected: b pauses instead of stopping while both sides edit.
        try await scenario.editWhilePaused(a: ["notes.txt": .write("one\ntwo from a\n"), "slot.sav": .write("a's slot")],
                                           b: ["notes.txt": .write("zero from b\none\n"), "slot.sav": .write("b's slot")])
        try await scenario.converge { _ in
            readFile(scenario.a + "/notes.txt") == "zero from b\none\ntwo from a\n" && scenario.copies(of: "slot.sav").count == 1
        }
        try await waitUntil("the watch lines", timeout: 10) { watcher.output.contains("\"merged\"") && watcher.output.contains("\"conflict\"") }
        var events: [String: String] = [:]
        for line in watcher.output.split(separator: "\n") {
            let json = try JSONValue.parse(Array(line.utf8))
            guard case let .object(members) = json, case let .string(path)? = json["path"], case let .string(event)? = json["event"] else {
                Issue.record("not a watch line: \(line)")
                continue
            }
            #expect(members.map(\.0) == ["path", "event", "localPath", "type", "time"], "\(line)")
            if case let .string(time)? = json["time"] {
                #expect(time.range(of: #"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$"#, options: .regularExpression) != nil)
            }
            #expect(json["localPath"] == .string(scenario.b + "/" + path.dropFirst("SaveGames/".count)))
            events[path] = event
        }
        #expect(events["SaveGames/notes.txt"] == "merged")
        #expect(events["SaveGames/slot.sav"] == "conflict")
        #expect(!events.keys.contains { $0.contains(".sync-conflict-") }, "b's own conflict copy is no remote change")
        // The observers of both agents: b merged and kept a copy; a took b's results as changes.
        try await waitUntil("the observers' lines", timeout: 10) {
            let text = readFile(log) ?? ""
            return text.contains("changed SaveGames/notes.txt \(scenario.a)/notes.txt") && text.contains(".sync-conflict-")
        }
        let text = readFile(log) ?? ""
        #expect(text.contains("merged SaveGames/notes.txt \(scenario.b)/notes.txt"))
        #expect(text.contains("conflict SaveGames/slot.sav \(scenario.b)/slot.sav"))
        #expect(!text.contains("\(scenario.b)/slot.sync-conflict-"))
        try await scenario.expectNoLoop()
    }
}
