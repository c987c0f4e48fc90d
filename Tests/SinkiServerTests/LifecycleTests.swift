import Foundation
import Glibc
import SinkiRecord
@testable import SinkiServer
import SinkiSupport
import SinkiTestSupport
import Testing

@Suite struct LifecycleTests {
    @Test func portZeroPicksAFreePortAndTheDataFolderIsCreated() throws {
        let fixture = try ServerFixture()
        #expect(fixture.port > 0 && fixture.port < 65536)
        #expect(FileManager.default.fileExists(atPath: fixture.directory.child("data/records.db")))
        #expect(try fixture.request("GET", "/v1/changes").status == 200)
    }

    @Test func anAddressInUseIsATypedErrorNamingIt() throws {
        let fixture = try ServerFixture()
        let directory = TemporaryDirectory("sinki-server")
        let address = "127.0.0.1:\(fixture.port)"
        let second = try SyncServer(configuration: ServerConfiguration(listen: address, dataDirectory: directory.child("data")), logger: testLogger())
        defer { second.stop() }
        do {
            try second.start()
            Issue.record("a second server started on \(address)")
        } catch {
            #expect(error.code == .cannotListen)
            #expect(error.description.contains(address))
            #expect(error.description.contains("in use"))
        }
    }

    @Test(arguments: ["nonsense", "127.0.0.1", "127.0.0.1:99999", "127.0.0.1:port", "[::1", "[::1]7071", "::1:7071", "300.1.2.3:80"])
    func aBadListenAddressIsATypedError(address: String) throws {
        let directory = TemporaryDirectory("sinki-server")
        let server = try SyncServer(configuration: ServerConfiguration(listen: address, dataDirectory: directory.child("data")), logger: testLogger())
        defer { server.stop() }
        do {
            try server.start()
            Issue.record("started on \(address)")
        } catch {
            #expect(error.code == .badAddress)
            #expect(error.description.contains(address))
        }
    }

    @Test func servesOnIPv6Loopback() throws {
        let probe = socket(AF_INET6, Int32(SOCK_STREAM.rawValue), 0)
        guard probe >= 0 else { return }  // no IPv6 on this machine
        close(probe)
        let directory = TemporaryDirectory("sinki-server")
        var configuration = ServerConfiguration(listen: "[::1]:0", dataDirectory: directory.child("data"))
        configuration.authentication = .none // ::1 is loopback: served without tokens, which this test does not need
        let server = try SyncServer(configuration: configuration, logger: testLogger())
        defer { server.stop() }
        try server.start()
        let response = try TestConnection(port: server.boundPort, host: "::1").request("GET", "/v1/changes")
        #expect(response.status == 200)
    }

    @Test func startTwiceIsAnErrorAndStopIsIdempotent() throws {
        let fixture = try ServerFixture()
        #expect(throws: ServerError.self) { try fixture.server.start() }
        fixture.server.stop()
        fixture.server.stop()
        #expect(fixture.server.boundPort == 0)
        #expect(throws: ServerError.self) { try fixture.server.start() }
    }

    @Test func aStoppedServerCanBeReplacedOnTheSameDataAndTokensStillResume() throws {
        let directory = TemporaryDirectory("sinki-server")
        var configuration = ServerConfiguration(listen: "127.0.0.1:0", dataDirectory: directory.child("deep/er/data"))
        configuration.authentication = .none // what is tested is the store across restarts
        let first = try SyncServer(configuration: configuration, logger: testLogger())
        try first.start()
        _ = try TestConnection(port: first.boundPort).request("POST", "/v1/records/modify", headers: [("Content-Type", "application/json")],
                                                                body: ModifyRequest(records: [fileRecord("Z/1", "one")]).jsonBytes)
        let token = try TestConnection(port: first.boundPort).request("GET", "/v1/changes").page().token
        first.stop()

        let second = try SyncServer(configuration: configuration, logger: testLogger())
        try second.start()
        defer { second.stop() }
        _ = try TestConnection(port: second.boundPort).request("POST", "/v1/records/modify", headers: [("Content-Type", "application/json")],
                                                                 body: ModifyRequest(records: [fileRecord("Z/2", "two")]).jsonBytes)
        let page = try TestConnection(port: second.boundPort).request("GET", changesTarget(since: token)).page()
        #expect(page.records.map(\.path) == ["Z/2"])
    }

    @Test func aServerThatNeverStartedClosesItsStoreOnStop() throws {
        let directory = TemporaryDirectory("sinki-server")
        let server = try SyncServer(configuration: ServerConfiguration(dataDirectory: directory.child("data")), logger: testLogger())
        server.stop()
        #expect(throws: (any Error).self) { try server.store.changes(user: "u", after: 0, limit: PageLimit(records: 1, dataBytes: 1)) }
    }

    @Test func anUnusableDataFolderIsATypedError() throws {
        let directory = TemporaryDirectory("sinki-server")
        _ = FileManager.default.createFile(atPath: directory.child("file"), contents: Data())
        #expect(throws: ServerError.self) {
            _ = try SyncServer(configuration: ServerConfiguration(dataDirectory: directory.child("file/data")), logger: testLogger())
        }
    }
}
