import Testing
@testable import SinkiServer
import SinkiRecord
import SinkiSupport
import SinkiTestSupport

/// Expiration: unfinished uploads go after the configured time; finished ones stay.
@Suite struct TusExpirationTests {
    @Test func unfinishedUploadsExpireWhileFinishedOnesStay() async throws {
        // Forgotten only much later, so that the 410 is there to be seen however slow the machine.
        let tus = try TusFixture {
            $0.uploads.expirySeconds = 1
            $0.uploads.forgetAfterSeconds = 600
        }
        let unfinished = try tus.create(length: 10)
        let response = try tus.patch(unfinished, offset: 0, bytes("0123"))
        let expires = try #require(response.header("Upload-Expires").flatMap(HTTPDate.parse))
        #expect(abs(expires - Clock.now() - 1_000_000_000) < 2_000_000_000)
        let finished = try tus.create(length: 2)
        #expect(try tus.patch(finished, offset: 0, bytes("ok")).status == 204)

        try await waitUntil("the unfinished upload to expire", timeout: 20) { try tus.head(unfinished).status == 410 }
        let patch = try tus.patch(unfinished, offset: 4, bytes("4"))
        #expect(patch.status == 410)
        #expect(try patch.problem().code == "upload-expired")
        try await waitUntil("the sweep to remove its bytes", timeout: 20) { tus.stored(unfinished) == nil }
        #expect(try tus.head(unfinished).status == 410)
        #expect(try tus.head(finished).status == 200)
        #expect(tus.stored(finished) == bytes("ok"))
    }

    @Test func expiredUploadsAreForgottenLater() async throws {
        let tus = try TusFixture {
            $0.uploads.expirySeconds = 0.5
            $0.uploads.forgetAfterSeconds = 0.5
        }
        let unfinished = try tus.create(length: 10)
        try await waitUntil("the expired upload to be forgotten", timeout: 20) { try tus.head(unfinished).status == 404 }
        try await waitUntil("its files to go", timeout: 20) { tus.snapshot().isEmpty }
    }
}
