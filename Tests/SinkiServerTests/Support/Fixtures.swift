import Foundation
@testable import SinkiServer
import SinkiRecord
import SinkiSupport
import SinkiTestSupport

/// A server on 127.0.0.1, port 0, with its data in a fresh temporary folder; stopped when released.
final class ServerFixture {
    let directory: TemporaryDirectory
    let server: SyncServer
    let port: Int

    /// `store`: serve from it (the server closes it at stop) instead of SQLite in the data folder.
    /// `logger`: where the server's lines go (a test that reads them gives its own).
    init(threads: Int = 4, tokens: [String: ServerIdentity]? = nil, store: (any ServerStore)? = nil, logger: Logger = testLogger(),
         configure: (inout ServerConfiguration) -> Void = { _ in }) throws {
        directory = TemporaryDirectory("sinki-server")
        var configuration = ServerConfiguration(listen: "127.0.0.1:0", dataDirectory: directory.child("data"), threads: threads, tokens: tokens)
        // The route tests without tokens ask for a server without authentication (loopback only).
        if tokens == nil { configuration.authentication = .none }
        configure(&configuration)
        if let store {
            server = SyncServer(configuration: configuration, store: store, logger: logger)
        } else {
            server = try SyncServer(configuration: configuration, logger: logger)
        }
        try server.start()
        port = server.boundPort
    }

    deinit { server.stop() }

    func connect() throws -> TestConnection { try TestConnection(port: port) }

    /// One request on a fresh connection.
    func request(_ method: String, _ target: String, token: String? = nil, headers: [(String, String)] = [],
                 body: [UInt8]? = nil) throws -> TestResponse {
        var all = headers
        if let token { all.append(("Authorization", "Bearer \(token)")) }
        return try connect().request(method, target, headers: all, body: body)
    }

    func modify(_ records: [Record], token: String? = nil) throws -> [ModifyResult] {
        try request("POST", "/v1/records/modify", token: token, headers: [("Content-Type", "application/json")],
                    body: ModifyRequest(records: records).jsonBytes).modifyResults()
    }

    func changes(since: String? = nil, wait: Int? = nil, limit: Int? = nil, token: String? = nil) throws -> RecordPage {
        try request("GET", changesTarget(since: since, wait: wait, limit: limit), token: token).page()
    }
}

func changesTarget(since: String? = nil, wait: Int? = nil, limit: Int? = nil) -> String {
    var query: [String] = []
    if let since { query.append("since=\(encoded(since))") }
    if let wait { query.append("wait=\(wait)") }
    if let limit { query.append("limit=\(limit)") }
    return "/v1/changes" + (query.isEmpty ? "" : "?" + query.joined(separator: "&"))
}

/// Warnings and errors only, unless SINKI_TEST_LOG names a level.
func testLogger() -> Logger {
    let level = ProcessInfo.processInfo.environment["SINKI_TEST_LOG"].flatMap(LogLevel.init(name:)) ?? .warning
    return Logger(label: "server-test", level: level)
}


/// A logger at `info` writing to a file of its own, for tests that count the server's lines.
final class LogFile {
    let directory = TemporaryDirectory("sinki-log")
    let path: String
    private let fd: Int32
    let logger: Logger

    init() throws {
        path = directory.child("server.log")
        fd = open(path, O_CREAT | O_WRONLY | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw ClientError(description: "cannot open \(path): \(String(cString: strerror(errno)))") }
        logger = Logger(label: "server-test", level: .info, fd: fd)
    }

    deinit { close(fd) }

    /// The lines written so far.
    func lines() throws -> [String] {
        try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map(String.init)
    }
}
