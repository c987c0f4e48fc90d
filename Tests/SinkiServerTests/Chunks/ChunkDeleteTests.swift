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
        try Data(changed).write(to: URL(fileURLWithPath: fixture.chunkPath(name)))
        #expect(try fixture.request("DELETE", Routes.chunks + name).status == 204)
        #expect(fixture.heldChunk(name) == nil)
        #expect(try fixture.request("GET", Routes.chunks + name).status == 404)
        #expect(try fixture.request("DELETE", Routes.chunks + name).status == 404)
        // Uploaded again, it is whole.
        #expect(try fixture.uploadChunk(damaged).status == 201)
        #expect(fixture.heldChunk(name) == damaged)
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
