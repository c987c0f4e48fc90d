import Foundation
import SinkiLoop
import SinkiRecord
import SinkiSupport
import SinkiTestSupport
import Testing
import SinkiTransfer

enum BodyKind: String, CaseIterable, Sendable {
    case bytes, file
}

let fiftyMiB = 50 << 20

/// Serialized: the machine has two cores, several cases move 50 MiB, and the timing checks
/// (cancellation within a second) must not measure other tests' load.
@Suite(.serialized) struct HTTPClientTests {
    // MARK: Requests and bodies

    @Test(arguments: [0, 1000, fiftyMiB])
    func getReturnsTheBodyInMemory(size: Int) async throws {
        let peer = try await Peer()
        let thread = LoopThread()
        defer { thread.stop() }
        let agent = LoopClient(loop: thread.loop)

        let response = try await agent.get(peer.url("/bytes?n=\(size)"))
        #expect(response.status == 200)
        #expect(response.body.count == size)
        #expect(sha256(response.body) == sha256(patternBytes(0, size)))
        #expect(response.header("CONTENT-length") == "\(size)")
        #expect(await agent.isIdle)
    }

    @Test(arguments: BodyKind.allCases, [0, 1000, fiftyMiB])
    func postSendsTheWholeBody(kind: BodyKind, size: Int) async throws {
        let peer = try await Peer()
        let directory = TemporaryDirectory("sinki-transfer")
        let thread = LoopThread()
        defer { thread.stop() }
        let agent = LoopClient(loop: thread.loop)

        let bytes = randomBytes(size)
        let body: HTTPBody
        switch kind {
        case .bytes:
            body = .bytes(bytes)
        case .file:
            let path = directory.child("body")
            try writeFile(path, bytes)
            body = .file(path: path, offset: 0, length: Int64(size))
        }
        let request = HTTPRequest(method: "POST", url: peer.url("/echo"), headers: [("Content-Type", "application/octet-stream")],
                                  body: body, bearerToken: "secret-token\n")
        let response = try await agent.send(request)
        #expect(response.status == 200)
        let echo = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
        #expect(echo["method"] as? String == "POST")
        #expect(echo["length"] as? Int == size)
        #expect(echo["sha256"] as? String == sha256(bytes))
        let headers = (echo["headers"] as? [[String]] ?? []).map { ($0[0].lowercased(), $0[1]) }
        #expect(headers.contains { $0 == ("authorization", "Bearer secret-token") })
        #expect(headers.contains { $0 == ("content-length", "\(size)") })
        #expect(!headers.contains { $0.0 == "expect" })
        #expect(!headers.contains { $0.0 == "transfer-encoding" })
    }

    @Test func patchAndPutSendASliceOfAFile() async throws {
        let peer = try await Peer()
        let directory = TemporaryDirectory("sinki-transfer")
        let thread = LoopThread()
        defer { thread.stop() }
        let agent = LoopClient(loop: thread.loop)

        let bytes = randomBytes(1 << 20)
        let path = directory.child("body")
        try writeFile(path, bytes)
        for method in ["PATCH", "PUT"] {
            let request = HTTPRequest(method: method, url: peer.url("/echo"), body: .file(path: path, offset: 1000, length: 5000))
            let response = try await agent.send(request)
            let echo = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
            #expect(echo["method"] as? String == method)
            #expect(echo["length"] as? Int == 5000)
            #expect(echo["sha256"] as? String == sha256(Array(bytes[1000..<6000])))
        }
        // A file shorter than the length announced fails clearly rather than hanging.
        let short = HTTPRequest(method: "PUT", url: peer.url("/echo"), body: .file(path: path, offset: 0, length: Int64(bytes.count + 10)))
        await #expect(throws: TransferError.bodyShrank(path: path, expected: Int64(bytes.count + 10))) {
            _ = try await agent.send(short)
        }
    }

    @Test func bodiesWithoutATypeClaimNone() async throws {
        let peer = try await Peer()
        let thread = LoopThread()
        defer { thread.stop() }
        let agent = LoopClient(loop: thread.loop)

        for method in ["POST", "PUT"] {
            let response = try await agent.send(HTTPRequest(method: method, url: peer.url("/echo"), body: .bytes(Array("{}".utf8))))
            let echo = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
            let names = (echo["headers"] as? [[String]] ?? []).map { $0[0].lowercased() }
            #expect(!names.contains("content-type"))
            #expect(!names.contains("expect"))
            #expect(echo["length"] as? Int == 2)
        }
    }

    @Test func hostNamesAreResolvedOnTheLoop() async throws {
        let peer = try await Peer()
        let thread = LoopThread()
        defer { thread.stop() }
        let agent = LoopClient(loop: thread.loop)

        // libcurl's threaded resolver reports back through a socket the loop watches.
        let response = try await agent.get("http://localhost:\(peer.port)/hello")
        #expect(response.body == Array("hello".utf8))
        #expect(await agent.isIdle)
        #expect(await agent.activeLoopHandles() == (timers: 0, polls: 0))
    }

    @Test func nonSuccessStatusesAreResponses() async throws {
        let peer = try await Peer()
        let thread = LoopThread()
        defer { thread.stop() }
        let agent = LoopClient(loop: thread.loop)

        let response = try await agent.get(peer.url("/status?code=404"))
        #expect(response.status == 404)
        #expect(!response.isSuccess)
        #expect(response.header("content-type") == "application/problem+json")
        let problem = try #require(Problem.parse(response.body))
        #expect(problem.status == 404)
        #expect(problem.requestId == "r1")
    }

    @Test func headersWithLineBreaksAreRefused() async throws {
        let thread = LoopThread()
        defer { thread.stop() }
        let agent = LoopClient(loop: thread.loop)
        let request = HTTPRequest(url: "http://127.0.0.1:1/", headers: [("X-Bad", "a\r\nInjected: yes")])
        await #expect(throws: TransferError.self) { _ = try await agent.send(request) }
    }

    // MARK: Downloads to files

    @Test func downloadStreamsToAFile() async throws {
        let peer = try await Peer()
        let directory = TemporaryDirectory("sinki-transfer")
        let thread = LoopThread()
        defer { thread.stop() }
        let agent = LoopClient(loop: thread.loop)

        let path = directory.child("download")
        let (response, reports) = try await agent.sendRecordingProgress(HTTPRequest(url: peer.url("/bytes?n=\(fiftyMiB)")),
                                                                        sink: .file(path: path, offset: 0))
        #expect(response.status == 200)
        #expect(response.body.isEmpty)
        #expect(try sha256(file: path) == sha256(patternBytes(0, fiftyMiB)))
        #expect(reports.last.map { $0 == (Int64(fiftyMiB), Int64(fiftyMiB)) } == true)
        #expect(zip(reports, reports.dropFirst()).allSatisfy { $0.0 <= $1.0 })
    }

    @Test func resumedDownloadAsksForTheRest() async throws {
        let peer = try await Peer()
        let directory = TemporaryDirectory("sinki-transfer")
        let thread = LoopThread()
        defer { thread.stop() }
        let agent = LoopClient(loop: thread.loop)

        let size = 5 << 20
        let kept = 3 << 20
        let path = directory.child("download")
        // What an interrupted download left: the right first bytes, then a torn tail to overwrite.
        try writeFile(path, patternBytes(0, kept) + [UInt8](repeating: 0xEE, count: 4096))
        let (response, reports) = try await agent.sendRecordingProgress(HTTPRequest(url: peer.url("/bytes?n=\(size)")),
                                                                        sink: .file(path: path, offset: Int64(kept)))
        #expect(response.status == 206)
        #expect(response.header("Content-Range") == "bytes \(kept)-\(size - 1)/\(size)")
        #expect(try FileDescriptor.open(path, flags: O_RDONLY).stat().size == Int64(size))
        #expect(try sha256(file: path) == sha256(patternBytes(0, size)))
        #expect(reports.last.map { $0 == (Int64(size), Int64(size)) } == true)
        #expect(reports.allSatisfy { $0.0 >= Int64(kept) })
    }

    @Test func serverIgnoringTheRangeRewritesTheWholeFile() async throws {
        let peer = try await Peer()
        let directory = TemporaryDirectory("sinki-transfer")
        let thread = LoopThread()
        defer { thread.stop() }
        let agent = LoopClient(loop: thread.loop)

        let size = 1 << 20
        let path = directory.child("download")
        try writeFile(path, [UInt8](repeating: 0xEE, count: 2 << 20))
        let response = try await agent.send(HTTPRequest(url: peer.url("/bytes?n=\(size)&norange=1")), sink: .file(path: path, offset: 4096))
        #expect(response.status == 200)
        #expect(try sha256(file: path) == sha256(patternBytes(0, size)))
    }

    @Test func errorAnswersToADownloadLeaveTheFileAlone() async throws {
        let peer = try await Peer()
        let directory = TemporaryDirectory("sinki-transfer")
        let thread = LoopThread()
        defer { thread.stop() }
        let agent = LoopClient(loop: thread.loop)

        let path = directory.child("download")
        let before = [UInt8](repeating: 7, count: 1000)
        try writeFile(path, before)
        let response = try await agent.send(HTTPRequest(url: peer.url("/status?code=416")), sink: .file(path: path, offset: 1000))
        #expect(response.status == 416)
        #expect(Problem.parse(response.body)?.status == 416)
        #expect(try sha256(file: path) == sha256(before))
    }

    // MARK: Concurrency and connections

    @Test func twentyConcurrentRequests() async throws {
        let peer = try await Peer()
        let thread = LoopThread()
        defer { thread.stop() }
        let agent = LoopClient(loop: thread.loop)

        let sizes = (0..<20).map { 1000 + $0 * 37_000 }
        let hashes = try await withThrowingTaskGroup(of: (Int, String).self) { group in
            for (index, size) in sizes.enumerated() {
                group.addTask { (index, sha256(try await agent.get(peer.url("/bytes?n=\(size)")).body)) }
            }
            var hashes = [String](repeating: "", count: sizes.count)
            for try await (index, hash) in group { hashes[index] = hash }
            return hashes
        }
        #expect(hashes == sizes.map { sha256(patternBytes(0, $0)) })
        #expect(await agent.activeTransfers == 0)
        #expect(await agent.isIdle)
    }

    @Test func sequentialRequestsReuseOneConnection() async throws {
        let peer = try await Peer()
        let thread = LoopThread()
        defer { thread.stop() }
        let agent = LoopClient(loop: thread.loop)

        for _ in 0..<10 {
            #expect(try await agent.get(peer.url("/hello")).body == Array("hello".utf8))
        }
        _ = try await agent.send(HTTPRequest(method: "POST", url: peer.url("/echo"), body: .bytes(randomBytes(100_000))))
        let stats = try await agent.stats(peer.url("/stats"))
        #expect(stats["connections"] == 1)
    }

    @Test func idleLoopHasNoTimerAndNoPoll() async throws {
        let peer = try await Peer()
        let thread = LoopThread()
        defer { thread.stop() }
        let agent = LoopClient(loop: thread.loop)

        #expect(await agent.activeLoopHandles() == (timers: 0, polls: 0))
        for _ in 0..<3 { _ = try await agent.get(peer.url("/hello")) }
        // The keep-alive connection stays cached, but nothing watches it and no timer runs.
        #expect(await agent.isIdle)
        #expect(await agent.activeLoopHandles() == (timers: 0, polls: 0))
    }

    // MARK: Cancellation and failures

    @Test func cancellingTheTaskAbandonsAHeldRequest() async throws {
        let peer = try await Peer()
        let thread = LoopThread()
        defer { thread.stop() }
        let agent = LoopClient(loop: thread.loop)

        let held = Task { try await agent.send(HTTPRequest(url: peer.url("/hold?seconds=30"), timeout: 60)) }
        // A second client watches the peer, so the held transfer is the first one's only transfer.
        let watcher = LoopClient(loop: thread.loop)
        try await waitUntil("the peer to hold the request") {
            try await watcher.stats(peer.url("/stats"))["holding"] == 1
        }
        #expect(await agent.activeTransfers == 1)
        #expect(await agent.isIdle == false)

        let start = SinkiSupport.Clock.monotonic()
        held.cancel()
        let result = await held.result
        let elapsed = seconds(since: start)
        #expect(elapsed < 1)
        #expect(throws: TransferError.cancelled) { try result.get() }
        #expect(await agent.isIdle)
        // The peer sees the connection closed.
        try await waitUntil("the peer to see the client leave") {
            try await watcher.stats(peer.url("/stats"))["holding"] == 0
        }
        #expect(await watcher.isIdle)
        #expect(await agent.activeLoopHandles() == (timers: 0, polls: 0))
    }

    @Test func alreadyCancelledTaskSendsNothing() async throws {
        let peer = try await Peer()
        let thread = LoopThread()
        defer { thread.stop() }
        let agent = LoopClient(loop: thread.loop)

        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await agent.get(peer.url("/hello"))
        }
        await #expect(throws: TransferError.cancelled) { try await task.value }
        #expect(await agent.isIdle)
    }

    @Test func refusedConnectionIsUnreachable() async throws {
        let thread = LoopThread()
        defer { thread.stop() }
        let agent = LoopClient(loop: thread.loop)

        let url = "http://127.0.0.1:\(freePort())/v1/changes"
        do {
            _ = try await agent.get(url)
            Issue.record("a closed port answered")
        } catch {
            guard case .unreachable(let failed, _) = error else {
                Issue.record("expected .unreachable, got \(error)")
                return
            }
            #expect(failed == url)
            #expect(error.description.hasPrefix("cannot reach \(url): "))
            #expect(error.description.contains("connection refused"), "the system's reason, not libcurl's sentence around it")
            #expect(error.isTemporary)
        }
        #expect(await agent.isIdle)
    }

    @Test func silentServerTimesOut() async throws {
        let peer = try await Peer()
        let thread = LoopThread()
        defer { thread.stop() }
        let agent = LoopClient(loop: thread.loop)

        let start = SinkiSupport.Clock.monotonic()
        do {
            _ = try await agent.send(HTTPRequest(url: peer.url("/hold?seconds=30"), timeout: 0.5))
            Issue.record("the held request answered")
        } catch {
            guard case .timedOut = error else {
                Issue.record("expected .timedOut, got \(error)")
                return
            }
        }
        let elapsed = seconds(since: start)
        #expect(elapsed >= 0.45 && elapsed < 5)
        #expect(await agent.isIdle)
    }

    @Test func stalledTransferTimesOut() async throws {
        let peer = try await Peer()
        let thread = LoopThread()
        defer { thread.stop() }
        let agent = LoopClient(loop: thread.loop)

        let start = SinkiSupport.Clock.monotonic()
        do {
            _ = try await agent.send(HTTPRequest(url: peer.url("/hold?seconds=30"), stallTimeout: 1))
            Issue.record("the held request answered")
        } catch {
            guard case .timedOut = error else {
                Issue.record("expected .timedOut, got \(error)")
                return
            }
            #expect(error.isTemporary)
        }
        let elapsed = seconds(since: start)
        #expect(elapsed >= 0.9 && elapsed < 5)
        #expect(await agent.isIdle)
        #expect(await agent.activeLoopHandles() == (timers: 0, polls: 0))
    }

    @Test(arguments: [false, true])
    func responseOverTheLimitIsTooLarge(chunked: Bool) async throws {
        let peer = try await Peer()
        let thread = LoopThread()
        defer { thread.stop() }
        let agent = LoopClient(loop: thread.loop)

        let url = peer.url("/bytes?n=2000000\(chunked ? "&chunked=1" : "")")
        await #expect(throws: TransferError.tooLarge(url: url, limit: 100_000)) {
            _ = try await agent.send(HTTPRequest(url: url), sink: .memory(limit: 100_000))
        }
        // Exactly at the limit is fine.
        let fits = try await agent.send(HTTPRequest(url: peer.url("/bytes?n=100000\(chunked ? "&chunked=1" : "")")), sink: .memory(limit: 100_000))
        #expect(fits.body.count == 100_000)
        #expect(await agent.isIdle)
    }

    // MARK: Progress and rates

    @Test func uploadProgressReachesTheTotal() async throws {
        let peer = try await Peer()
        let thread = LoopThread()
        defer { thread.stop() }
        let agent = LoopClient(loop: thread.loop)

        let total = Int64(8 << 20)
        let request = HTTPRequest(method: "POST", url: peer.url("/echo"), body: .bytes(randomBytes(Int(total))))
        let (response, reports) = try await agent.sendRecordingProgress(request)
        #expect(response.status == 200)
        #expect(reports.count >= 2)
        #expect(reports.allSatisfy { $0.1 == total })
        #expect(reports.last.map { $0 == (total, total) } == true)
        #expect(zip(reports, reports.dropFirst()).allSatisfy { $0.0 <= $1.0 })
    }

    /// The client's limits hold for all its transfers together (issue 25, item 3): 3 MiB take at least
    /// three seconds at 1 MiB/s one way or the other, alone or as three transfers at once, which
    /// take turns and all finish. Only lower bounds: load can slow a transfer, never speed it up.
    @Test func rateLimitsHoldForAllTransfersTogether() async throws {
        let peer = try await Peer()
        let thread = LoopThread()
        defer { thread.stop() }
        let agent = LoopClient(loop: thread.loop)
        // The bucket may hold a tenth of a second's worth and a piece, and the clock has its grain.
        let atLeast = 0.8 * 3

        await agent.setRates(send: 1 << 20, receive: 1 << 20)
        var start = SinkiSupport.Clock.monotonic()
        let download = try await agent.get(peer.url("/bytes?n=\(3 << 20)"))
        #expect(download.body.count == 3 << 20)
        #expect(seconds(since: start) >= atLeast)

        start = SinkiSupport.Clock.monotonic()
        let upload = try await agent.send(HTTPRequest(method: "POST", url: peer.url("/echo"), body: .bytes(randomBytes(3 << 20))))
        #expect(upload.status == 200)
        #expect(seconds(since: start) >= atLeast)

        start = SinkiSupport.Clock.monotonic()
        try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<3 { group.addTask { try await agent.get(peer.url("/bytes?n=\(1 << 20)")).body.count } }
            for try await count in group { #expect(count == 1 << 20) }
        }
        #expect(seconds(since: start) >= atLeast, "three transfers at once each had the whole rate")
        #expect(await agent.isIdle, "the limit's timer is dropped when nothing waits")

        // Lifted: transfers started afterwards are not paused, and nothing is left armed.
        await agent.setRates(send: 0, receive: 0)
        _ = try await agent.get(peer.url("/bytes?n=\(3 << 20)"))
        #expect(await agent.isIdle)
        #expect(await agent.activeLoopHandles().timers == 0)
    }
}
