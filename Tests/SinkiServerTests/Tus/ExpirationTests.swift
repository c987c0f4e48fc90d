import Testing
@testable import SinkiServer
import SinkiRecord
import SinkiSupport
import SinkiTestSupport

/// Expiration: unfinished uploads go after the configured time; finished ones stay.
@Suite struct TusExpirationTests {
    @Test func unfinishedUploadsExpireThenVanishWhileFinishedOnesStay() async throws {
        let tus = try TusFixture { $0.uploads.expirySeconds = 1 }
        let unfinished = try tus.create(length: 10)
        let response = try tus.patch(unfinished, offset: 0, bytes("0123"))
        let expires = try #require(response.header("Upload-Expires").flatMap(HTTPDate.parse))
        #expect(abs(expires - Clock.now() - 1_000_000_000) < 2_000_000_000)
        let finished = try tus.create(length: 2)
        #expect(try tus.patch(finished, offset: 0, bytes("ok")).status == 204)

        try await waitUntil("the unfinished upload to expire", timeout: 10) { try tus.head(unfinished).status == 410 }
        #expect(try tus.patch(unfinished, offset: 4, bytes("4")).status == 410)
        try await waitUntil("the sweep to remove its bytes", timeout: 10) { tus.stored(unfinished) == nil }
        try await waitUntil("the expired upload to be forgotten", timeout: 10) { try tus.head(unfinished).status == 404 }
        #expect(try tus.head(finished).status == 200)
        #expect(tus.stored(finished) == bytes("ok"))
    }
}
