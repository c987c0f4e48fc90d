import Foundation
import Glibc
import SinkiRecord
import SinkiSupport
import SinkiTestSupport
import Testing
@testable import SinkiState

/// A remote change that cannot be written is kept, with why, until it is: never dropped while the
/// feed moves on (issue 11).
@Suite(.serialized) struct NotAppliedTests {
    /// `chattr +i` (root may write anywhere, but not into an immutable folder); undone by the caller.
    static func immutable(_ path: String, _ on: Bool) throws {
        let process = try ChildProcess("/usr/bin/chattr", [on ? "+i" : "-i", path], logDirectory: NSTemporaryDirectory(),
                                       label: "chattr-\(UInt64.random(in: 0...UInt64.max))")
        #expect(process.waitForExit() == 0, "chattr \(on ? "+i" : "-i") \(path): \(process.errors)")
    }

    func notApplied(_ fixture: Fixture) async throws -> [UnappliedChange] {
        try await fixture.replica.statusFacts(limit: 100).notApplied
    }

    @Test func aWriteThatFailsIsKeptWithItsCauseAndTheFeedMovesOnBecauseItIs() async throws {
        let fixture = try Fixture()
        try fixture.write("locked/keep.txt", "here")
        _ = try await fixture.replica.reconcile(root: 0, under: "")
        try Self.immutable(fixture.root + "/locked", true)
        defer { try? Self.immutable(fixture.root + "/locked", false) }
        try await fixture.replica.bindServer("test")
        let report = try await fixture.replica.apply([remote("Saves/locked/new.save", "v5", tag: 5), remote("Saves/other.save", "fine", tag: 6)],
                                                     token: "s.6")
        #expect(report.notApplied == ["Saves/locked/new.save"])
        #expect(fixture.read("other.save") == "fine")
        #expect(try await fixture.replica.feedToken(server: "test") == "s.6")
        let kept = try await notApplied(fixture)
        #expect(kept.count == 1)
        #expect(kept.first?.record.changeTag == 5)
        #expect(kept.first?.failure.cause == .permission)
        #expect(kept.first?.failure.message.contains("locked") == true)
        #expect(kept.first?.attempts == 1)
        // No temporary file is left beside the target.
        #expect(fixture.names("locked") == ["keep.txt"])

        // Tried again while the cause holds: one more attempt, still kept.
        _ = try await fixture.replica.apply(kept.map(\.record), token: nil)
        #expect(try await notApplied(fixture).first?.attempts == 2)

        try Self.immutable(fixture.root + "/locked", false)
        let again = try await fixture.replica.apply(kept.map(\.record), token: nil)
        #expect(again.notApplied.isEmpty)
        #expect(fixture.read("locked/new.save") == "v5")
        #expect(try await notApplied(fixture).isEmpty)
        #expect(try await fixture.replica.knownFile("Saves/locked/new.save")?.tag == 5)
    }

    @Test func aNewerVersionSupersedesTheOneNotApplied() async throws {
        let fixture = try Fixture()
        try fixture.write("locked/keep.txt", "here")
        _ = try await fixture.replica.reconcile(root: 0, under: "")
        try Self.immutable(fixture.root + "/locked", true)
        defer { try? Self.immutable(fixture.root + "/locked", false) }
        _ = try await fixture.replica.apply([remote("Saves/locked/new.save", "v5", tag: 5)], token: nil)
        _ = try await fixture.replica.apply([remote("Saves/locked/new.save", "v7", tag: 7)], token: nil)
        #expect(try await notApplied(fixture).map(\.record.changeTag) == [7])
        // An older version arriving late never replaces a newer one kept.
        _ = try await fixture.replica.apply([remote("Saves/locked/new.save", "v6", tag: 6)], token: nil)
        #expect(try await notApplied(fixture).map(\.record.changeTag) == [7])
        try Self.immutable(fixture.root + "/locked", false)
        _ = try await fixture.replica.apply([remote("Saves/locked/new.save", "v8", tag: 8)], token: nil)
        #expect(fixture.read("locked/new.save") == "v8")
        #expect(try await notApplied(fixture).isEmpty)
    }

    @Test func aConflictIsKeptUntilItsRuleHasSettledIt() async throws {
        let fixture = try Fixture()
        try fixture.write("slot.save", "local edit")
        _ = try await fixture.replica.reconcile(root: 0, under: "")
        let report = try await fixture.replica.apply([remote("Saves/slot.save", "remote edit", tag: 3)], token: nil)
        #expect(report.conflicts.count == 1)
        #expect(try await notApplied(fixture).map(\.failure.cause) == [.conflict])
        _ = try await fixture.settle(report.conflicts)
        #expect(try await notApplied(fixture).isEmpty)
        #expect(fixture.read("slot.save") == "remote edit")
        #expect(fixture.names().contains { $0.contains(".sync-conflict-") })
    }

    @Test func aFileAnotherProgramIsWritingIsNotReplacedUnderIt() async throws {
        let fixture = try Fixture()
        try fixture.write("log.txt", "synced")
        _ = try await fixture.replica.reconcile(root: 0, under: "")
        var tag: Int64 = 0
        let batch = try await fixture.replica.nextBatch(limit: 10, maxBytes: 1 << 20, excluding: [])
        _ = try await fixture.replica.acknowledge(batch, saveAll(batch, from: &tag))
        // A writer holds it open (without having written yet): the file looks unchanged.
        let writer = open(fixture.root + "/log.txt", O_WRONLY | O_APPEND)
        #expect(writer >= 0)
        let report = try await fixture.replica.apply([remote("Saves/log.txt", "remote", tag: tag + 5)], token: nil)
        #expect(report.notApplied == ["Saves/log.txt"])
        #expect(try await notApplied(fixture).first?.failure.cause == .busy)
        #expect(fixture.read("log.txt") == "synced")
        _ = "then it writes and closes".withCString { write(writer, $0, strlen($0)) }
        close(writer)
        // Its edit is a local change now: the remote version meets it as a conflict, nothing is lost.
        let again = try await fixture.replica.apply([remote("Saves/log.txt", "remote", tag: tag + 5)], token: nil)
        #expect(again.conflicts.count == 1)
        #expect(fixture.read("log.txt") == "syncedthen it writes and closes")
    }

    @Test func recordsForPathsThatCannotBeAPathHereAreKeptToBeSeen() async throws {
        let fixture = try Fixture()
        var record = remote("../escape", "x", tag: 1)
        record.path = "../escape"
        _ = try await fixture.replica.apply([record], token: nil)
        let kept = try await notApplied(fixture)
        #expect(kept.map(\.failure.cause) == [.invalid])
        #expect(kept.first?.failure.message.contains("../escape") == true)
        // Never due on their own: only `sinkid retry` or a full comparison looks at them again.
        #expect(try await fixture.replica.dueUnapplied(limit: 10).isEmpty)
    }
}
