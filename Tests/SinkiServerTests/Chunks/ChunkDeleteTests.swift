import Foundation
@testable import SinkiServer
import SinkiRecord
import SinkiSupport
import SinkiTestSupport
import Testing

/// `DELETE /v1/chunks/HASH`: a receiver reports a chunk whose bytes do not hash to its name.
@Suite struct ChunkDeleteTests {
    @Test func aDamagedChunkIsRemovedAndAnIntactOneKept() throws {
        let fixture = try ServerFixture()
        let intact = randomBytes(10_000)
        #expect(try fixture.uploadChunk(intact).status == 201)
        let kept = try fixture.request("DELETE", Routes.chunks + Digest.sha256Hex(intact))
        #expect(kept.status == 409)
        #expect(try kept.problem().code == "chunk-intact")
        #expect(fixture.heldChunk(Digest.sha256Hex(intact)) == intact)

        // Damaged on the server's disk: the bytes no longer hash to the name.
        let damaged = randomBytes(10_000)
        let name = Digest.sha256Hex(damaged)
        #expect(try fixture.uploadChunk(damaged).status == 201)
        var changed = damaged
        changed[5_000] ^= 0xff
        try fixture.heldChunks().overwrite(name, with: changed)
        #expect(try fixture.request("DELETE", Routes.chunks + name).status == 204)
        #expect(fixture.heldChunk(name) == nil)
        #expect(try fixture.request("GET", Routes.chunks + name).status == 404)
        #expect(try fixture.request("DELETE", Routes.chunks + name).status == 404)
        // Uploaded again, it is whole.
        #expect(try fixture.uploadChunk(damaged).status == 201)
        #expect(fixture.heldChunk(name) == damaged)
    }

    /// A chunk removed as damaged leaves every record naming it incomplete (issue 24 item 2): each comes
    /// once more through the feed, flagged, with a new change tag and its content as it was; look-ups
    /// and conflict answers say it too; once the chunk is uploaded again the flag is gone, and a save
    /// of the same content is a version like any other.
    @Test func aRemovedChunkLeavesTheRecordsNamingItIncompleteUntilItIsBack() throws {
        let fixture = try ServerFixture()
        let file = ChunkedFile.random([70_000, 80_000, 90_000])
        let other = ChunkedFile.random([60_000, 65_000])
        try fixture.uploadChunks(of: file)
        try fixture.uploadChunks(of: other)
        let saved = try fixture.modify([file.record("S/big"), file.record("S/copy"), other.record("S/other")])
        #expect(saved.map(\.status) == [.saved, .saved, .saved])
        let before = try fixture.changes()
        #expect(!before.records.contains { $0.incomplete })

        let damaged = file.names[1]
        try fixture.heldChunks().overwrite(damaged, with: [1, 2, 3])
        #expect(try fixture.request("DELETE", Routes.chunks + damaged).status == 204)
        // Both records naming it come again, flagged, their content as it was; the other does not.
        let after = try fixture.changes(since: before.token)
        #expect(after.records.map(\.path).sorted() == ["S/big", "S/copy"])
        for record in after.records {
            #expect(record.incomplete)
            #expect(record.asset == file.asset && record.sha256 == file.record("S/big").sha256)
            #expect(record.changeTag > saved[2].record!.changeTag)
        }
        #expect(try fixture.changes().records.filter(\.incomplete).map(\.path).sorted() == ["S/big", "S/copy"])
        let listed = try fixture.request("GET", Routes.records + "?path=S").page().records
        #expect(listed.filter(\.incomplete).map(\.path).sorted() == ["S/big", "S/copy"])
        let conflict = try fixture.modify([fileRecord("S/big", "stale", baseTag: 1)])
        #expect(conflict.first?.status == .conflict && conflict.first?.record?.incomplete == true)
        #expect(try fixture.request("GET", Routes.assets + file.hash).status == 409)

        // A holder sends it again: the chunk, then the record over the incomplete one.
        #expect(try fixture.uploadChunk(file.chunks[1]).status == 201)
        #expect(try !fixture.changes().records.contains { $0.incomplete })
        let incomplete = after.records.first { $0.path == "S/big" }!
        let again = try fixture.modify([file.record("S/big", baseTag: incomplete.changeTag)])
        #expect(again.first?.status == .saved && again.first?.record?.incomplete == false)
        #expect(try fixture.request("GET", Routes.assets + file.hash).body == file.bytes)
        // A client cannot set the flag: it is the server's to say.
        var claimed = other.record("S/other", baseTag: saved[2].record!.changeTag)
        claimed.incomplete = true
        let claim = try fixture.modify([claimed])
        #expect(claim.first?.status == .saved && claim.first?.record?.incomplete == false, "\(claim)")
        #expect(try !fixture.changes().records.contains { $0.incomplete })
    }

    @Test func onlyAWriterOfTheUserMayReportDamage() throws {
        let fixture = try ServerFixture.withAccounts()
        let alice = try fixture.issue(user: "alice"), bob = try fixture.issue(user: "bob")
        let reader = try fixture.issue(user: "alice", scope: TokenScope(readOnly: true))
        let narrow = try fixture.issue(user: "alice", scope: TokenScope(prefix: "S/a"))
        let bytes = randomBytes(1000)
        let name = Digest.sha256Hex(bytes)
        #expect(try fixture.uploadChunk(Array("not these bytes".utf8), name: name, token: alice.secret).status == 201)
        let readOnly = try fixture.request("DELETE", Routes.chunks + name, token: reader.secret)
        #expect(try readOnly.status == 403 && readOnly.problem().code == "read-only-token")
        #expect(try fixture.request("DELETE", Routes.chunks + name, token: bob.secret).status == 404)
        #expect(try fixture.request("DELETE", Routes.chunks + name, token: narrow.secret).status == 404)
        #expect(fixture.heldChunk(user: "alice", name) != nil)
        #expect(try fixture.request("DELETE", Routes.chunks + name, token: alice.secret).status == 204)
        #expect(fixture.heldChunk(user: "alice", name) == nil)
    }
}
