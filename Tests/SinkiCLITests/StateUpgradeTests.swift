import Foundation
import SinkiRecord
import SinkiTestSupport
import Testing

/// The release before the three trees kept work to do (an outbox, rows not applied) beside one row per
/// path. Its database (Fixtures/schema9, made by make-fixture.sh there) is upgraded in place: what was
/// queued is sent, what was not applied is written, and nothing the user had is lost.
@Suite struct StateUpgradeTests {
    @Test func aDatabaseOfThePreviousReleaseUpgradesWithoutLoss() async throws {
        let cluster = Cluster("sinki-upgrade")
        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/schema9").path
        let files = FileManager.default
        let home = cluster.directory.child("b")
        try files.createDirectory(atPath: home, withIntermediateDirectories: true)
        try files.copyItem(atPath: fixture + "/server-data", toPath: cluster.directory.child("server-data"))
        try files.copyItem(atPath: fixture + "/state", toPath: home + "/state")
        try files.copyItem(atPath: fixture + "/SaveGames", toPath: home + "/SaveGames")
        // Git keeps no empty folder: the one b made while the server was away is made again.
        try files.createDirectory(atPath: home + "/SaveGames/empty-folder", withIntermediateDirectories: false)
        try cluster.startServer(data: cluster.directory.child("server-data"))
        // The fixture's server listened on another port: the state names it, and a new one is a new feed.
        try cluster.stateSQL("b", "UPDATE meta SET value = '\(cluster.serverURL)' WHERE key = 'feed.server'")
        let agent = try cluster.startAgent("b")

        // The outbox of schema 9 (an edit, a delete, a rename, a new file, a new folder) reaches the server.
        var records: [Record] = []
        func live(_ relative: String) -> Record? { records.first { $0.path == "SaveGames/" + relative && !$0.deleted } }
        func gone(_ relative: String) -> Bool { records.contains { $0.path == "SaveGames/" + relative && $0.deleted } }
        try await waitUntil("b's queued changes on the server", timeout: 30) {
            records = try cluster.serverRecords()
            return live("edited.txt")?.size == Int64("edited on b\n".utf8.count) && gone("deleted.txt") && gone("renamed.txt")
                && live("renamed-to.txt") != nil && live("new.txt") != nil && live("empty-folder")?.kind == .directory
        }
        #expect(live("renamed-to.txt")?.movedFrom == "SaveGames/renamed.txt", "the rename went as a rename")
        // The remote change schema 9 had not applied (the file was held open then) is written now.
        let root = home + "/SaveGames"
        try await waitUntil("a's edit of busy.txt on b", timeout: 30) { readFile(root + "/folder/inner/busy.txt") == "held open, edited on a\n" }
        // Everything else is as the user left it.
        #expect(readFile(root + "/kept.txt") == "one\n")
        #expect(readFile(root + "/edited.txt") == "edited on b\n")
        #expect(readFile(root + "/new.txt") == "new on b\n")
        #expect(readFile(root + "/renamed-to.txt") == "to rename\n")
        #expect(readFile(root + "/folder/inner/deep.txt") == "deep\n")
        #expect(!files.fileExists(atPath: root + "/deleted.txt") && !files.fileExists(atPath: root + "/renamed.txt"))
        #expect(agent.isRunning)
        #expect(!agent.errors.contains("ERROR"), "no error: \(agent.errors.suffix(2000))")
        // Then it says so, and means it: nothing pending, the digests matched.
        try await waitUntil("b to be up to date", timeout: 30) { agent.errors.contains("up to date with") }
    }
}
