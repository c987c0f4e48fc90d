import Foundation
import SinkiRecord
@testable import SinkiServer
import SinkiSupport
import SinkiTestSupport
import Synchronization
import Testing

/// Several `sinkid serve` on one PostgreSQL database and one upload folder (issue 13): a save through
/// one server wakes the long-polls parked on another at once (`NOTIFY`, heard by `PGChangeSignal`),
/// and an upload begun through one is finished through the other.
@Suite struct CrossServerTests {
    let database: PostgresDatabase
    let shared = TemporaryDirectory("sinki-cross-server")

    init() throws { database = try PostgresCluster.shared().createDatabase() }

    func server() throws -> ServerFixture {
        let folder = shared.child("uploads")
        return try ServerFixture(tokens: [:], store: try PostgresStore(url: database.url, connections: 3)) { $0.uploadsDirectory = folder }
    }

    @Test func aSaveThroughOneServerWakesALongPollOnTheOtherAtOnce() throws {
        let one = try server(), two = try server()
        let alice = try one.issue(user: "alice")
        let start = try two.changes(token: alice.secret)
        var wakes: [Double] = []
        var since = start.token
        for round in 0..<5 {
            let waiter = try two.connect()
            try waiter.send("GET", changesTarget(since: since, wait: 30), headers: [alice.header])
            try waitUntilSync("the long-poll to park on the second server") { two.server.waitingLongPolls == 1 }
            let began = Date()
            let saved = try one.modify([fileRecord("P/f\(round)", "round \(round)")], token: alice.secret)
            #expect(saved.map(\.status) == [.saved])
            let page = try waiter.receive(timeout: 10).page()
            wakes.append(Date().timeIntervalSince(began))
            #expect(page.records.map(\.path) == ["P/f\(round)"])
            since = page.token
        }
        // Heard through NOTIFY, not the one-second fallback look.
        let slowest = wakes.max() ?? 0
        #expect(slowest < 0.5, "wake-ups took \(wakes.map { Int($0 * 1000) }) ms")
        print("cross-server wake-ups (ms): \(wakes.map { Int($0 * 1000) })")
    }

    @Test func concurrentWritersThroughTwoServersNeverMakeAReaderMissAChange() throws {
        let one = try server(), two = try server()
        let alice = try one.issue(user: "alice")
        // Four writers, two through each server, while a reader follows the feed through the first: a
        // tag committed below one the reader has passed would never reach it.
        let writers = 4, batches = 25, perBatch = 4
        let done = Atomic<Int>(0)
        let seen = Mutex<(paths: Set<String>, last: Int64, backwards: Int)>(([], 0, 0))
        let ports = [one.port, two.port], auth = alice.header, secret = alice.secret
        DispatchQueue.concurrentPerform(iterations: writers + 1) { worker in
            if worker == writers {
                var since: String?
                var finalPass = false
                let deadline = Date().addingTimeInterval(120)
                while Date() < deadline {
                    guard let page = try? TestConnection(port: ports[0]).request("GET", changesTarget(since: since, wait: nil, limit: 50),
                                                                                 headers: [auth]).page() else { continue }
                    seen.withLock { state in
                        for record in page.records {
                            if record.changeTag <= state.last { state.backwards += 1 }
                            state.last = record.changeTag
                            state.paths.insert(record.path)
                        }
                    }
                    since = page.token
                    if page.more || !page.records.isEmpty { continue }
                    if finalPass { return }
                    if done.load(ordering: .acquiring) == writers { finalPass = true }
                }
                return
            }
            for batch in 0..<batches {
                let records = (0..<perBatch).map { fileRecord("W\(worker)/\(batch)/\($0)", "\(worker)") }
                _ = try? TestConnection(port: ports[worker % 2]).request(
                    "POST", Routes.modify, headers: [("Content-Type", "application/json"), ("Authorization", "Bearer \(secret)")],
                    body: ModifyRequest(records: records).jsonBytes)
            }
            done.add(1, ordering: .releasing)
        }
        let state = seen.withLock { $0 }
        #expect(state.backwards == 0)
        #expect(state.paths.count == writers * batches * perBatch)
    }

    @Test func anUploadBegunThroughOneServerIsFinishedThroughTheOther() throws {
        let one = try server(), two = try server()
        let alice = try one.issue(user: "alice")
        let bytes = randomBytes(300_000)
        let tus = [TusFixture.version], chunk = [TusFixture.version, TusFixture.chunk]
        let created = try one.request("POST", "/v1/uploads/", token: alice.secret, headers: tus + [("Upload-Length", String(bytes.count))])
        #expect(created.status == 201)
        let id = String(try #require(created.header("Location")).split(separator: "/").last!)
        #expect(try one.request("PATCH", "/v1/uploads/\(id)", token: alice.secret, headers: chunk + [("Upload-Offset", "0")],
                                body: Array(bytes[0..<120_000])).status == 204)
        // The same token works on the other server (one store of accounts), and the upload goes on there.
        #expect(try two.request("HEAD", "/v1/uploads/\(id)", token: alice.secret, headers: tus).header("Upload-Offset") == "120000")
        let rest = try two.request("PATCH", "/v1/uploads/\(id)", token: alice.secret, headers: chunk + [("Upload-Offset", "120000")],
                                   body: Array(bytes[120_000...]))
        #expect(rest.status == 204)
        // A record naming it, saved through the first server, is served through the second.
        var record = Record(path: "P/big.bin", type: "keep-both", size: Int64(bytes.count), sha256: Digest.sha256Hex(bytes), device: "laptop")
        record.asset = Asset(id: id, size: Int64(bytes.count), sha256: record.sha256)
        #expect(try one.modify([record], token: alice.secret).map(\.status) == [.saved])
        #expect(try two.request("GET", Routes.assets + id, token: alice.secret).body == bytes)
    }
}
