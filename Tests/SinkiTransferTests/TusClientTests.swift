import Foundation
import SinkiLoop
import SinkiRecord
import SinkiServer
import SinkiSupport
import SinkiTestSupport
import SinkiTransfer
import Synchronization
import Testing

/// The tus client against a real sinki server on 127.0.0.1 (in this process), on a real libuv loop.
@Suite(.serialized) struct TusClientTests {
    @Test(arguments: [true, false])
    func uploadsSequentiallyAndSavesItsStateBeforeTheFirstByte(checksums: Bool) async throws {
        let server = try TusTestServer()
        let thread = LoopThread()
        defer { thread.stop() }
        let file = try server.file("one.bin", randomBytes(1_000_000))
        var options = TusOptions()
        options.chunkSize = 256 << 10
        options.checksums = checksums
        options.computeSHA256 = true
        let runner = TusRunner(loop: thread.loop, endpoint: server.endpoint, options: options)
        let log = StateLog(uploads: server.uploads)

        let result = try await runner.upload(file.path, log: log)
        #expect(result.size == 1_000_000)
        #expect(result.sha256 == file.sha256)
        #expect(result.bytesSent == 1_000_000)
        #expect(!result.resumed)
        #expect(server.stored(result.url) == file.bytes)
        #expect(server.sha256(result.url) == file.sha256)
        let states = log.states
        #expect(states.first?.parts.first?.offset == 0)
        #expect(states.first?.url == result.url)
        #expect(log.bytesOnServerAtFirstSave == 0)
        #expect(states.last?.parts.first?.offset == 1_000_000)
        #expect(states.count == 1 + 4)
        #expect(await runner.isIdle)
    }

    @Test func resumesFromTheStateItWasGiven() async throws {
        let server = try TusTestServer()
        let thread = LoopThread()
        defer { thread.stop() }
        let file = try server.file("resume.bin", randomBytes(2_000_000))
        var options = TusOptions()
        options.chunkSize = 256 << 10
        options.partsPerFile = 1
        options.computeSHA256 = true
        let runner = TusRunner(loop: thread.loop, endpoint: server.endpoint, options: options)
        // The process "stops" after three chunks: the state save fails and ends the upload.
        let first = StateLog(uploads: server.uploads, failAfter: 4)
        await #expect(throws: TusError.self) { try await runner.upload(file.path, log: first) }
        let stored = try #require(first.states.last)
        #expect(stored.parts[0].offset == 3 * (256 << 10))

        let second = StateLog(uploads: server.uploads)
        let result = try await runner.upload(file.path, resume: TusUploadState(encoded: stored.encoded), log: second)
        #expect(result.resumed)
        #expect(result.url == stored.url)
        // The state is saved while the next chunk goes: the server holds one chunk more than the saved
        // state says, and HEAD tells the client so.
        #expect(result.bytesSent == 2_000_000 - 4 * (256 << 10))
        #expect(result.sha256 == file.sha256)
        #expect(server.stored(result.url) == file.bytes)
    }

    @Test func startsOverWhenTheStoredUploadIsGone() async throws {
        let server = try TusTestServer()
        let thread = LoopThread()
        defer { thread.stop() }
        let file = try server.file("gone.bin", randomBytes(300_000))
        let runner = TusRunner(loop: thread.loop, endpoint: server.endpoint, options: TusOptions())
        let gone = TusUploadState(size: 300_000, url: server.endpoint + "0123456789abcdef0123456789abcdef",
                                  parts: [.init(url: server.endpoint + "0123456789abcdef0123456789abcdef", start: 0, length: 300_000, offset: 100)])
        let result = try await runner.upload(file.path, resume: gone, log: StateLog(uploads: server.uploads))
        #expect(!result.resumed)
        #expect(result.url != gone.url)
        #expect(server.stored(result.url) == file.bytes)
    }

    @Test func largeFilesGoAsParallelPartsJoinedByConcatenation() async throws {
        let server = try TusTestServer()
        let thread = LoopThread()
        defer { thread.stop() }
        let file = try server.file("big.bin", randomBytes(3_000_000))
        var options = TusOptions()
        options.chunkSize = 256 << 10
        options.partsPerFile = 3
        let runner = TusRunner(loop: thread.loop, endpoint: server.endpoint, options: options)
        let log = StateLog(uploads: server.uploads)
        let result = try await runner.upload(file.path, log: log)
        let states = log.states
        #expect(states.first?.parts.count == 3)
        #expect(states.first?.url == nil)
        #expect(states.last?.url == result.url)
        #expect(server.stored(result.url) == file.bytes)
        #expect(server.sha256(result.url) == file.sha256)
        #expect(await runner.progressReports.last == 3_000_000)
        // The parts were terminated once joined: the server holds the file once, not twice.
        let parts = try #require(states.first?.parts.map(\.url))
        #expect(parts.allSatisfy { server.stored($0) == nil })
        #expect(server.bytesOfUploads() == 3_000_000)
    }

    @Test func retriesThroughAServerRestart() async throws {
        let server = try TusTestServer()
        let thread = LoopThread()
        defer { thread.stop() }
        let file = try server.file("restart.bin", randomBytes(1_500_000))
        var options = TusOptions()
        options.chunkSize = 128 << 10
        options.partsPerFile = 1
        options.retryDelays = [0, 0.2, 0.5]
        options.maxRate = 1_000_000
        let runner = TusRunner(loop: thread.loop, endpoint: server.endpoint, options: options)
        let log = StateLog(uploads: server.uploads)
        let upload = Task { try await runner.upload(file.path, log: log) }
        try await waitUntil("a few chunks to arrive", timeout: 20) { (log.states.last?.parts.first?.offset ?? 0) >= 300_000 }
        try server.restart()
        let result = try await upload.value
        #expect(server.stored(result.url) == file.bytes)
        #expect(result.bytesSent < 1_500_000 + (128 << 10) * 2)
    }

    @Test func downloadsResumeAndAreChecked() async throws {
        let server = try TusTestServer()
        let thread = LoopThread()
        defer { thread.stop() }
        let file = try server.file("asset.bin", randomBytes(1_000_000))
        let runner = TusRunner(loop: thread.loop, endpoint: server.endpoint, options: TusOptions())
        let result = try await runner.upload(file.path, log: StateLog(uploads: server.uploads))
        let id = String(result.url.split(separator: "/").last!)
        let asset = server.assetURL(id)

        // Whole.
        let whole = server.directory.child("whole.part")
        #expect(try await runner.download(asset, to: whole, size: 1_000_000, sha256: file.sha256) == 1_000_000)
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: whole))) == file.bytes)
        // Resumed: a temporary file holding the first 400,000 bytes gets only the rest.
        let resumed = server.directory.child("resumed.part")
        try writeFile(resumed, Array(file.bytes[0..<400_000]))
        #expect(try await runner.download(asset, to: resumed, size: 1_000_000, sha256: file.sha256) == 600_000)
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: resumed))) == file.bytes)
        // A corrupt prefix is found by the hash and downloaded again, never handed back.
        let corrupt = server.directory.child("corrupt.part")
        try writeFile(corrupt, [UInt8](repeating: 0, count: 400_000))
        #expect(try await runner.download(asset, to: corrupt, size: 1_000_000, sha256: file.sha256) == 1_600_000)
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: corrupt))) == file.bytes)
        // The wrong hash never succeeds.
        let wrong = server.directory.child("wrong.part")
        await #expect(throws: TusError.self) {
            try await runner.download(asset, to: wrong, size: 1_000_000, sha256: String(repeating: "0", count: 64), attempts: 2)
        }
    }

    @Test func refusesAFileOverTheServersMaximum() async throws {
        let server = try TusTestServer(maxSize: 1000)
        let thread = LoopThread()
        defer { thread.stop() }
        let file = try server.file("large.bin", randomBytes(1001))
        let runner = TusRunner(loop: thread.loop, endpoint: server.endpoint, options: TusOptions())
        await #expect(throws: TusError.tooLarge(size: 1001, maxSize: 1000, url: server.endpoint)) {
            try await runner.upload(file.path, log: StateLog(uploads: server.uploads))
        }
    }

    @Test func discoversWhatTheServerOffers() async throws {
        let server = try TusTestServer()
        let thread = LoopThread()
        defer { thread.stop() }
        let runner = TusRunner(loop: thread.loop, endpoint: server.endpoint, options: TusOptions())
        let capabilities = try await runner.discover()
        #expect(capabilities.versions == ["1.0.0"])
        #expect(capabilities.offers("concatenation") && capabilities.offers("checksum") && capabilities.offers("termination"))
        #expect(capabilities.checksum() == .crc32)
        #expect(capabilities.checksum(avoiding: [.crc32]) == .sha256)
    }

    @Test func aServerThatDisagreesAboutCRC32GetsTheNextChunksWithSHA256() async throws {
        // The peer offers crc32 but means another CRC by it: its first chunk comes back 460.
        let peer = try await Peer()
        let directory = TemporaryDirectory("sinki-crc32c")
        let thread = LoopThread()
        defer { thread.stop() }
        let bytes = randomBytes(600_000)
        let path = directory.child("file.bin")
        try writeFile(path, bytes)
        var options = TusOptions()
        options.chunkSize = 256 << 10
        options.retryDelays = [0]
        let runner = TusRunner(loop: thread.loop, endpoint: peer.url("/crc32c-tus/"), options: options)
        let result = try await runner.upload(path, log: StateLog(uploads: directory.path))
        #expect(result.size == 600_000)
        let client = LoopClient(loop: thread.loop)
        #expect(try await client.get(result.url).body == bytes)
        #expect(try await client.get(peer.url("/crc32c-tus/refused")).body == Array(#"{"refused": 1}"#.utf8))
    }

    @Test func checksumsPreferCRC32ThenSHA256ThenSHA1() {
        func offered(_ algorithms: [String], extensions: Set<String> = ["checksum"]) -> TusCapabilities {
            TusCapabilities(versions: ["1.0.0"], extensions: extensions, maxSize: nil, checksumAlgorithms: algorithms)
        }
        #expect(offered(["sha1", "sha256", "crc32"]).checksum() == .crc32)
        #expect(offered(["sha1", "sha256"]).checksum() == .sha256)
        #expect(offered(["md5", "sha1"]).checksum() == .sha1)
        #expect(offered(["md5"]).checksum() == nil)
        #expect(offered(["crc32"], extensions: []).checksum() == nil)
        #expect(offered(["crc32", "sha1"]).checksum(avoiding: [.crc32]) == .sha1)
    }

    @Test func uploadStateSurvivesItsEncoding() {
        let state = TusUploadState(size: 10, url: nil, parts: [.init(url: "http://h/v1/uploads/a", start: 0, length: 5, offset: 2),
                                                              .init(url: "http://h/v1/uploads/b", start: 5, length: 5, offset: 5)])
        #expect(TusUploadState(encoded: state.encoded) == state)
        #expect(TusUploadState(encoded: "v2 1 -") == nil)
        #expect(TusServer(endpoint: "http://h:1/v1/uploads/").resolve("/v1/uploads/x") == "http://h:1/v1/uploads/x")
        #expect(TusServer(endpoint: "http://h:1/files/").resolve("x") == "http://h:1/files/x")
    }

    /// A generic tus client follows an absolute Location; sinki's agent takes only its path, on its own
    /// server's origin, so a Location naming another host never gets its bytes or its token.
    @Test func anAgentResolvesEveryLocationOnItsOwnServersOrigin() {
        #expect(TusServer(endpoint: "http://h:1/v1/uploads/").resolve("http://evil.example/v1/uploads/x") == "http://evil.example/v1/uploads/x")
        let agent = TusServer(endpoint: "http://h:1/v1/uploads/", pinsOrigin: true)
        #expect(agent.resolve("http://evil.example/v1/uploads/x") == "http://h:1/v1/uploads/x")
        #expect(agent.resolve("https://sync.example.org:8443/v1/uploads/y?z") == "http://h:1/v1/uploads/y?z")
        #expect(agent.resolve("http://evil.example") == "http://h:1/")
        #expect(agent.resolve("/v1/uploads/x") == "http://h:1/v1/uploads/x")
    }
}

/// A sinki server on 127.0.0.1 with its data in a temporary folder; restartable on the same port.
final class TusTestServer: @unchecked Sendable {
    // @unchecked: `server` is replaced only by `restart`, called by the one test that owns this object.
    let directory = TemporaryDirectory("sinki-tus-client")
    private var server: SyncServer
    private var configuration: ServerConfiguration
    let port: Int

    init(maxSize: Int64? = nil) throws {
        configuration = ServerConfiguration(listen: "127.0.0.1:0", dataDirectory: directory.child("data"))
        configuration.authentication = .none // the tus client against the server's protocol, without tokens
        if let maxSize { configuration.uploads.maxSize = maxSize }
        server = try SyncServer(configuration: configuration, logger: Logger(label: "tus-server", level: .warning))
        try server.start()
        port = server.boundPort
        configuration.listen = "127.0.0.1:\(port)"
    }

    deinit { server.stop() }

    func restart() throws {
        server.stop()
        server = try SyncServer(configuration: configuration, logger: Logger(label: "tus-server", level: .warning))
        try server.start()
    }

    var endpoint: String { "http://127.0.0.1:\(port)/v1/uploads/" }
    var uploads: String { directory.child("data") + "/uploads" }
    func assetURL(_ id: String) -> String { "http://127.0.0.1:\(port)/v1/assets/\(id)" }

    func stored(_ url: String) -> [UInt8]? {
        FileManager.default.contents(atPath: uploads + "/\(url.split(separator: "/").last!).bin").map { Array($0) }
    }

    /// Bytes of every upload the server holds (`*.bin`).
    func bytesOfUploads() -> Int { bytesOfFiles(in: uploads) { $0.hasSuffix(".bin") } }

    /// The SHA-256 the server computed as the bytes came in (from its info file).
    func sha256(_ url: String) -> String? {
        guard let text = readFile(uploads + "/\(url.split(separator: "/").last!).info"),
              let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else { return nil }
        return object["sha256"] as? String
    }

    struct LocalFile {
        var path: String
        var bytes: [UInt8]
        var sha256: String
    }

    func file(_ name: String, _ bytes: [UInt8]) throws -> LocalFile {
        let path = directory.child(name)
        try writeFile(path, bytes)
        return LocalFile(path: path, bytes: bytes, sha256: Digest.sha256Hex(bytes))
    }
}

/// What the client asked the caller to keep, in order; optionally failing after some saves, as a
/// process that stops would.
final class StateLog: Sendable {
    private let saved = Mutex<[TusUploadState]>([])
    private let firstSave = Mutex<Int?>(nil)
    private let uploads: String
    private let failAfter: Int?

    init(uploads: String, failAfter: Int? = nil) {
        self.uploads = uploads
        self.failAfter = failAfter
    }

    var states: [TusUploadState] { saved.withLock { $0 } }
    /// Bytes the server held for the upload when the client first saved its state.
    var bytesOnServerAtFirstSave: Int? { firstSave.withLock { $0 } }

    func save(_ state: TusUploadState) throws {
        let count = saved.withLock { list in
            list.append(state)
            return list.count
        }
        if count == 1, let url = state.parts.first?.url {
            let size = (try? FileManager.default.attributesOfItem(atPath: uploads + "/\(url.split(separator: "/").last!).bin"))?[.size] as? Int
            firstSave.withLock { $0 = size }
        }
        if let failAfter, count >= failAfter { throw StateLogStopped() }
    }
}

struct StateLogStopped: Error {}

/// The agent's shape for tus: an actor on the loop that owns the client.
actor TusRunner {
    nonisolated let loop: EventLoop
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }
    private let client: TusClient
    private(set) var progressReports: [Int64] = []

    init(loop: EventLoop, endpoint: String, options: TusOptions) {
        self.loop = loop
        let logger = Logger(label: "tus-client", level: .warning)
        client = TusClient(http: HTTPClient(loop: loop, logger: logger), server: TusServer(endpoint: endpoint), options: options, logger: logger)
    }

    var isIdle: Bool { client.http.isIdle }

    func discover() async throws(TusError) -> TusCapabilities { try await client.discover() }

    func upload(_ path: String, resume: TusUploadState? = nil, log: StateLog) async throws(TusError) -> TusUploadResult {
        try await client.upload(file: path, resume: resume, persist: { state in try log.save(state) }, progress: { [self] done, _ in
            self.assumeIsolated { $0.progressReports.append(done) }
        })
    }

    func download(_ url: String, to path: String, size: Int64, sha256: String, attempts: Int? = nil) async throws(TusError) -> Int64 {
        let saved = client.options
        defer { client.options = saved }
        if let attempts {
            client.options.attempts = attempts
            client.options.retryDelays = [0]
        }
        return try await client.download(url, to: path, size: size, sha256: sha256)
    }
}
