import Foundation
import SinkiRecord
@testable import SinkiServer
import SinkiSupport
import SinkiTestSupport
import Testing

@Suite struct ChangesTests {
    @Test func anEmptyFeedAnswersAStartToken() throws {
        let fixture = try ServerFixture()
        let page = try fixture.changes()
        #expect(page.records.isEmpty && !page.more)
        #expect(page.token == "\(fixture.server.store.storeID).0")
        // Resuming from it, with nothing new, keeps the token.
        #expect(try fixture.changes(since: page.token).token == page.token)
    }

    @Test func theFeedCarriesTombstonesAndLatestVersionsOnly() throws {
        let fixture = try ServerFixture()
        let saved = try fixture.modify([fileRecord("F/a", "a1"), fileRecord("F/b", "b1")])
        let start = try fixture.changes()
        #expect(start.records.map(\.path) == ["F/a", "F/b"])
        _ = try fixture.modify([tombstone("F/a", baseTag: saved[0].record!.changeTag), fileRecord("F/b", "b2", baseTag: saved[1].record!.changeTag)])
        let next = try fixture.changes(since: start.token)
        #expect(next.records.map(\.path) == ["F/a", "F/b"])
        #expect(next.records[0].deleted && next.records[0].data == nil)
        #expect(try content(of: next.records[1]) == Array("b2".utf8))
        // From the start again: each path once, at its latest version.
        let whole = try fixture.changes()
        #expect(whole.records.map(\.changeTag) == next.records.map(\.changeTag))
    }

    @Test func pagesSayMoreAndTheirTokensResumeExactly() throws {
        let fixture = try ServerFixture()
        let records = (0..<25).map { fileRecord("P/\($0)", "content \($0)") }
        _ = try fixture.modify(records)
        var token: String?
        var pages: [[String]] = []
        var mores: [Bool] = []
        repeat {
            let page = try fixture.changes(since: token, limit: 10)
            pages.append(page.records.map(\.path))
            mores.append(page.more)
            token = page.token
        } while mores.last == true
        #expect(pages.map(\.count) == [10, 10, 5])
        #expect(mores == [true, true, false])
        #expect(pages.flatMap { $0 } == records.map(\.path))
        // Saves after the last page come next, and only they.
        _ = try fixture.modify([fileRecord("P/late", "late")])
        #expect(try fixture.changes(since: token).records.map(\.path) == ["P/late"])
    }

    @Test func pagesStopPastTheDataLimit() throws {
        let fixture = try ServerFixture { $0.limits.maxPageDataBytes = 10_000 }
        _ = try fixture.modify((0..<10).map { fileRecord("D/\($0)", randomBytes(4_000)) })
        let page = try fixture.changes()
        #expect(page.records.count == 3)
        #expect(page.more)
        #expect(try fixture.changes(since: page.token, limit: 1000).records.count == 3)
    }

    @Test(arguments: ["garbage", "nodot", ".5", "abc.-1", "abc.x", "abc.", "0123456789abcdef.12"])
    func tokensNotFromThisStoreAreRefused(token: String) throws {
        let fixture = try ServerFixture()
        let response = try fixture.request("GET", changesTarget(since: token))
        #expect(response.status == 400)
        #expect(try response.problem().code == "bad-token")
    }

    @Test func aTokenFromAnotherServersStoreIsRefused() throws {
        let one = try ServerFixture()
        let two = try ServerFixture()
        _ = try one.modify([fileRecord("T/x", "x")])
        let token = try one.changes().token
        let response = try two.request("GET", changesTarget(since: token))
        #expect(response.status == 400)
        let problem = try response.problem()
        #expect(problem.code == "bad-token")
        #expect(problem.detail.contains("another store"))
    }

    @Test(arguments: ["wait=-1", "wait=301", "wait=soon", "limit=0", "limit=10001", "limit=ten", "wait=1.5"])
    func malformedArgumentsAreRefused(query: String) throws {
        let fixture = try ServerFixture()
        let response = try fixture.request("GET", "/v1/changes?\(query)")
        #expect(response.status == 400)
        #expect(try response.problem().code == "bad-request")
    }
}
