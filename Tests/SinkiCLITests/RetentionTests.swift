import Foundation
import SinkiRecord
import SinkiTestSupport
import Testing

/// Tombstone retention (issue 12): the server forgets deletes after `--tombstone-days`; an agent away
/// longer gets `410 token-expired`, compares everything, and loses nothing, while nothing deleted on
/// purpose comes back. Blobs no record names go too.
@Suite(.serialized) struct RetentionTests {
    /// Chunks in the server's chunk store (named in its indexes), and blob files (`ID.bin`) in its upload folder.
    func blobs(_ cluster: Cluster) -> [String] {
        let data = cluster.directory.child("server-data")
        let found = ((try? FileManager.default.contentsOfDirectory(atPath: data + "/uploads")) ?? []).filter { $0.hasSuffix(".bin") }
        return found + ServerChunks(data + "/chunks").chunks.keys
    }

    @Test func anAgentAwayLongerThanTheRetentionLosesNothingAndGetsNoDeleteBack() async throws {
        let cluster = Cluster("sinki-retention")
        // About 1.7 s of retention (and of history, which tombstones outlive otherwise); finished uploads
        // and chunks wait a second for their record.
        try cluster.startServer(extra: ["--tombstone-days", "0.00002", "--history-days", "0.00002", "--upload-expiry", "1s", "--chunk-grace", "1s"])
        try cluster.startAgent("a")
        try cluster.startAgent("b")
        let a = cluster.root("a"), b = cluster.root("b")
        for name in ["keep", "gone", "edited", "edited-on-b", "deleted-here-edited-there"] {
            try writeFile(a + "/\(name).txt", "first \(name)")
        }
        try writeFile(a + "/big.bin", Data(randomData(600 << 10)))
        try await cluster.waitForConvergence("a", "b", timeout: 20) { $0.entries.count == 6 }
        #expect(!blobs(cluster).isEmpty, "the large file's chunks are on the server")

        // b goes away; meanwhile a deletes and edits, and b is edited while it is not running.
        cluster.stopAgent("b")
        try FileManager.default.removeItem(atPath: a + "/gone.txt")
        try FileManager.default.removeItem(atPath: a + "/big.bin")
        try FileManager.default.removeItem(atPath: a + "/deleted-here-edited-there.txt")
        try writeFile(a + "/edited.txt", "second edited, from a")
        try await waitUntil("the server to hold a's deletes", timeout: 10) {
            try cluster.serverRecords().filter(\.deleted).count == 3
        }
        try writeFile(b + "/edited-on-b.txt", "second, from b while it was away")
        try writeFile(b + "/deleted-here-edited-there.txt", "b's edit of what a deleted")
        try writeFile(b + "/new-on-b.txt", "made on b while it was away")

        // The server forgets the deletes, and the chunks no record names any more.
        try await waitUntil("the tombstones to be purged", timeout: 30) {
            try cluster.serverRecords().filter(\.deleted).isEmpty
        }
        try await waitUntil("the unreferenced chunks to go", timeout: 30) { blobs(cluster).isEmpty }
        #expect(cluster.server?.errors.contains("retention: purged") == true)

        // b comes back behind the history: it compares everything and repairs through the usual rules.
        try cluster.startAgent("b")
        try await cluster.waitForConvergence("a", "b", timeout: 30) { snapshot in
            snapshot.entries["new-on-b.txt"] != nil && snapshot.entries["gone.txt"] == nil
        }
        let log = try #require(cluster.agent("b")?.errors)
        #expect(log.contains("token-expired") || log.contains("no longer knows our change token"), "b never heard its token had expired")
        // Deleted on purpose: gone on both.
        for name in ["gone.txt", "big.bin"] {
            #expect(!FileManager.default.fileExists(atPath: a + "/" + name), "\(name) came back on a")
            #expect(!FileManager.default.fileExists(atPath: b + "/" + name), "\(name) came back on b")
        }
        // Nothing written is lost: a's edit reached b, b's edits and new file reached a; b's edit of a
        // file a deleted wins over the delete.
        #expect(readFile(b + "/edited.txt") == "second edited, from a")
        #expect(readFile(a + "/edited-on-b.txt") == "second, from b while it was away")
        #expect(readFile(a + "/new-on-b.txt") == "made on b while it was away")
        #expect(readFile(a + "/deleted-here-edited-there.txt") == "b's edit of what a deleted")
        #expect(readFile(a + "/keep.txt") == "first keep")
    }
}
