import Foundation
import Glibc
import SinkiRecord
@testable import SinkiServer
import SinkiSupport
import SinkiTestSupport
import Testing

/// A revoked token is refused at once: new requests, parked long-polls, uploads in progress; by the route,
/// by `sinkid serve token revoke` in another process, and after a restart.
@Suite(.serialized) struct RevocationTests {
    enum Revoker: String, CaseIterable, CustomTestStringConvertible {
        case route
        case otherProcess

        var testDescription: String { rawValue }
    }

    /// Revokes `token` as `revoker` says, beside the running server.
    static func revoke(_ token: IssuedToken, by revoker: Revoker, in fixture: ServerFixture, using other: IssuedToken) throws {
        switch revoker {
        case .route:
            let response = try fixture.request("DELETE", Routes.tokens + "/" + token.id, token: token.secret)
            #expect(response.status == 204)
        case .otherProcess:
            let process = try ChildProcess(sinkidExecutable(), ["serve", "token", "revoke", token.id, "--data", fixture.server.configuration.dataDirectory],
                                           logDirectory: fixture.directory.path, label: "revoke-\(token.id)")
            let code = process.waitForExit(timeout: 30)
            #expect(code == 0, "sinkid serve token revoke: \(process.errors)")
        }
    }

    @Test(arguments: Revoker.allCases)
    func aParkedLongPollOfARevokedTokenAnswers401WithinASecond(revoker: Revoker) throws {
        let fixture = try ServerFixture.withAccounts()
        let doomed = try fixture.issue(user: "alice", device: "phone")
        let kept = try fixture.issue(user: "alice", device: "laptop")
        let start = try fixture.changes(token: doomed.secret)
        let doomedPoll = try fixture.connect()
        try doomedPoll.send("GET", changesTarget(since: start.token, wait: 300), headers: [doomed.header])
        let keptPoll = try fixture.connect()
        try keptPoll.send("GET", changesTarget(since: start.token, wait: 300), headers: [kept.header])
        try waitUntilSync("both polls to park") { fixture.server.waitingLongPolls == 2 }

        // Timed from the revocation's commit (the route's answer, or the process's exit).
        try Self.revoke(doomed, by: revoker, in: fixture, using: kept)
        let began = Date()
        let answer = try doomedPoll.receive(timeout: 5)
        let took = Date().timeIntervalSince(began)
        #expect(answer.status == 401)
        #expect(try answer.problem().detail == Authenticator.refusal)
        #expect(took < 1.5, "cut after \(took) s")
        // The other token of the same user waits on, and its poll still wakes for a save.
        #expect(fixture.server.waitingLongPolls == 1)
        _ = try fixture.modify([fileRecord("S/x", "x")], token: kept.secret)
        #expect(try keptPoll.receive(timeout: 5).page().records.map(\.path) == ["S/x"])
        #expect(try fixture.request("GET", Routes.changes, token: doomed.secret).status == 401)
    }

    @Test func anOtherProcessRevocationIsNoticedWithinTheWatchersInterval() throws {
        let fixture = try ServerFixture.withAccounts()
        let doomed = try fixture.issue(user: "alice")
        let start = try fixture.changes(token: doomed.secret)
        let poll = try fixture.connect()
        try poll.send("GET", changesTarget(since: start.token, wait: 300), headers: [doomed.header])
        try waitUntilSync("the poll to park") { fixture.server.waitingLongPolls == 1 }
        // Another store handle on the same database, as `sinkid serve token revoke` opens.
        let other = try SQLiteRecordStore(path: fixture.server.configuration.dataDirectory + "/records.db", readers: 1)
        defer { other.close() }
        let began = Date()
        #expect(try other.revoke(id: doomed.id, at: Clock.now()) == [doomed.id])
        let answer = try poll.receive(timeout: 5)
        let took = Date().timeIntervalSince(began)
        #expect(answer.status == 401)
        #expect(took < 1.0, "cut after \(took) s")
    }

    @Test(arguments: Revoker.allCases)
    func anUploadInProgressIsCutAndItsLockReleased(revoker: Revoker) throws {
        let fixture = try ServerFixture.withAccounts()
        let doomed = try fixture.issue(user: "alice", device: "phone")
        let kept = try fixture.issue(user: "alice", device: "laptop")
        let total = 1 << 20
        let created = try fixture.createUpload(length: total, token: doomed)
        let location = try #require(created.locationPath)
        let id = String(location.split(separator: "/").last!)
        let bytes = randomBytes(total)

        // Headers for the whole upload, then 64 KiB, then nothing: a client stalled mid-body.
        let upload = try fixture.connect()
        var head = "PATCH \(location) HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(doomed.secret)\r\nTus-Resumable: 1.0.0\r\n"
        head += "Content-Type: application/offset+octet-stream\r\nUpload-Offset: 0\r\nContent-Length: \(total)\r\n\r\n"
        try upload.write(Array(head.utf8) + Array(bytes[0..<65536]))
        let dataPath = try #require(fixture.server.uploadStore).dataPath(id)
        try waitUntilSync("the first 64 KiB to reach the disk") {
            var info = stat()
            return stat(dataPath, &info) == 0 && info.st_size >= 65536
        }

        try Self.revoke(doomed, by: revoker, in: fixture, using: kept)
        let began = Date()
        #expect(upload.isClosed(within: 5))
        let took = Date().timeIntervalSince(began)
        #expect(took < 1.5, "cut after \(took) s")
        // What arrived is kept and the lock is free: the user's other device goes on from there.
        let tus = [("Tus-Resumable", "1.0.0")]
        try waitUntilSync("the cut PATCH to settle") {
            try fixture.request("HEAD", location, token: kept.secret, headers: tus).header("Upload-Offset") == "65536"
        }
        let rest = try fixture.request("PATCH", location, token: kept.secret,
                                       headers: tus + [("Content-Type", "application/offset+octet-stream"), ("Upload-Offset", "65536")],
                                       body: Array(bytes[65536...]))
        #expect(rest.status == 204 && rest.header("Upload-Offset") == String(total))
        let asset = try fixture.request("GET", Routes.assets + id, token: kept.secret)
        #expect(asset.body == bytes)
    }

    /// Expiry cuts like revocation (issue 24 item 7): a long-poll parked before the token expires answers
    /// `401` once it has, instead of carrying another device's save later; a body still arriving stops.
    @Test func anExpiringTokensParkedPollAndUploadAreCutWhenItExpires() throws {
        let fixture = try ServerFixture.withAccounts()
        let lifetime: Int64 = 2_000_000_000
        let expiresAt = Clock.now() + lifetime
        let brief = try fixture.issue(user: "alice", device: "phone", scope: TokenScope(expiresAt: expiresAt))
        let kept = try fixture.issue(user: "alice", device: "laptop")
        let start = try fixture.changes(token: brief.secret)
        let poll = try fixture.connect()
        try poll.send("GET", changesTarget(since: start.token, wait: 300), headers: [brief.header])

        let total = 1 << 20
        let created = try fixture.createUpload(length: total, token: brief)
        let location = try #require(created.locationPath)
        let upload = try fixture.connect()
        var head = "PATCH \(location) HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(brief.secret)\r\nTus-Resumable: 1.0.0\r\n"
        head += "Content-Type: application/offset+octet-stream\r\nUpload-Offset: 0\r\nContent-Length: \(total)\r\n\r\n"
        try upload.write(Array(head.utf8) + randomBytes(65536))
        try waitUntilSync("the poll to park") { fixture.server.waitingLongPolls == 1 }
        #expect(Clock.now() < expiresAt, "the test's setup outlasted the token; nothing was measured")

        let answer = try poll.receive(timeout: Double(lifetime) / 1e9 + 5)
        let late = Double(Clock.now() - expiresAt) / 1e9
        #expect(answer.status == 401)
        #expect(late > -0.05 && late < 1.0, "cut \(late) s after the expiry")
        #expect(upload.isClosed(within: 2))
        #expect(try fixture.request("GET", Routes.changes, token: brief.secret).status == 401)
        // The user's other device goes on untouched.
        #expect(try fixture.modify([fileRecord("S/after", "after")], token: kept.secret).map(\.status) == [.saved])
    }

    @Test func aRevocationOutlivesARestart() throws {
        let directory = TemporaryDirectory("sinki-revoke-restart")
        func server() throws -> SyncServer {
            let server = try SyncServer(configuration: ServerConfiguration(listen: "127.0.0.1:0", dataDirectory: directory.child("data"), tokens: [:]),
                                        logger: testLogger())
            try server.start()
            return server
        }
        let first = try server()
        let id = TokenSecret.makeID()
        let secret = TokenSecret.make(id: id)
        try first.store.addUser("alice", at: Clock.now())
        try first.store.addToken(DeviceToken(id: id, user: "alice", device: "d", scope: .full, parentID: nil, chainID: id,
                                             secretHash: secret.hash, createdAt: Clock.now()))
        let authorization = [("Authorization", "Bearer \(secret.text)")]
        #expect(try TestConnection(port: first.boundPort).request("GET", Routes.changes, headers: authorization).status == 200)
        #expect(try TestConnection(port: first.boundPort).request("DELETE", Routes.tokens + "/" + id, headers: authorization).status == 204)
        first.stop()
        let second = try server()
        defer { second.stop() }
        #expect(try TestConnection(port: second.boundPort).request("GET", Routes.changes, headers: authorization).status == 401)
    }
}
