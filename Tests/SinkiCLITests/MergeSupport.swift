import Foundation
import SinkiRecord
import SinkiSupport
import SinkiTestSupport
import Testing

/// Two real agents, `a` and `b`, started with one config, and a real concurrent edit: `b` is
/// stopped, both sides change the same paths, `a`'s changes reach the server, then `b` starts. `b`
/// receives `a`'s version over its own unpushed one, so `b` finds the conflict and runs the rule.
final class MergeScenario {
    let cluster: Cluster
    let config: String
    private var markers = 0

    /// `{DIR}` in the config stands for the cluster's folder (for files observers write).
    init(_ label: String, config text: String) throws {
        cluster = Cluster(label)
        config = cluster.directory.child("sinki.conf")
        try writeFile(config, text.replacingOccurrences(of: "{DIR}", with: cluster.directory.path))
        try cluster.startServer()
        try cluster.startAgent("a", extra: ["--config", config])
        try cluster.startAgent("b", extra: ["--config", config])
    }

    // As the agents print them: cleaned (the temporary folder's path may hold a "//").
    var a: String { cluster.root("a").replacingOccurrences(of: "//", with: "/") }
    var b: String { cluster.root("b").replacingOccurrences(of: "//", with: "/") }
    var stateB: String { (cluster.directory.child("b") + "/state").replacingOccurrences(of: "//", with: "/") }

    /// A change one side makes.
    enum Edit {
        case write(String)
        /// Content with a chosen modification time (placed by a rename, as editors save).
        case writeAt(String, Date)
        case delete
    }

    /// Makes `files` on `a` and waits until `b` has them all and has recorded them as shared (not
    /// only written them: `b` is stopped next, and its edits must start from these versions).
    func share(_ files: [String: String]) async throws {
        for (path, text) in files { try apply(.write(text), at: a + "/" + path) }
        try await cluster.waitForConvergence("a", "b", timeout: 10) { snapshot in files.keys.allSatisfy { snapshot.entries[$0] != nil } }
        let tag = try serverChanges()
        try await waitUntil("b to record what it applied", timeout: 10) {
            guard case let .string(position)? = try onB(["status", "--json"]).json()["remote"]?["position"] else { return false }
            return position.hasSuffix(".\(tag)")
        }
    }

    /// Stops `b`; makes `onA` on `a` and waits until the server holds it; makes `onB` on the stopped
    /// `b`; starts `b` again.
    func editBothSides(a onA: [String: Edit], b onB: [String: Edit]) async throws {
        cluster.stopAgent("b")
        for (path, edit) in onA { try apply(edit, at: a + "/" + path) }
        try await waitUntil("a's edits on the server", timeout: 10) {
            let records = try cluster.serverRecords()
            return onA.allSatisfy { path, edit in records.contains { $0.path == "SaveGames/" + path && self.matches(edit, $0) } }
        }
        for (path, edit) in onB { try apply(edit, at: b + "/" + path) }
        try cluster.startAgent("b", extra: ["--config", config])
    }

    /// The same with `b` running but paused (`sinkid pause`): its edits are noted, not sent, until
    /// `sinkid resume`; then `b` finds the conflicts (through the feed, or its push refused as stale).
    func editWhilePaused(a onA: [String: Edit], b onB: [String: Edit]) async throws {
        #expect(try self.onB(["pause"]).code == 0)
        for (path, edit) in onA { try apply(edit, at: a + "/" + path) }
        try await waitUntil("a's edits on the server", timeout: 10) {
            let records = try cluster.serverRecords()
            return onA.keys.allSatisfy { path in records.contains { $0.path == "SaveGames/" + path && $0.device == "a" && $0.changeTag > 0 && self.matches(onA[path]!, $0) } }
        }
        for (path, edit) in onB { try apply(edit, at: b + "/" + path) }
        try await waitUntil("b to note its edits", timeout: 10) {
            try self.onB(["status", "--json"]).json()["pending"]?["count"] == .int(Int64(onB.count))
        }
        #expect(try self.onB(["resume"]).code == 0)
    }

    private func matches(_ edit: Edit, _ record: Record) -> Bool {
        switch edit {
        // A file above the inline limit is named by its manifest (ContentID), a small one by its SHA-256.
        case let .write(text), let .writeAt(text, _): return !record.deleted && record.sha256 == ContentID.of(Array(text.utf8))
        case .delete: return record.deleted
        }
    }

    private func apply(_ edit: Edit, at path: String) throws {
        switch edit {
        case let .write(text):
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try put(path, text)
        case let .writeAt(text, date):
            let staged = cluster.directory.child("staged-\(UInt64.random(in: 0...UInt64.max))")
            try Data(text.utf8).write(to: URL(fileURLWithPath: staged))
            try FileManager.default.setAttributes([.modificationDate: date], ofItemAtPath: staged)
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            guard rename(staged, path) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        case .delete:
            try FileManager.default.removeItem(atPath: path)
        }
    }

    /// Waits until both roots hold the same tree and `condition` holds for it.
    func converge(timeout: Double = 15, _ condition: @escaping (TreeSnapshot) -> Bool) async throws {
        try await cluster.waitForConvergence("a", "b", timeout: timeout, condition)
    }

    /// Names in `a`'s root that are conflict copies of `name` (`stem.sync-conflict-….ext`).
    func copies(of name: String) -> [String] {
        let stem = (name as NSString).deletingPathExtension, ext = (name as NSString).pathExtension
        return ((try? FileManager.default.contentsOfDirectory(atPath: a)) ?? []).filter {
            $0.hasPrefix(stem + ".sync-conflict-") && (ext.isEmpty || $0.hasSuffix("." + ext))
        }.sorted()
    }

    /// The change tag the server's feed ends at (the records of conflicts every device lists included).
    func serverChanges() throws -> Int64 {
        try cluster.serverFeedEnd()
    }

    /// Whether agent `name` says it is up to date (nothing to send but what waits for resolve).
    func idle(_ name: String) throws -> Bool {
        let run = try sinkid(["status", "--json", "--state", cluster.directory.child(name) + "/state"], in: cluster.directory)
        return run.code == 0 && (try? run.json()["agent"]?["state"]) == .string("up-to-date")
    }

    /// Checks that nothing loops: once both agents are idle, one new file sent from `a` to `b` (a
    /// whole trip through the server, as long as any echo of a loop would take) is the only save the
    /// server takes.
    func expectNoLoop(sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try await waitUntil("both agents idle", timeout: 15) { try idle("a") && idle("b") }
        let before = try cluster.serverSaveCount()
        markers += 1
        let marker = "marker-\(markers).mark"
        try put(a + "/" + marker, "marker \(markers)")
        try await waitUntil("the marker on b", timeout: 10) { FileManager.default.fileExists(atPath: b + "/" + marker) }
        try await waitUntil("both agents idle again", timeout: 15) { try idle("a") && idle("b") }
        let after = try cluster.serverSaveCount()
        if after != before + 1 {
            let saves = try cluster.serverRecords().sorted { $0.changeTag < $1.changeTag }.map { "\($0.changeTag) \($0.path) by \($0.device)" }
            Issue.record("""
                the server took \(after - before) saves, not the marker's one: something loops
                \(saves.joined(separator: "\n"))
                --- b ---
                \(cluster.agent("b")?.errors.suffix(6000) ?? "")
                --- a ---
                \(cluster.agent("a")?.errors.suffix(3000) ?? "")
                """, sourceLocation: sourceLocation)
        }
    }

    /// How many conflicts `b` lists for `sinkid resolve`.
    func conflictCount() throws -> Int {
        guard case let .array(items)? = try onB(["conflicts", "--json"]).json()["conflicts"] else { return -1 }
        return items.count
    }

    /// Runs `sinkid ARGS --state` of `b`.
    func onB(_ arguments: [String]) throws -> SinkidRun {
        try sinkid(arguments + ["--state", stateB], in: cluster.directory)
    }
}

/// A time `seconds` before now, for modification times that must order two edits.
func ago(_ seconds: Double) -> Date { Date(timeIntervalSinceNow: -seconds) }
