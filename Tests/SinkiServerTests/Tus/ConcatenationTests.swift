import Testing
@testable import SinkiServer
import SinkiSupport

/// Concatenation: partial uploads joined by a final one.
@Suite struct TusConcatenationTests {
    @Test func finalJoinsFinishedPartials() throws {
        let tus = try TusFixture()
        let a = try tus.create(length: 5, headers: [("Upload-Concat", "partial")])
        let b = try tus.create(length: 6, headers: [("Upload-Concat", "partial")])
        #expect(try tus.head(a).header("Upload-Concat") == "partial")
        #expect(try tus.patch(b, offset: 0, bytes(" world")).status == 204)
        #expect(try tus.patch(a, offset: 0, bytes("hello")).status == 204)
        // Absolute and relative URLs both name parts.
        let final = try tus.request("POST", "/v1/uploads/", headers: [TusFixture.version, ("Upload-Metadata", "name YQ=="),
                                                                    ("Upload-Concat", "final;http://127.0.0.1:\(tus.port)/v1/uploads/\(a) /v1/uploads/\(b)")])
        #expect(final.status == 201)
        let id = String(try #require(final.header("Location")).split(separator: "/").last!)
        let head = try tus.head(id)
        #expect(head.header("Upload-Concat") == "final;/v1/uploads/\(a) /v1/uploads/\(b)")
        #expect(head.header("Upload-Length") == "11")
        #expect(head.header("Upload-Offset") == "11")
        #expect(head.header("Upload-Metadata") == "name YQ==")
        #expect(tus.stored(id) == bytes("hello world"))
        #expect(tus.fixture.server.uploadStore?.assetFacts(id, user: "default")?.sha256 == Digest.sha256Hex(bytes("hello world")))
        let patch = try tus.patch(id, offset: 11, bytes("!"))
        #expect(patch.status == 403)
        #expect(try patch.problem().code == "upload-final")
        // A partial is never an asset by itself.
        #expect(tus.fixture.server.uploadStore?.assetFacts(a, user: "default") == nil)
    }

    @Test func finalRefusesUnfinishedOrWholeUploadsAndStoresNothing() throws {
        let tus = try TusFixture(tokens: ["a": ServerIdentity(user: "alice", device: "a"), "b": ServerIdentity(user: "bob", device: "b")])
        let unfinished = try tus.create(length: 5, token: "a", headers: [("Upload-Concat", "partial")])
        let whole = try tus.create(length: 1, token: "a")
        #expect(try tus.patch(whole, offset: 0, bytes("x"), token: "a").status == 204)
        let theirs = try tus.create(length: 1, token: "b", headers: [("Upload-Concat", "partial")])
        #expect(try tus.patch(theirs, offset: 0, bytes("x"), token: "b").status == 204)
        let before = tus.snapshot()
        for (parts, status) in [("/v1/uploads/\(unfinished)", 400), ("/v1/uploads/\(whole)", 400), ("/v1/uploads/\(theirs)", 404),
                                ("/elsewhere/\(whole)", 400)] {
            let response = try tus.request("POST", "/v1/uploads/", token: "a", headers: [TusFixture.version, ("Upload-Concat", "final;\(parts)")])
            #expect(response.status == status, "final;\(parts)")
        }
        #expect(tus.snapshot() == before)
    }
}
