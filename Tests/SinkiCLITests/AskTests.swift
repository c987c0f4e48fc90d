import Foundation
import SinkiRecord
import SinkiTestSupport
import Testing

/// The `ask` rule (issue 5): both versions kept aside, nothing overwritten, the conflict listed by
/// `sinkid conflicts` and `status` until `sinkid resolve PATH --keep local|remote|both` settles it.
@Suite(.serialized) struct AskTests {
    static let schema = try! JSONSchema(file: repositoryRoot() + "/docs/status.schema.json")

    @Test func askWaitsForResolveAndEachKeepSettlesIt() async throws {
        let scenario = try MergeScenario("sinki-ask", config: "[merge *.db]\nrule = ask\n")
        let paths = ["keep-local.db", "keep-remote.db", "keep-both.db"]
        try await scenario.share(Dictionary(uniqueKeysWithValues: paths.map { ($0, "base") }))
        try await scenario.editBothSides(a: Dictionary(uniqueKeysWithValues: paths.map { ($0, .write("a's \($0)")) }),
                                         b: Dictionary(uniqueKeysWithValues: paths.map { ($0, .write("b's \($0)")) }))
        try await waitUntil("b to list the three conflicts", timeout: 15) { try scenario.conflictCount() == 3 }
        guard case let .array(listed)? = try scenario.onB(["conflicts", "--json"]).json()["conflicts"] else {
            Issue.record("conflicts --json lists no conflicts")
            return
        }
        // Nothing was overwritten on either side, and b's edits wait: they are not sent.
        for path in paths {
            #expect(readFile(scenario.b + "/" + path) == "b's \(path)")
            #expect(readFile(scenario.a + "/" + path) == "a's \(path)")
        }
        #expect(scenario.copies(of: "keep-local.db").isEmpty, "ask writes no conflict copy into the synced folder")
        // Each side is kept aside in b's state folder, with its facts.
        for item in listed {
            guard case let .string(path)? = item["path"], case let .string(localCopy)? = item["local"]?["copy"],
                  case let .string(remoteCopy)? = item["remote"]?["copy"] else {
                Issue.record("a conflict without its copies: \(item)")
                continue
            }
            let name = String(path.dropFirst("SaveGames/".count))
            #expect(localCopy.hasPrefix(scenario.stateB + "/conflicts/SaveGames/") && localCopy.hasSuffix("-b.db"))
            #expect(remoteCopy.hasSuffix("-a.db"))
            #expect(readFile(localCopy) == "b's \(name)" && readFile(remoteCopy) == "a's \(name)")
            #expect(item["remoteDevice"] == .string("a") && item["remote"]?["size"] == .int(Int64("a's \(name)".utf8.count)))
        }
        let status = try scenario.onB(["status", "--json"])
        #expect(Self.schema.problems(try status.json()) == [])
        if case let .array(inStatus)? = try status.json()["conflicts"] { #expect(inStatus.count == 3) } else { Issue.record("no conflicts in status") }
        #expect(try status.json()["agent"]?["state"] == .string("up-to-date"), "a waiting conflict is not work to do")
        let text = try scenario.onB(["conflicts"])
        #expect(text.output.contains("SaveGames/keep-both.db  with a") && text.output.contains("kept at "), "\(text.output)")

        // It is kept across a restart (the conflicts table), and nothing is sent meanwhile.
        scenario.cluster.stopAgent("b")
        try scenario.cluster.startAgent("b", extra: ["--config", scenario.config])
        #expect(try scenario.conflictCount() == 3)

        let unknown = try scenario.onB(["resolve", "SaveGames/nothing.db", "--keep", "local"])
        #expect(unknown.code == 65 && unknown.errors.contains("no conflict waits at"))
        for (path, keep) in [("keep-local.db", "local"), ("keep-remote.db", "remote"), ("keep-both.db", "both")] {
            let run = try scenario.onB(["resolve", "SaveGames/" + path, "--keep", keep])
            #expect(run.code == 0, "\(run.errors)")
        }
        try await scenario.converge { _ in
            readFile(scenario.a + "/keep-local.db") == "b's keep-local.db" && readFile(scenario.b + "/keep-remote.db") == "a's keep-remote.db"
                && scenario.copies(of: "keep-both.db").count == 1
        }
        #expect(readFile(scenario.a + "/keep-both.db") == "a's keep-both.db")
        let copy = try #require(scenario.copies(of: "keep-both.db").first)
        #expect(copy.hasSuffix("-b.db") && readFile(scenario.a + "/" + copy) == "b's keep-both.db")
        #expect(try scenario.onB(["conflicts"]).output.contains("no conflicts wait"))
        let leftovers = FileManager.default.enumerator(atPath: scenario.stateB + "/conflicts")?.allObjects.compactMap { $0 as? String } ?? []
        #expect(!leftovers.contains { $0.hasSuffix(".db") }, "copies kept aside are removed once settled: \(leftovers)")
        try await scenario.expectNoLoop()
    }

    /// Issue 25, item 6: the conflicts b finds are recorded on the server, so a lists them too (found by
    /// b, its own file against b's version) and settles them from there, each --keep as on b; one b
    /// settles itself leaves a's list. Settled anywhere, no device lists it and both hold the same.
    @Test func askConflictsAreKnownToEveryDeviceAndSettleFromAny() async throws {
        let scenario = try MergeScenario("sinki-ask-shared", config: "[merge *.db]\nrule = ask\n")
        let paths = ["keep-local.db", "keep-remote.db", "keep-both.db", "settled-on-b.db"]
        // And a version above the inline limit: its record names chunks sent from the copy kept aside.
        let bigA = String(repeating: "a's large version, line by line\n", count: 12_000)
        let bigB = String(repeating: "b's large version, line by line\n", count: 12_000)
        try await scenario.share(Dictionary(uniqueKeysWithValues: paths.map { ($0, "base") } + [("large.db", "base")]))
        try await scenario.editBothSides(a: Dictionary(uniqueKeysWithValues: paths.map { ($0, .write("a's \($0)")) } + [("large.db", .write(bigA))]),
                                         b: Dictionary(uniqueKeysWithValues: paths.map { ($0, .write("b's \($0)")) } + [("large.db", .write(bigB))]))
        let stateA = scenario.cluster.directory.child("a") + "/state"
        func listed(_ state: String) throws -> [String: JSONValue] {
            let run = try sinkid(["conflicts", "--json", "--state", state], in: scenario.cluster.directory)
            guard case let .array(items)? = try run.json()["conflicts"] else { return [:] }
            return Dictionary(uniqueKeysWithValues: items.compactMap { item in
                guard case let .string(path)? = item["path"] else { return nil }
                return (path, item)
            })
        }
        try await waitUntil("a to list the five conflicts b found", timeout: 30) {
            try listed(stateA).count == 5 && listed(scenario.stateB).values.allSatisfy { $0["shared"] == .bool(true) }
        }
        for (path, entry) in try listed(stateA) where path != "SaveGames/large.db" {
            let name = String(path.dropFirst("SaveGames/".count))
            #expect(entry["foundBy"] == .string("b") && entry["shared"] == .bool(true) && entry["remoteDevice"] == .string("b"), "\(entry)")
            #expect(entry["local"]?["device"] == .string("a") && entry["local"]?["size"] == .int(Int64("a's \(name)".utf8.count)), "\(entry)")
            #expect(entry["remote"]?["size"] == .int(Int64("b's \(name)".utf8.count)) && entry["remote"]?["copy"] == .null, "\(entry)")
        }
        let status = try sinkid(["status", "--json", "--state", stateA], in: scenario.cluster.directory).json()
        #expect(Self.schema.problems(status) == [])
        if case let .array(inStatus)? = status["conflicts"] { #expect(inStatus.count == 5) } else { Issue.record("no conflicts in a's status") }
        let text = try sinkid(["conflicts", "--state", stateA], in: scenario.cluster.directory).output
        #expect(text.contains("SaveGames/keep-both.db  with b") && text.contains("found on b"), "\(text)")
        // Nothing moved meanwhile: b's edits wait, a's files are a's.
        for path in paths { #expect(readFile(scenario.a + "/" + path) == "a's \(path)" && readFile(scenario.b + "/" + path) == "b's \(path)") }

        for (path, keep) in [("keep-local.db", "local"), ("keep-remote.db", "remote"), ("keep-both.db", "both"), ("large.db", "remote")] {
            let run = try sinkid(["resolve", "SaveGames/" + path, "--keep", keep, "--state", stateA], in: scenario.cluster.directory)
            #expect(run.code == 0, "resolve \(path) --keep \(keep) on a: \(run.errors)")
        }
        #expect(try scenario.onB(["resolve", "SaveGames/settled-on-b.db", "--keep", "remote"]).code == 0)
        try await scenario.converge(timeout: 30) { _ in
            readFile(scenario.a + "/keep-local.db") == "a's keep-local.db" && readFile(scenario.b + "/keep-local.db") == "a's keep-local.db"
                && readFile(scenario.a + "/keep-remote.db") == "b's keep-remote.db" && readFile(scenario.b + "/keep-remote.db") == "b's keep-remote.db"
                && readFile(scenario.b + "/keep-both.db") == "a's keep-both.db" && scenario.copies(of: "keep-both.db").count == 1
                && readFile(scenario.a + "/settled-on-b.db") == "a's settled-on-b.db" && readFile(scenario.b + "/settled-on-b.db") == "a's settled-on-b.db"
                && readFile(scenario.a + "/large.db") == bigB && readFile(scenario.b + "/large.db") == bigB
        }
        let copy = try #require(scenario.copies(of: "keep-both.db").first)
        #expect(copy.hasSuffix("-b.db") && readFile(scenario.a + "/" + copy) == "b's keep-both.db", "\(copy)")
        try await waitUntil("neither to list a conflict", timeout: 30) { try listed(stateA).isEmpty && listed(scenario.stateB).isEmpty }
        let leftovers = FileManager.default.enumerator(atPath: scenario.stateB + "/conflicts")?.allObjects.compactMap { $0 as? String } ?? []
        #expect(!leftovers.contains { $0.hasSuffix(".db") }, "copies kept aside are removed once settled elsewhere: \(leftovers)")
        let unknown = try sinkid(["resolve", "SaveGames/keep-local.db", "--keep", "local", "--state", stateA], in: scenario.cluster.directory)
        #expect(unknown.code == 65, "settled: nothing waits there any more")
        try await scenario.expectNoLoop()
    }
}
