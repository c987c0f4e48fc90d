import Testing
@testable import SinkiServer

/// HEAD: where an upload stands; unknown, expired and other users' uploads.
@Suite struct TusHeadTests {
    static let tokens = ["alice-token": ServerIdentity(user: "alice", device: "a"), "bob-token": ServerIdentity(user: "bob", device: "b")]

    @Test func reportsOffsetLengthMetadataAndNoStore() throws {
        let tus = try TusFixture()
        let id = try tus.create(length: 10, headers: [("Upload-Metadata", "name YQ==")])
        #expect(try tus.patch(id, offset: 0, bytes("0123")).status == 204)
        let head = try tus.head(id)
        #expect(head.status == 200)
        #expect(head.header("Upload-Offset") == "4")
        #expect(head.header("Upload-Length") == "10")
        #expect(head.header("Upload-Metadata") == "name YQ==")
        #expect(head.header("Cache-Control") == "no-store")
        #expect(head.header("Tus-Resumable") == "1.0.0")
        #expect(head.header("Upload-Expires") != nil)
    }

    @Test func needsTusResumable() throws {
        let tus = try TusFixture()
        let id = try tus.create(length: 10)
        let head = try tus.request("HEAD", "/v1/uploads/\(id)")
        #expect(head.status == 412)
        #expect(head.header("Tus-Version") == "1.0.0")
    }

    @Test func anotherUsersUploadAnswersLikeAnUnknownOne() throws {
        let tus = try TusFixture(tokens: Self.tokens)
        let id = try tus.create(length: 10, token: "alice-token")
        #expect(try tus.head(id, token: "alice-token").status == 200)
        let theirs = try tus.head(id, token: "bob-token")
        let unknown = try tus.head("0123456789abcdef0123456789abcdef", token: "bob-token")
        #expect(theirs.status == 404)
        #expect(unknown.status == 404)
        #expect(Set(theirs.headers.keys).subtracting(["x-request-id", "date"]) == Set(unknown.headers.keys).subtracting(["x-request-id", "date"]))
        // A PATCH and a DELETE from the other user change nothing either.
        #expect(try tus.patch(id, offset: 0, bytes("x"), token: "bob-token").status == 404)
        #expect(try tus.request("DELETE", "/v1/uploads/\(id)", token: "bob-token", headers: [TusFixture.version]).status == 404)
        #expect(try tus.head(id, token: "alice-token").header("Upload-Offset") == "0")
    }

    @Test func withoutATokenEverythingIsUnauthorized() throws {
        let tus = try TusFixture(tokens: Self.tokens)
        #expect(try tus.request("POST", "/v1/uploads/", headers: [TusFixture.version, ("Upload-Length", "1")]).status == 401)
        #expect(tus.snapshot().isEmpty)
    }
}
