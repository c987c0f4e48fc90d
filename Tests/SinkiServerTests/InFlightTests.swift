import Foundation
import SinkiRecord
@testable import SinkiServer
import SinkiSupport
import SinkiTestSupport
import Testing

/// `POST /v1/inflight` and the in-flight news of `GET /v1/changes?inflight=N` (issue 22, item 2): what
/// one device announces reaches the user's other devices, and a parked long-poll answers for it; a
/// device is not told of its own; a token narrowed to a prefix hears only of its prefix; a save ends the
/// session; announcements must follow on; other users hear nothing.
@Suite struct InFlightTests {
    static let session = String(repeating: "ab", count: 16)

    static func chunk(_ seed: Int, size: Int64 = 1000) -> ChunkRef {
        ChunkRef(sha256: Digest.sha256Hex(Array("chunk \(seed)".utf8)), size: size)
    }

    static func announce(_ fixture: ServerFixture, _ token: IssuedToken, path: String = "S/big.bin", session: String = session, index: Int,
                         chunks: [ChunkRef], size: Int64 = 10_000) throws -> TestResponse {
        let body = InFlightAnnouncement(path: path, session: session, size: size, index: index, chunks: chunks).jsonBytes
        return try fixture.request("POST", Routes.inflight, token: token.secret, headers: [("Content-Type", "application/json")], body: body)
    }

    static func news(_ fixture: ServerFixture, _ token: IssuedToken, after: Int64, wait: Int = 0) throws -> InFlightNews? {
        try fixture.request("GET", Routes.changes + "?wait=\(wait)&inflight=\(after)", token: token.secret).page().inflight
    }

    @Test func announcedChunksReachTheOtherDevicesAndEndWithTheSave() throws {
        let fixture = try ServerFixture.withAccounts()
        let laptop = try fixture.issue(user: "alice", device: "laptop")
        let desktop = try fixture.issue(user: "alice", device: "desktop")
        let bob = try fixture.issue(user: "bob", device: "laptop")
        #expect(try Self.news(fixture, desktop, after: 0) == nil, "nothing in flight, nothing to say")

        #expect(try Self.announce(fixture, laptop, index: 0, chunks: [Self.chunk(0), Self.chunk(1)]).status == 204)
        let first = try #require(try Self.news(fixture, desktop, after: 0))
        #expect(first.files == [InFlightNews.File(path: "S/big.bin", session: Self.session, device: "laptop", size: 10_000, index: 0,
                                                  chunks: [Self.chunk(0), Self.chunk(1)])])
        // The sender is not told of its own file; another user hears of nothing.
        #expect(try Self.news(fixture, laptop, after: 0)?.files.isEmpty ?? true)
        #expect(try Self.news(fixture, bob, after: 0) == nil)

        // A long-poll parked from that position answers when more is announced, with only what is new.
        let parked = try fixture.connect()
        try parked.write(Array("GET \(Routes.changes)?wait=30&inflight=\(first.position) HTTP/1.1\r\nHost: x\r\n\(desktop.header.0): \(desktop.header.1)\r\n\r\n".utf8))
        #expect(!parked.isReadable(within: 0.3), "the poll answered with nothing new")
        // A retransmission of what the session announced already is taken; only the tail is new.
        #expect(try Self.announce(fixture, laptop, index: 1, chunks: [Self.chunk(1), Self.chunk(2)]).status == 204)
        let second = try #require(try parked.receive().page().inflight)
        #expect(second.files.map(\.index) == [2] && second.files.first?.chunks == [Self.chunk(2)])
        #expect(second.position > first.position)

        // A gap is refused: the sender announces from index 0 again.
        let gap = try Self.announce(fixture, laptop, index: 7, chunks: [Self.chunk(7)])
        let gapCode = try gap.problem().code
        #expect(gap.status == 409 && gapCode == ProblemKind.inflightGap.code)
        let unknown = try Self.announce(fixture, laptop, session: String(repeating: "cd", count: 16), index: 3, chunks: [Self.chunk(3)])
        #expect(unknown.status == 409)

        // The record's save ends the session: the news says so, once.
        let saved = try fixture.modify([fileRecord("S/big.bin", "whatever it became")], token: laptop.secret)
        #expect(saved.first?.status == .saved)
        let ended = try #require(try Self.news(fixture, desktop, after: second.position))
        #expect(ended.files.isEmpty && ended.ended == [Self.session])
        #expect(try Self.news(fixture, desktop, after: ended.position) == nil)
        // A reader that joined late hears of nothing in flight.
        #expect(try Self.news(fixture, desktop, after: 0)?.files.isEmpty == true)

        // A sender that gives a session up ends it; an end naming another session leaves it be.
        let next = String(repeating: "ef", count: 16)
        #expect(try Self.announce(fixture, laptop, session: next, index: 0, chunks: [Self.chunk(8)]).status == 204)
        let before = try #require(try Self.news(fixture, desktop, after: ended.position))
        #expect(before.files.map(\.session) == [next])
        for session in [Self.session, next] {
            var end = InFlightAnnouncement(path: "S/big.bin", session: session, size: 0, index: 0, chunks: [])
            end.end = true
            let response = try fixture.request("POST", Routes.inflight, token: laptop.secret, headers: [("Content-Type", "application/json")],
                                               body: end.jsonBytes)
            #expect(response.status == 204)
        }
        let givenUp = try #require(try Self.news(fixture, desktop, after: before.position))
        #expect(givenUp.files.isEmpty && givenUp.ended.isEmpty && givenUp.abandoned == [next])
    }

    @Test func aNarrowedTokenHearsOnlyOfItsPrefixAndCannotAnnounceOutsideIt() throws {
        let fixture = try ServerFixture.withAccounts()
        let laptop = try fixture.issue(user: "alice", device: "laptop")
        let narrow = try fixture.issue(user: "alice", device: "phone", scope: TokenScope(prefix: "S/photos"))
        let reader = try fixture.issue(user: "alice", device: "tv", scope: TokenScope(readOnly: true))
        #expect(try Self.announce(fixture, laptop, path: "S/secret.bin", index: 0, chunks: [Self.chunk(0)]).status == 204)
        #expect(try Self.announce(fixture, laptop, path: "S/photos/a.raw", session: String(repeating: "01", count: 16), index: 0,
                                  chunks: [Self.chunk(1)]).status == 204)
        let news = try #require(try Self.news(fixture, narrow, after: 0))
        #expect(news.files.map(\.path) == ["S/photos/a.raw"])
        // Outside its prefix a narrowed token may not announce; a read-only token announces nothing.
        #expect(try Self.announce(fixture, narrow, path: "S/other.bin", session: String(repeating: "02", count: 16), index: 0,
                                  chunks: [Self.chunk(2)]).status == 403)
        #expect(try Self.announce(fixture, reader, path: "S/tv.bin", session: String(repeating: "03", count: 16), index: 0,
                                  chunks: [Self.chunk(3)]).status == 403)
        // The read-only token still hears of both.
        #expect(try Self.news(fixture, reader, after: 0)?.files.map(\.path) == ["S/photos/a.raw", "S/secret.bin"])
    }

    @Test func badAnnouncementsAreRefusedNamingTheField() throws {
        let fixture = try ServerFixture.withAccounts()
        let laptop = try fixture.issue(user: "alice")
        let cases: [(InFlightAnnouncement, String)] = [
            (InFlightAnnouncement(path: "S/x", session: "short", size: 1, index: 0, chunks: [Self.chunk(0)]), "session"),
            (InFlightAnnouncement(path: "/etc/passwd", session: Self.session, size: 1, index: 0, chunks: [Self.chunk(0)]), "path"),
            (InFlightAnnouncement(path: "S/../x", session: Self.session, size: 1, index: 0, chunks: [Self.chunk(0)]), "path"),
            (InFlightAnnouncement(path: "S/x", session: Self.session, size: 1, index: 0, chunks: [ChunkRef(sha256: "zz", size: 1)]), "chunks"),
            (InFlightAnnouncement(path: "S/x", session: Self.session, size: 1, index: 0, chunks: [Self.chunk(0, size: 64 << 20)]), "chunks"),
        ]
        for (announcement, field) in cases {
            let response = try fixture.request("POST", Routes.inflight, token: laptop.secret, headers: [("Content-Type", "application/json")],
                                               body: announcement.jsonBytes)
            let named = try response.problem().field
            #expect(response.status == 400 && named == field, "\(announcement): \(response.text)")
        }
        let garbled = try fixture.request("POST", Routes.inflight, token: laptop.secret, headers: [("Content-Type", "application/json")],
                                          body: Array("{\"path\": 1}".utf8))
        let garbledCode = try garbled.problem().code
        #expect(garbled.status == 400 && garbledCode == ProblemKind.badJSON.code)
    }

    @Test func aUserHoldsABoundedNumberOfFilesInFlight() throws {
        let board = InFlightBoard(limits: InFlightBoard.Limits(filesPerUser: 2, chunksPerFile: 3, endedPerUser: 4, idleNanoseconds: 1_000))
        func session(_ n: Int) -> String { String(repeating: String(format: "%02x", n), count: 16) }
        try board.announce(user: "u", device: "d", InFlightAnnouncement(path: "S/a", session: session(1), size: 1, index: 0, chunks: [Self.chunk(1)]), now: 0)
        try board.announce(user: "u", device: "d", InFlightAnnouncement(path: "S/b", session: session(2), size: 1, index: 0, chunks: [Self.chunk(2)]), now: 0)
        #expect(throws: Problem.self) {
            try board.announce(user: "u", device: "d", InFlightAnnouncement(path: "S/c", session: session(3), size: 1, index: 0, chunks: [Self.chunk(3)]), now: 0)
        }
        #expect(throws: Problem.self) {
            try board.announce(user: "u", device: "d", InFlightAnnouncement(path: "S/a", session: session(1), size: 1, index: 1,
                                                                             chunks: (4...6).map { Self.chunk($0) }), now: 0)
        }
        // Idle past the limit, both are given up: room again, and readers are told they ended.
        try board.announce(user: "u", device: "d", InFlightAnnouncement(path: "S/c", session: session(3), size: 1, index: 0, chunks: [Self.chunk(3)]), now: 5_000)
        let news = try #require(board.news(user: "u", after: 0, reader: "other", within: nil, now: 5_000))
        #expect(news.files.map(\.path) == ["S/c"] && news.ended.isEmpty && Set(news.abandoned) == [session(1), session(2)])
    }
}
