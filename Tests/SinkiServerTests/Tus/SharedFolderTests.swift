import Foundation
import Glibc
@testable import SinkiServer
import SinkiRecord
import SinkiSupport
import SinkiTestSupport
import Testing

/// Several servers on one upload folder (docs/server.md, "Several servers"): an upload begun through
/// one is resumed through another, and two never write one upload at once. A tus protocol test: the
/// servers run without tokens, by name.
@Suite struct SharedFolderTests {
    let shared = TemporaryDirectory("sinki-shared-uploads")

    func server() throws -> ServerFixture {
        let folder = shared.child("uploads")
        return try ServerFixture { $0.uploadsDirectory = folder }
    }

    static let tus = [TusFixture.version]
    static let chunk = [TusFixture.version, TusFixture.chunk]

    @Test func anUploadBegunThroughOneServerIsFinishedThroughTheOther() throws {
        let one = try server(), two = try server()
        let bytes = randomBytes(300_000)
        let created = try one.request("POST", "/v1/uploads/", headers: Self.tus + [("Upload-Length", String(bytes.count))])
        #expect(created.status == 201)
        let id = String(try #require(created.header("Location")).split(separator: "/").last!)
        let half = try one.request("PATCH", "/v1/uploads/\(id)", headers: Self.chunk + [("Upload-Offset", "0")], body: Array(bytes[0..<100_000]))
        #expect(half.status == 204)
        // The other server never saw it made, and knows where it stands.
        #expect(try two.request("HEAD", "/v1/uploads/\(id)", headers: Self.tus).header("Upload-Offset") == "100000")
        let rest = try two.request("PATCH", "/v1/uploads/\(id)", headers: Self.chunk + [("Upload-Offset", "100000")], body: Array(bytes[100_000...]))
        #expect(rest.status == 204 && rest.header("Upload-Offset") == "300000")
        // The first one sees it finished (a PATCH at its old offset is refused as stale), and serves it whole.
        #expect(try one.request("HEAD", "/v1/uploads/\(id)", headers: Self.tus).header("Upload-Offset") == "300000")
        let stale = try one.request("PATCH", "/v1/uploads/\(id)", headers: Self.chunk + [("Upload-Offset", "100000")], body: [1, 2, 3])
        #expect(stale.status == 409)
        #expect(try one.request("GET", Routes.assets + id).body == bytes)
        #expect(try two.request("GET", Routes.assets + id).body == bytes)
    }

    @Test func twoServersNeverWriteOneUploadAtOnce() throws {
        let one = try server(), two = try server()
        let total = 1 << 20
        let bytes = randomBytes(total)
        let created = try one.request("POST", "/v1/uploads/", headers: Self.tus + [("Upload-Length", String(total))])
        let id = String(try #require(created.header("Location")).split(separator: "/").last!)
        // A PATCH through the first, stalled mid-body: it holds the upload.
        let stalled = try one.connect()
        var head = "PATCH /v1/uploads/\(id) HTTP/1.1\r\nHost: localhost\r\nTus-Resumable: 1.0.0\r\n"
        head += "Content-Type: application/offset+octet-stream\r\nUpload-Offset: 0\r\nContent-Length: \(total)\r\n\r\n"
        try stalled.write(Array(head.utf8) + Array(bytes[0..<65536]))
        let dataPath = shared.child("uploads") + "/\(id).bin"
        try waitUntilSync("the first 64 KiB to reach the disk") {
            var info = stat()
            return stat(dataPath, &info) == 0 && info.st_size >= 65536
        }
        // Through the second: locked, as termination is; a third server starting does not cut its bytes.
        let competing = try two.request("PATCH", "/v1/uploads/\(id)", headers: Self.chunk + [("Upload-Offset", "0")], body: [1, 2, 3])
        #expect(competing.status == 423, "\(competing.status) \(competing.text)")
        #expect(try two.request("DELETE", "/v1/uploads/\(id)", headers: Self.tus).status == 423)
        let three = try server()
        var after = stat()
        #expect(stat(dataPath, &after) == 0 && after.st_size >= 65536, "a starting server cut an upload another one writes")
        // The first finishes; then the others may go on from where it stands.
        try stalled.write(Array(bytes[65536...]))
        let answer = try stalled.receive(expectBody: false)
        #expect(answer.status == 204)
        #expect(try three.request("HEAD", "/v1/uploads/\(id)", headers: Self.tus).header("Upload-Offset") == String(total))
        #expect(try two.request("GET", Routes.assets + id).body == bytes)
        #expect(try two.request("DELETE", "/v1/uploads/\(id)", headers: Self.tus).status == 204)
        // Terminated through one, gone through all.
        #expect(try one.request("HEAD", "/v1/uploads/\(id)", headers: Self.tus).status == 404)
    }
}
