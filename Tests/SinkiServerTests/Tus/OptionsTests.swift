import Testing
@testable import SinkiServer

/// OPTIONS: what the endpoint offers (tus core, "OPTIONS").
@Suite struct TusOptionsTests {
    @Test(arguments: ["/v1/uploads/", "/v1/uploads", "/v1/uploads/0123456789abcdef"])
    func advertisesVersionExtensionsLimitsAndAlgorithms(target: String) throws {
        let tus = try TusFixture { $0.uploads.maxSize = 1 << 30 }
        // No Tus-Resumable: OPTIONS is the one request that needs none.
        let response = try tus.request("OPTIONS", target)
        #expect(response.status == 204)
        #expect(response.header("Tus-Version") == "1.0.0")
        #expect(response.header("Tus-Resumable") == "1.0.0")
        let extensions = Set((response.header("Tus-Extension") ?? "").split(separator: ",").map(String.init))
        #expect(extensions == ["creation", "creation-with-upload", "creation-defer-length", "termination", "checksum",
                               "expiration", "concatenation"])
        #expect(response.header("Tus-Max-Size") == String(1 << 30))
        #expect(response.header("Tus-Checksum-Algorithm") == "sha1,sha256,crc32")
        #expect(response.body.isEmpty)
    }
}
