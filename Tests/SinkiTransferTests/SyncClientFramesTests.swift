import Foundation
import SinkiLoop
import SinkiRecord
import SinkiServer
import SinkiSupport
import SinkiTestSupport
import SinkiTransfer
import Testing

/// The sync client's records in frames against a real sinki server on 127.0.0.1 (in this process), on a
/// real libuv loop: it reads pages in frames, and sends batches in frames once the server has answered
/// it in them (a server older than frames answers JSON, and is sent JSON).
@Suite struct SyncClientFramesTests {
    /// The agent's shape: an actor on the loop owning the client.
    actor Device {
        nonisolated let loop: EventLoop
        nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }
        let client: SyncClient

        init(loop: EventLoop, base: String, name: String) {
            self.loop = loop
            client = SyncClient(http: HTTPClient(loop: loop, logger: Logger(label: "frames-test", level: .warning)),
                                base: base, token: nil, device: name)
        }

        var sendsFrames: Bool { client.sendsFrames }
        func modify(_ records: [Record]) async throws -> ModifyResponse { try await client.modify(records: records) }
        func changes(since: String?) async throws -> RecordPage { try await client.changes(since: since, wait: 0, limit: 100) }
        func record(at path: String) async throws -> Record? { try await client.record(at: path) }

        private var feed: FeedPages?

        /// Opens the streamed feed after `since`, as the agent does.
        func openFeed(since: String?, wait: Int) {
            let pages = FeedPages(since: since, inflight: nil)
            pages.transfer = Task { await self.client.streamFeed(wait: wait, limit: 100, into: pages) }
            feed = pages
        }

        func nextPage() async throws -> RecordPage {
            guard let feed else { throw CancellationError() }
            return try await feed.next()
        }

        /// Ends the feed and waits for its transfer to finish on the loop (the loop stops after the test).
        func closeFeed() async {
            feed?.cancel()
            await feed?.transfer?.value
        }
    }

    /// A server on 127.0.0.1 (in this process) and a loop for its clients; both stop when it goes.
    final class Rig {
        let directory: TemporaryDirectory
        let server: SyncServer
        let thread = LoopThread()

        init(_ label: String, configure: (inout ServerConfiguration) -> Void = { _ in }) throws {
            directory = TemporaryDirectory(label)
            var configuration = ServerConfiguration(listen: "127.0.0.1:0", dataDirectory: directory.child("data"))
            // The client's encoding against the server's routes, without tokens (the agents' tests use them).
            configuration.authentication = .none
            configure(&configuration)
            server = try SyncServer(configuration: configuration, logger: Logger(label: "frames-server", level: .warning))
            try server.start()
        }

        deinit {
            thread.stop()
            server.stop()
        }

        func device(_ name: String) -> Device { Device(loop: thread.loop, base: "http://127.0.0.1:\(server.boundPort)", name: name) }
    }

    static func file(_ path: String, _ content: [UInt8], device: String) -> Record {
        Record(path: path, type: "keep-both", data: Deflate.compress(content), size: Int64(content.count),
               sha256: Digest.sha256Hex(content), mode: 0o644, modifiedAt: 1, device: device)
    }

    @Test func batchesGoInFramesOnceTheServerHasAnsweredInThem() async throws {
        let rig = try Rig("sinki-frames-client")
        // The server and the loop stay until the test ends, not until the last use of `rig`.
        defer { withExtendedLifetime(rig) {} }
        let laptop = rig.device("laptop"), phone = rig.device("phone")

        // Before any page, JSON: the server might not know frames.
        #expect(await !laptop.sendsFrames)
        let first = Self.file("S/first.bin", Array(repeating: 7, count: 10_000), device: "laptop")
        #expect(try await laptop.modify([first]).results.map(\.status) == [.saved])
        let page = try await laptop.changes(since: nil)
        #expect(await laptop.sendsFrames)
        // Its own record comes without content (omitDataFrom), in frames or not.
        #expect(page.records.map(\.path) == ["S/first.bin"] && page.records[0].data == nil)

        let bytes = (0..<50_000).map { UInt8(truncatingIfNeeded: $0 * 7919 >> 3) }
        let second = Self.file("S/second.bin", bytes, device: "laptop")
        #expect(try await laptop.modify([second]).results.map(\.status) == [.saved])
        // Another device reads both, content and all, byte for byte as sent.
        let seen = try await phone.changes(since: nil)
        #expect(await phone.sendsFrames)
        #expect(seen.records.map(\.data) == [first.data, second.data])
        #expect(try Deflate.decompress(seen.records[1].data ?? [], expectedSize: bytes.count) == bytes)
        #expect(try await phone.record(at: "S/second.bin")?.data == second.data)
    }

    @Test func theStreamedFeedBringsEachCommitAndAsksAgainWhereAnAnswerEnded() async throws {
        // Each answer ends after its first page: every page after the first comes on an answer asked
        // for again from where the last one ended.
        let rig = try Rig("sinki-frames-stream") { $0.limits.maxStreamBytes = 1 }
        defer { withExtendedLifetime(rig) {} }
        let laptop = rig.device("laptop"), phone = rig.device("phone")
        let start = try await phone.changes(since: nil)
        #expect(await phone.sendsFrames)
        await phone.openFeed(since: start.token, wait: 30)
        var seen: [String] = []
        for round in 0..<4 {
            let records = (0..<3).map { Self.file("F/\(round)-\($0)", Array(repeating: UInt8(round), count: 2_000 * ($0 + 1)), device: "laptop") }
            #expect(try await laptop.modify(records).results.map(\.status) == [.saved, .saved, .saved])
            // Each commit's records, once, in order, content and all, however the answers fell.
            while seen.count < 3 * (round + 1) {
                let page = try await phone.nextPage()
                for record in page.records {
                    #expect(record.data == records.first { $0.path == record.path }?.data)
                    seen.append(record.path)
                }
            }
        }
        #expect(seen == (0..<4).flatMap { round in (0..<3).map { "F/\(round)-\($0)" } })
        // The feed read this way ends where the feed does.
        let rest = try await phone.changes(since: start.token)
        #expect(rest.records.map(\.path) == seen)
        await phone.closeFeed()
    }
}
