import Testing
@testable import SinkiServer

/// DELETE: termination.
@Suite struct TusDeleteTests {
    @Test func terminationRemovesTheUpload() throws {
        let tus = try TusFixture()
        let id = try tus.create(length: 10)
        #expect(try tus.patch(id, offset: 0, bytes("0123")).status == 204)
        let response = try tus.request("DELETE", "/v1/uploads/\(id)", headers: [TusFixture.version])
        #expect(response.status == 204)
        #expect(response.header("Tus-Resumable") == "1.0.0")
        #expect(try tus.head(id).status == 404)
        #expect(try tus.patch(id, offset: 4, bytes("4")).status == 404)
        #expect(tus.snapshot().isEmpty)
    }

    @Test func needsTusResumable() throws {
        let tus = try TusFixture()
        let id = try tus.create(length: 10)
        #expect(try tus.request("DELETE", "/v1/uploads/\(id)").status == 412)
        #expect(try tus.head(id).status == 200)
    }

    @Test func unknownUploadIsNotFound() throws {
        let tus = try TusFixture()
        #expect(try tus.request("DELETE", "/v1/uploads/feedfeedfeedfeedfeedfeedfeedfeed", headers: [TusFixture.version]).status == 404)
    }
}
