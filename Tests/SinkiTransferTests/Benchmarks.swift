import Foundation
import SinkiLoop
import SinkiSupport
import SinkiTestSupport
import SinkiTransfer
import Testing

/// Loopback throughput against the Python peer, which bounds the rates; the client's own cost is the
/// CPU time of this process (the peer is another process) per request or per megabyte.
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
        let cpuBefore = processCPUSeconds()
        // The loop runs inside the actor, as the agent's requests do: no hop per request.
        try await agent.repeatGet(url, count: count)
        let sequential = Double(count) / seconds(since: start)
        let cpuPerRequest = (processCPUSeconds() - cpuBefore) / Double(count) * 1e6

        let streams = 8
        start = SinkiSupport.Clock.monotonic()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<streams {
                group.addTask { try await agent.repeatGet(url, count: count / streams) }
            }
            try await group.waitForAll()
        }
        let parallel = Double(count) / seconds(since: start)
        let connections = try await agent.stats(peer.url("/stats"))["connections"] ?? 0
        print("bench: small GET, 1 connection: \(Int(sequential)) req/s (client CPU \(Int(cpuPerRequest)) µs/request); "
              + "\(streams) streams: \(Int(parallel)) req/s over \(connections) connections")
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
        let cpuBefore = processCPUSeconds()
        for _ in 0..<5 {
            let start = SinkiSupport.Clock.monotonic()
            let response = try await agent.send(HTTPRequest(method: "POST", url: peer.url("/echo"), body: body))
            rates.append(Double(bytes.count) / 1e6 / seconds(since: start))
            #expect(response.status == 200)
        }
        let cpuPerGB = (processCPUSeconds() - cpuBefore) / (5 * Double(bytes.count) / 1e9)
        rates.sort()
        print("bench: 50 MiB POST (\(kind) body): median \(Int(rates[2])) MB/s, best \(Int(rates[4])) MB/s, client CPU \(String(format: "%.2f", cpuPerGB)) s/GB")
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
        let cpuBefore = processCPUSeconds()
        for _ in 0..<5 {
            let start = SinkiSupport.Clock.monotonic()
            let target: HTTPResponseSink = sink == "memory" ? .memory(limit: size) : .file(path: directory.child("download"), offset: 0)
            let response = try await agent.send(HTTPRequest(url: peer.url("/bytes?n=\(size)")), sink: target)
            rates.append(Double(size) / 1e6 / seconds(since: start))
            #expect(response.status == 200)
        }
        let cpuPerGB = (processCPUSeconds() - cpuBefore) / (5 * Double(size) / 1e9)
        rates.sort()
        print("bench: 50 MiB GET to \(sink): median \(Int(rates[2])) MB/s, best \(Int(rates[4])) MB/s, client CPU \(String(format: "%.2f", cpuPerGB)) s/GB")
    }
}

/// User plus system CPU time of this process so far.
private func processCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

extension LoopClient {
    func repeatGet(_ url: String, count: Int) async throws {
        for _ in 0..<count { _ = try await client.send(HTTPRequest(url: url)) }
    }
}
