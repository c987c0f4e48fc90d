import Testing
@testable import SinkiServer
import SinkiRecord
import SinkiSupport

/// POST: creation, creation-defer-length, creation-with-upload, and what it refuses.
@Suite struct TusPostTests {
    struct Refusal: CustomTestStringConvertible, Sendable {
        var name: String
        var headers: [(String, String)]
        var body: [UInt8]? = nil
        var status: Int
        var code: String
        var testDescription: String { name }
    }

    static let refusals: [Refusal] = [
        Refusal(name: "no Tus-Resumable", headers: [("Upload-Length", "10")], status: 412, code: "tus-version"),
        Refusal(name: "another version", headers: [("Tus-Resumable", "0.2.2"), ("Upload-Length", "10")], status: 412, code: "tus-version"),
        Refusal(name: "no length", headers: [TusFixture.version], status: 400, code: "bad-request"),
        Refusal(name: "length and deferred", headers: [TusFixture.version, ("Upload-Length", "10"), ("Upload-Defer-Length", "1")],
                status: 400, code: "bad-request"),
        Refusal(name: "Upload-Defer-Length 2", headers: [TusFixture.version, ("Upload-Defer-Length", "2")], status: 400, code: "bad-request"),
        Refusal(name: "negative length", headers: [TusFixture.version, ("Upload-Length", "-1")], status: 400, code: "bad-request"),
        Refusal(name: "length not a number", headers: [TusFixture.version, ("Upload-Length", "ten")], status: 400, code: "bad-request"),
        Refusal(name: "over Tus-Max-Size", headers: [TusFixture.version, ("Upload-Length", "1025")], status: 413, code: "too-large"),
        Refusal(name: "metadata not base64", headers: [TusFixture.version, ("Upload-Length", "10"), ("Upload-Metadata", "name !!!")],
                status: 400, code: "bad-request"),
        Refusal(name: "metadata key twice", headers: [TusFixture.version, ("Upload-Length", "10"), ("Upload-Metadata", "a YQ==,a Yg==")],
                status: 400, code: "bad-request"),
        Refusal(name: "metadata of three words", headers: [TusFixture.version, ("Upload-Length", "10"), ("Upload-Metadata", "a YQ== x")],
                status: 400, code: "bad-request"),
        Refusal(name: "unknown Upload-Concat", headers: [TusFixture.version, ("Upload-Length", "10"), ("Upload-Concat", "whole")],
                status: 400, code: "bad-request"),
        Refusal(name: "final with a length", headers: [TusFixture.version, ("Upload-Length", "10"), ("Upload-Concat", "final;/v1/uploads/x")],
                status: 400, code: "bad-request"),
        Refusal(name: "first chunk of another type", headers: [TusFixture.version, ("Upload-Length", "10"), ("Content-Type", "text/plain")],
                body: bytes("0123456789"), status: 415, code: "unsupported-media-type"),
        Refusal(name: "first chunk longer than the upload", headers: [TusFixture.version, ("Upload-Length", "4"), TusFixture.chunk],
                body: bytes("0123456789"), status: 413, code: "too-large"),
        Refusal(name: "first chunk with a wrong checksum", headers: [TusFixture.version, ("Upload-Length", "10"), TusFixture.chunk,
                                                                    ("Upload-Checksum", checksum(.sha256, bytes("not this")))],
                body: bytes("0123456789"), status: 460, code: "checksum-mismatch"),
        Refusal(name: "unknown checksum algorithm", headers: [TusFixture.version, ("Upload-Length", "10"), TusFixture.chunk,
                                                             ("Upload-Checksum", "md5 AAAAAAAAAAAAAAAAAAAAAA==")],
                body: bytes("0123456789"), status: 400, code: "bad-request"),
    ]

    @Test(arguments: refusals)
    func refusedCreationStoresNothing(_ row: Refusal) throws {
        let tus = try TusFixture { $0.uploads.maxSize = 1024 }
        let response = try tus.request("POST", "/v1/uploads/", headers: row.headers, body: row.body)
        #expect(response.status == row.status)
        #expect(try response.problem().code == row.code)
        #expect(response.header("Tus-Resumable") == "1.0.0")
        if row.status == 412 { #expect(response.header("Tus-Version") == "1.0.0") }
        #expect(response.header("Location") == nil)
        #expect(tus.snapshot().isEmpty)
    }

    @Test func createsAnEmptyUploadWithLocationAndExpiry() throws {
        let tus = try TusFixture()
        let response = try tus.request("POST", "/v1/uploads/", headers: [TusFixture.version, ("Upload-Length", "100")])
        #expect(response.status == 201)
        // Absolute (some tus clients do not resolve a relative Location), on the address the
        // connection reached: the request's Host is never believed.
        let location = try #require(response.header("Location"))
        #expect(location.hasPrefix("http://127.0.0.1:\(tus.port)/v1/uploads/"), "\(location)")
        let expires = try #require(response.header("Upload-Expires").flatMap(HTTPDate.parse))
        #expect(abs(expires - Clock.now() - 24 * 3600 * 1_000_000_000) < 5_000_000_000)
        let head = try tus.head(String(location.split(separator: "/").last!))
        #expect(head.status == 200)
        #expect(head.header("Upload-Offset") == "0")
        #expect(head.header("Upload-Length") == "100")
    }

    @Test func behindAProxyTheLocationFollowsItsForwardedHeadersAndOnlyThen() throws {
        let forwarded = [TusFixture.version, ("Upload-Length", "1"), ("X-Forwarded-Proto", "https"),
                         ("X-Forwarded-Host", "sync.example.test:8443")]
        // Not told of a proxy: anyone could send these headers, so they are ignored.
        let direct = try TusFixture()
        #expect(try direct.request("POST", "/v1/uploads/", headers: forwarded).header("Location")?
            .hasPrefix("http://127.0.0.1:\(direct.port)/v1/uploads/") == true)
        let proxied = try TusFixture { $0.behindProxy = true }
        #expect(try proxied.request("POST", "/v1/uploads/", headers: forwarded).header("Location")?
            .hasPrefix("https://sync.example.test:8443/v1/uploads/") == true)
        // A list (a proxy appended to what the client sent: whose is which?) is not believed.
        let listed = [TusFixture.version, ("Upload-Length", "1"), ("X-Forwarded-Host", "evil.example, sync.example.test")]
        #expect(try proxied.request("POST", "/v1/uploads/", headers: listed).header("Location")?
            .hasPrefix("http://127.0.0.1:\(proxied.port)/v1/uploads/") == true)
        // A forwarded host that is not a plain host and port never reaches the URL: it stays relative.
        for bad in ["evil.test/steal?", "a b", "x@y"] {
            let location = try proxied.request("POST", "/v1/uploads/", headers: [TusFixture.version, ("Upload-Length", "1"), ("X-Forwarded-Host", bad)])
                .header("Location")
            #expect(location?.hasPrefix("/v1/uploads/") == true, "\(bad) gave \(location ?? "nothing")")
        }
    }

    /// `Host: evil.example` never reaches a Location (issue 24 item 10); a configured public URL wins
    /// over every header, a proxy's included.
    @Test func theLocationNeverFollowsHostAndAPublicURLWinsOverEveryHeader() throws {
        let direct = try TusFixture()
        let evil = [TusFixture.version, ("Upload-Length", "1"), ("Host", "evil.example")]
        let location = try #require(try direct.request("POST", "/v1/uploads/", headers: evil).header("Location"))
        #expect(location.hasPrefix("http://127.0.0.1:\(direct.port)/v1/uploads/"), "\(location)")
        let public_ = try TusFixture { $0.publicURL = "https://sync.example.org/"; $0.behindProxy = true }
        let forwarded = evil + [("X-Forwarded-Proto", "http"), ("X-Forwarded-Host", "proxy.example")]
        #expect(try public_.request("POST", "/v1/uploads/", headers: forwarded).header("Location")?
            .hasPrefix("https://sync.example.org/v1/uploads/") == true)
        #expect(PublicOrigin.parse(publicURL: "https://sync.example.org/path") == nil)
        #expect(PublicOrigin.parse(publicURL: "ftp://sync.example.org") == nil)
        #expect(PublicOrigin.parse(publicURL: "http://user@host") == nil)
        #expect(PublicOrigin.parse(publicURL: "http://[::1]:7071") == "http://[::1]:7071")
    }

    @Test func zeroLengthUploadIsFinishedAtOnce() throws {
        let tus = try TusFixture()
        let id = try tus.create(length: 0)
        let head = try tus.head(id)
        #expect(head.header("Upload-Offset") == "0")
        #expect(head.header("Upload-Length") == "0")
        #expect(head.header("Upload-Expires") == nil)
    }

    @Test func deferredLengthIsSetByALaterPatch() throws {
        let tus = try TusFixture()
        let id = try tus.create(headers: [("Upload-Defer-Length", "1")])
        let before = try tus.head(id)
        #expect(before.header("Upload-Defer-Length") == "1")
        #expect(before.header("Upload-Length") == nil)
        #expect(try tus.patch(id, offset: 0, bytes("hello")).status == 204)
        let done = try tus.patch(id, offset: 5, bytes(" world"), headers: [("Upload-Length", "11")])
        #expect(done.status == 204)
        let after = try tus.head(id)
        #expect(after.header("Upload-Length") == "11")
        #expect(after.header("Upload-Defer-Length") == nil)
        #expect(tus.stored(id) == bytes("hello world"))
    }

    @Test(arguments: [nil, Digest.Algorithm.sha1, .sha256, .crc32])
    func creationWithUploadTakesTheFirstChunk(algorithm: Digest.Algorithm?) throws {
        let tus = try TusFixture()
        var headers = [TusFixture.version, ("Upload-Length", "11"), TusFixture.chunk]
        if let algorithm { headers.append(("Upload-Checksum", checksum(algorithm, bytes("hello")))) }
        let response = try tus.request("POST", "/v1/uploads/", headers: headers, body: bytes("hello"))
        #expect(response.status == 201)
        #expect(response.header("Upload-Offset") == "5")
        let id = String(try #require(response.header("Location")).split(separator: "/").last!)
        #expect(tus.stored(id) == bytes("hello"))
        #expect(try tus.head(id).header("Upload-Offset") == "5")
    }

    @Test func metadataIsValidatedAndSentBackReEncoded() throws {
        let tus = try TusFixture()
        // Extra blanks around the pairs, and a key without a value.
        let id = try tus.create(length: 1, headers: [("Upload-Metadata", " filename  bXkgc2F2ZS5kYXQ= ,  is_confidential ,type YQ==")])
        #expect(try tus.head(id).header("Upload-Metadata") == "filename bXkgc2F2ZS5kYXQ=,is_confidential,type YQ==")
    }
}
