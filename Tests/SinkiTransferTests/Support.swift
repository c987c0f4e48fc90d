import CUV
import Foundation
import SinkiLoop
import SinkiSupport
import SinkiTestSupport
import SinkiTransfer

/// The Python peer (Fixtures/peer.py) on 127.0.0.1, one per test, stopped by pid.
final class Peer: Sendable {
    let process: ChildProcess
    let port: Int
    private let logs: TemporaryDirectory

    /// Hidden (leading dot) only because SwiftPM warns about any other file it does not build in a test
    /// target's folder, and this package's manifest does not exclude `Fixtures/`.
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/peer.py").path

    init() async throws {
        let logs = TemporaryDirectory("sinki-peer")
        // Debian's interpreter when there is one: a version manager's shim may fork instead of exec, and
        // then the pid that gets SIGTERM is not the server's.
        let python = FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? ["/usr/bin/python3"] : ["/usr/bin/env", "python3"]
        let process = try ChildProcess(python[0], Array(python.dropFirst()) + [Self.script], logDirectory: logs.path, label: "peer")
        var port = 0
        try await waitUntil("the peer to print its port") {
            port = Int(process.output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
            return port > 0 || !process.isRunning
        }
        guard port > 0 else { throw PeerFailed(errors: process.errors) }
        self.logs = logs
        self.process = process
        self.port = port
    }

    deinit { process.stop() }

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }
}

struct PeerFailed: Error, CustomStringConvertible {
    var errors: String
    var description: String { "the Python peer did not start: \(errors)" }
}

/// The agent's shape: an actor whose executor is the loop, owning the client.
actor LoopClient {
    nonisolated let loop: EventLoop
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }
    let client: HTTPClient

    init(loop: EventLoop) {
        self.loop = loop
        client = HTTPClient(loop: loop, logger: Logger(label: "transfer-test", level: .warning))
    }

    func send(_ request: HTTPRequest, sink: HTTPResponseSink = .memory(limit: 128 << 20)) async throws(TransferError) -> HTTPResponse {
        try await client.send(request, sink: sink)
    }

    func get(_ url: String) async throws(TransferError) -> HTTPResponse {
        try await client.send(HTTPRequest(url: url))
    }

    /// Sends and records every progress report.
    func sendRecordingProgress(_ request: HTTPRequest, sink: HTTPResponseSink = .memory(limit: 1 << 20))
        async throws(TransferError) -> (HTTPResponse, [(Int64, Int64)]) {
        var reports: [(Int64, Int64)] = []
        let loop = self.loop
        let response = try await client.send(request, sink: sink) { done, total in
            loop.checkIsolated()  // progress runs on the loop
            reports.append((done, total))
        }
        return (response, reports)
    }

    /// The peer's counters (`/stats`: connections, holding).
    func stats(_ url: String) async throws -> [String: Int] {
        let response = try await get(url)
        return try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Int] ?? [:]
    }

    var isIdle: Bool { client.isIdle }
    var activeTransfers: Int { client.activeTransfers }

    func setRates(send: Int64, receive: Int64) {
        client.maxSendRate = send
        client.maxReceiveRate = receive
    }

    /// Active libuv timers and polls on the loop, counted by libuv itself (the loop's own wake-up
    /// handle is neither).
    func activeLoopHandles() -> (timers: Int, polls: Int) {
        var counts = (timers: 0, polls: 0)
        withUnsafeMutablePointer(to: &counts) { pointer in
            uv_walk(loop.uvLoop, { handle, context in
                guard let handle, let context, uv_is_active(handle) != 0 else { return }
                let counts = context.assumingMemoryBound(to: (timers: Int, polls: Int).self)
                if handle.pointee.type == UV_TIMER { counts.pointee.timers += 1 }
                if handle.pointee.type == UV_POLL { counts.pointee.polls += 1 }
            }, pointer)
        }
        return counts
    }
}

/// Bytes `start..<end` of the peer's `/bytes` content: byte i is i % 251.
func patternBytes(_ start: Int, _ end: Int) -> [UInt8] {
    let block = (0..<251).map { UInt8($0) }
    var out = [UInt8]()
    out.reserveCapacity(end - start)
    var position = start
    while position < end {
        let offset = position % 251
        let take = min(end - position, 251 - offset)
        out.append(contentsOf: block[offset..<(offset + take)])
        position += take
    }
    return out
}

/// `count` random bytes.
func randomBytes(_ count: Int) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: count)
    out.withUnsafeMutableBytes { buffer in
        var done = 0
        while done < count {
            let piece = min(count - done, 1 << 24)
            arc4random_buf(buffer.baseAddress! + done, piece)
            done += piece
        }
    }
    return out
}

func sha256(_ bytes: [UInt8]) -> String { Digest.sha256Hex(bytes) }

func sha256(file path: String) throws -> String {
    let file = try FileDescriptor.open(path, flags: O_RDONLY)
    return Digest.sha256Hex(try file.readAll())
}

func writeFile(_ path: String, _ bytes: [UInt8]) throws {
    let file = try FileDescriptor.open(path, flags: O_WRONLY | O_CREAT | O_TRUNC)
    try file.write(bytes)
}

/// Seconds since `start` (monotonic nanoseconds).
func seconds(since start: Int64) -> Double { Double(SinkiSupport.Clock.monotonic() - start) / 1e9 }
