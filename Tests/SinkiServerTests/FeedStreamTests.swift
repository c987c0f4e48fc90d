import Foundation
import SinkiRecord
@testable import SinkiServer
import SinkiSupport
import SinkiTestSupport
import Testing

/// The streamed feed (docs/protocol.md, "A feed that streams"): a long-poll in frames with `stream=1`
/// goes on after its first page with a page for each later commit, on the same answer, until its wait
/// is up, its bytes are sent, its token is revoked or the server stops; each ends the answer cleanly.
@Suite struct FeedStreamTests {
    static let acceptFrames = [("Accept", "application/vnd.sinki.records, application/json;q=0.5")]

    /// A streamed answer being read: its head, then pages as their chunks arrive.
    final class Reader {
        let connection: TestConnection
        let head: TestResponse
        private var stream = RecordPageStream()
        private var pages: [RecordPage] = []
        /// The last chunk came: the answer is complete.
        private(set) var ended = false

        init(_ connection: TestConnection, timeout: Double = 15) throws {
            self.connection = connection
            head = try connection.receiveHead(timeout: timeout)
        }

        /// The next page, reading chunks until one is whole; nil when the answer ends first.
        func page(timeout: Double = 15) throws -> RecordPage? {
            while pages.isEmpty && !ended {
                guard let chunk = try connection.receiveChunk(timeout: timeout) else {
                    try stream.finish()
                    ended = true
                    break
                }
                pages += try chunk.withUnsafeBytes { try stream.take($0) }
            }
            return pages.isEmpty ? nil : pages.removeFirst()
        }
    }

    static func open(_ fixture: ServerFixture, since: String, wait: Int, headers: [(String, String)] = []) throws -> TestConnection {
        let connection = try fixture.connect()
        try connection.send("GET", "/v1/changes?wait=\(wait)&stream=1&since=\(encoded(since))", headers: acceptFrames + headers)
        return connection
    }

    @Test func eachCommitComesAsAPageOnTheSameAnswer() throws {
        let fixture = try ServerFixture()
        let start = try fixture.changes()
        let connection = try Self.open(fixture, since: start.token, wait: 60)
        _ = try fixture.modify([fileRecord("S/one", "1")])
        let reader = try Reader(connection)
        #expect(reader.head.status == 200)
        #expect(reader.head.header("Transfer-Encoding") == "chunked")
        #expect(reader.head.header("Content-Type") == RecordFrames.mediaType)
        // A proxy that buffers (nginx) is told not to: each page must go through as it is written.
        #expect(reader.head.header("X-Accel-Buffering") == "no")
        let first = try #require(try reader.page())
        #expect(first.records.map(\.path) == ["S/one"] && !first.more)

        _ = try fixture.modify([fileRecord("S/two", "2")])
        let second = try #require(try reader.page())
        #expect(second.records.map(\.path) == ["S/two"])
        let content = randomBytes(20_000)
        _ = try fixture.modify([fileRecord("S/three", content), tombstone("S/one", baseTag: first.records[0].changeTag)])
        let third = try #require(try reader.page())
        #expect(third.records.map(\.path) == ["S/three", "S/one"])
        #expect(third.records[0].data == Deflate.compress(content) && third.records[1].deleted)
        // The pages follow each other as the feed does: the same records from the first page's token.
        let after = try fixture.changes(since: first.token)
        #expect(after.records.map(\.path) == ["S/two", "S/three", "S/one"] && after.token == third.token)
        // Nothing more committed: nothing more comes, and the answer stays open.
        #expect(!connection.isReadable(within: 0.3))
    }

    @Test func theAnswerEndsCleanlyWhenItsWaitIsUpAndTheConnectionServesOn() throws {
        let fixture = try ServerFixture()
        let start = try fixture.changes()
        let connection = try Self.open(fixture, since: start.token, wait: 1)
        _ = try fixture.modify([fileRecord("W/a", "a")])
        let reader = try Reader(connection)
        #expect(try reader.page()?.records.map(\.path) == ["W/a"])
        // The wait counts from the request: the last chunk comes within it and a little.
        #expect(try reader.page(timeout: 5) == nil && reader.ended)
        let next = try connection.request("GET", "/v1/changes?since=\(encoded(start.token))")
        #expect(next.status == 200)
        #expect(try next.page().records.map(\.path) == ["W/a"])
    }

    @Test func theAnswerEndsAfterThePageThatTakesItPastItsBytes() throws {
        let fixture = try ServerFixture { $0.limits.maxStreamBytes = 30_000 }
        let start = try fixture.changes()
        let connection = try Self.open(fixture, since: start.token, wait: 60)
        _ = try fixture.modify([fileRecord("B/1", randomBytes(12_000))])
        let reader = try Reader(connection)
        var paths: [String] = []
        var page = try reader.page()
        while let current = page {
            paths += current.records.map(\.path)
            if paths.count < 3 { _ = try fixture.modify([fileRecord("B/\(paths.count + 1)", randomBytes(12_000))]) }
            page = try reader.page(timeout: 5)
        }
        // 12 KB of content a page: the third takes it past 30,000 bytes, and the answer ends there.
        #expect(paths == ["B/1", "B/2", "B/3"])
        #expect(reader.ended)
    }

    @Test func aCatchUpStreamsPageAfterPageWithoutAsking() throws {
        let fixture = try ServerFixture()
        let start = try fixture.changes()
        for index in 0..<5 { _ = try fixture.modify([fileRecord("C/\(index)a", "a"), fileRecord("C/\(index)b", "b")]) }
        let connection = try fixture.connect()
        try connection.send("GET", "/v1/changes?wait=1&stream=1&limit=3&since=\(encoded(start.token))", headers: Self.acceptFrames)
        let reader = try Reader(connection)
        var pages: [RecordPage] = []
        while let page = try reader.page(timeout: 5) { pages.append(page) }
        #expect(pages.map(\.records.count) == [3, 3, 3, 1])
        #expect(pages.map(\.more) == [true, true, true, false])
        #expect(pages.flatMap(\.records).count == 10)
    }

    @Test func withoutFramesOrStreamALongPollAnswersOnePage() throws {
        let fixture = try ServerFixture()
        for (name, query, headers) in [("JSON", "wait=30&stream=1", [(String, String)]()), ("no stream=1", "wait=30", Self.acceptFrames)] {
            let start = try fixture.changes()
            let connection = try fixture.connect()
            try connection.send("GET", "/v1/changes?\(query)&since=\(encoded(start.token))", headers: headers)
            _ = try fixture.modify([fileRecord("J/\(name)", "x")])
            let response = try connection.receive()
            #expect(response.status == 200, "\(name)")
            #expect(response.header("Transfer-Encoding") == nil && response.header("Content-Length") != nil, "\(name)")
            let page = try RecordPage.parse(response.body, contentType: response.header("Content-Type"))
            #expect(page.records.map(\.path) == ["J/\(name)"], "\(name)")
        }
    }

    @Test func revokingItsTokenEndsAStreamAndTheNextAskIsRefused() throws {
        let fixture = try ServerFixture.withAccounts()
        let doomed = try fixture.issue(user: "alice", device: "phone")
        let other = try fixture.issue(user: "alice", device: "laptop")
        let start = try fixture.changes(token: doomed.secret)
        let connection = try Self.open(fixture, since: start.token, wait: 300, headers: [doomed.header])
        _ = try fixture.modify([fileRecord("R/a", "a")], token: other.secret)
        let reader = try Reader(connection)
        #expect(try reader.page()?.records.map(\.path) == ["R/a"])
        let revoked = try fixture.request("DELETE", Routes.tokens + "/" + doomed.id, token: doomed.secret)
        #expect(revoked.status == 204)
        #expect(try reader.page(timeout: 5) == nil && reader.ended)
        let again = try connection.request("GET", "/v1/changes?since=\(encoded(start.token))", headers: [doomed.header])
        #expect(again.status == 401)
    }

    /// The stop ends the stream itself: with a grace far longer than the test's deadline, a stream the
    /// stop did not end would hold it until the grace ran out and closed the connection.
    @Test func stoppingTheServerEndsAStream() throws {
        let fixture = try ServerFixture { $0.stopGraceSeconds = 600 }
        let start = try fixture.changes()
        let connection = try Self.open(fixture, since: start.token, wait: 300)
        _ = try fixture.modify([fileRecord("X/a", "a")])
        let reader = try Reader(connection)
        #expect(try reader.page()?.records.map(\.path) == ["X/a"])
        // Stopped beside the read, so a stream left open fails the read's deadline, not the grace's.
        let stopped = DispatchSemaphore(value: 0)
        let server = fixture.server
        DispatchQueue.global().async { server.stop(); stopped.signal() }
        #expect(try reader.page(timeout: 120) == nil && reader.ended)
        #expect(stopped.wait(timeout: .now() + 120) == .success)
    }
}
