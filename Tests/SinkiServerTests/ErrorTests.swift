import Foundation
import SinkiRecord
@testable import SinkiServer
@testable import SinkiSupport
import SinkiTestSupport
import Testing

@Suite struct ErrorTests {
    @Test func aFullDiskAnswers507DiskFullWithoutTheServersPaths() throws {
        // What a write on a full disk throws, in the server's stores and uploads: a save that cannot be
        // written now, which a client keeps and sends again later, not a server that failed.
        let errors: [any Error] = [SystemError("write", errno: ENOSPC, path: "/srv/sinki/uploads/0123.bin"),
                                   SystemError("write", errno: EDQUOT, path: "/srv/sinki/chunks/u/packs/p"),
                                   SQLiteError(code: 13, message: "database or disk is full", sql: "INSERT", path: "/srv/sinki/records.db")]
        for error in errors {
            let problem = try #require(HTTPServer.diskFull(error, requestID: "r1"), "\(error)")
            #expect(problem.status == 507 && problem.code == "disk-full")
            #expect(!problem.detail.contains("/srv"), "the detail names no server path: \(problem.detail)")
            #expect(problem.detail.contains("r1"))
        }
        #expect(HTTPServer.diskFull(SystemError("write", errno: EIO), requestID: "r1") == nil)
        #expect(HTTPServer.diskFull(SQLiteError(code: 11, message: "malformed", sql: nil, path: "x"), requestID: "r1") == nil)
    }

    @Test func unknownRoutesAnswer404AsProblems() throws {
        let fixture = try ServerFixture()
        for target in ["/", "/v1", "/v1/nothing", "/v1/records/modify/extra", "/v2/changes"] {
            let response = try fixture.request("GET", target)
            #expect(response.status == 404, "\(target)")
            #expect(try response.problem().code == "not-found")
        }
    }

    @Test func knownRoutesWithTheWrongMethodAnswer405() throws {
        let fixture = try ServerFixture()
        let cases = [("GET", "/v1/records/modify", "POST"), ("PUT", "/v1/records/modify", "POST"),
                     ("POST", "/v1/changes", "GET"), ("DELETE", "/v1/records", "GET")]
        for (method, target, allowed) in cases {
            let response = try fixture.request(method, target)
            #expect(response.status == 405, "\(method) \(target)")
            #expect(response.header("Allow") == allowed)
            #expect(try response.problem().code == "method-not-allowed")
        }
    }

    @Test func aProblemHasEveryFieldAndTheRequestIdOfItsHeader() throws {
        let fixture = try ServerFixture()
        let response = try fixture.request("GET", "/v1/changes?since=junk")
        #expect(response.header("Content-Type") == "application/problem+json")
        let json = try JSONValue.parse(response.body)
        #expect(json["type"] == .string("https://sinki.dev/problems/bad-token"))
        #expect(json["title"] == .string(ProblemKind.badToken.title))
        #expect(json["status"] == .int(400))
        #expect(json["code"] == .string("bad-token"))
        if case let .string(detail)? = json["detail"] { #expect(detail.contains("junk")) } else { Issue.record("no detail") }
        let requestID = try #require(response.header("X-Request-Id"))
        #expect(requestID.count == 16)
        #expect(json["requestId"] == .string(requestID))
    }

    @Test func everyResponseCarriesARequestId() throws {
        let fixture = try ServerFixture()
        let one = try fixture.request("GET", "/v1/changes")
        let two = try fixture.request("GET", "/v1/changes")
        #expect(one.status == 200)
        let first = try #require(one.header("X-Request-Id"))
        #expect(first != two.header("X-Request-Id"))
        // A sane id from the client is kept, so one id follows a change from agent to server log.
        let echoed = try fixture.request("GET", "/v1/nothing", headers: [("X-Request-Id", "agent-42.retry_1")])
        #expect(echoed.header("X-Request-Id") == "agent-42.retry_1")
        #expect(try echoed.problem().requestId == "agent-42.retry_1")
        let replaced = try fixture.request("GET", "/v1/changes", headers: [("X-Request-Id", "has spaces; and more")])
        #expect(replaced.header("X-Request-Id")?.count == 16)
    }

    @Test func oneConnectionServesManyRequests() throws {
        let fixture = try ServerFixture()
        let connection = try fixture.connect()
        for index in 0..<5 {
            #expect(try connection.request("GET", "/v1/nowhere").status == 404)
            let saved = try connection.request("POST", "/v1/records/modify", headers: [("Content-Type", "application/json")],
                                               body: ModifyRequest(records: [fileRecord("K/\(index)", "x")]).jsonBytes)
            #expect(try saved.modifyResults().map(\.status) == [.saved])
        }
        #expect(try connection.request("GET", "/v1/changes").page().records.count == 5)
    }
}
