import Foundation
import SinkiLoop
import SinkiSupport
import SinkiTestSupport
import SinkiTransfer
import Testing

/// Loopback throughput against the Python peer; the peer, not the client, bounds small requests.
/// Run: `SINKI_BENCH=1 swift test -c release --filter SinkiTransferTests.Benchmarks`.
@Suite(.serialized, .enabled(if: ProcessInfo.processInfo.environment["SINKI_BENCH"] == "1"))
struct Benchmarks {
    @Test func smallRequestsPerSecond() async throws {
        let peer = try await Peer()
        let thread = LoopThread()
        defer { thread.stop() }
        let agent = LoopClient(loop: thread.loop)
        let url = peer.url("/hello")
        _ = try await agent.get(url)

        let count = 3000
        var start = SinkiSupport.Clock.monotonic()
        for _ in 0..<count { _ = try await agent.get(url) }
        let sequential = Double(count) / seconds(since: start)

        let streams = 8
        start = SinkiSupport.Clock.monotonic()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<streams {
                group.addTask { for _ in 0..<(count / streams) { _ = try await agent.get(url) } }
            }
            try await group.waitForAll()
        }
        let parallel = Double(count) / seconds(since: start)
        let connections = try await agent.stats(peer.url("/stats"))["connections"] ?? 0
        print("bench: small GET, 1 connection: \(Int(sequential)) req/s; \(streams) streams: \(Int(parallel)) req/s; \(connections) connections")
    }

    @Test(arguments: ["bytes", "file"])
    func fiftyMiBPost(kind: String) async throws {
        let peer = try await Peer()
        let directory = TemporaryDirectory("sinki-bench")
        let thread = LoopThread()
        defer { thread.stop() }
        let agent = LoopClient(loop: thread.loop)
        let bytes = randomBytes(50 << 20)
        let path = directory.child("body")
        try writeFile(path, bytes)
        let body: HTTPBody = kind == "bytes" ? .bytes(bytes) : .file(path: path, offset: 0, length: Int64(bytes.count))
        var rates: [Double] = []
        for _ in 0..<5 {
            let start = SinkiSupport.Clock.monotonic()
            let response = try await agent.send(HTTPRequest(method: "POST", url: peer.url("/echo"), body: body))
            rates.append(Double(bytes.count) / 1e6 / seconds(since: start))
            #expect(response.status == 200)
        }
        rates.sort()
        print("bench: 50 MiB POST (\(kind) body): median \(Int(rates[2])) MB/s, best \(Int(rates[4])) MB/s")
    }

    @Test(arguments: ["memory", "file"])
    func fiftyMiBGet(sink: String) async throws {
        let peer = try await Peer()
        let directory = TemporaryDirectory("sinki-bench")
        let thread = LoopThread()
        defer { thread.stop() }
        let agent = LoopClient(loop: thread.loop)
        let size = 50 << 20
        var rates: [Double] = []
        for _ in 0..<5 {
            let start = SinkiSupport.Clock.monotonic()
            let target: HTTPResponseSink = sink == "memory" ? .memory(limit: size) : .file(path: directory.child("download"), offset: 0)
            let response = try await agent.send(HTTPRequest(url: peer.url("/bytes?n=\(size)")), sink: target)
            rates.append(Double(size) / 1e6 / seconds(since: start))
            #expect(response.status == 200)
        }
        rates.sort()
        print("bench: 50 MiB GET to \(sink): median \(Int(rates[2])) MB/s, best \(Int(rates[4])) MB/s")
    }
}
