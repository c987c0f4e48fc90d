import Foundation
import SinkiRecord
@testable import SinkiServer
import SinkiTestSupport
import Testing

/// Requests a hostile client can send that two HTTP parsers would read two ways, or that route one way
/// and decode another (issue 24, items 3, 8 and 9; docs/security.md): each is answered with a problem
/// and its connection closed, before the token is looked at, and nothing is saved or minted. Sent on
/// raw sockets: an HTTP client would refuse to send most of them.
@Suite struct RequestHeadTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var head: String
        var body: String = ""
        var status: Int
        /// nil: libmicrohttpd refuses it itself, with no problem document.
        var code: String?
        var testDescription: String { name }
    }

    static let cases = [
        Case(name: "Content-Length beside Transfer-Encoding",
             head: "POST /v1/records/modify HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n",
             body: "2\r\n{}\r\n0\r\n\r\n", status: 400, code: "bad-framing"),
        Case(name: "two different Content-Lengths",
             head: "POST /v1/records/modify HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 40\r\n",
             body: "{}", status: 400, code: "bad-framing"),
        Case(name: "a Content-Length list that disagrees",
             head: "POST /v1/records/modify HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2, 3\r\n",
             body: "{}", status: 400, code: nil),
        Case(name: "Transfer-Encoding xchunked",
             head: "POST /v1/records/modify HTTP/1.1\r\nContent-Type: application/json\r\nTransfer-Encoding: xchunked\r\n",
             body: "2\r\n{}\r\n0\r\n\r\n", status: 501, code: "not-implemented"),
        Case(name: "Transfer-Encoding gzip, chunked",
             head: "POST /v1/records/modify HTTP/1.1\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\n",
             body: "2\r\n{}\r\n0\r\n\r\n", status: 501, code: "not-implemented"),
        Case(name: "a NUL after the route", head: "POST /v1/tokens%00 HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n",
             body: "{}", status: 400, code: "bad-target"),
        Case(name: "an encoded slash", head: "GET /v1%2frecords?limit=1 HTTP/1.1\r\n", status: 400, code: "bad-target"),
        Case(name: "a NUL and dot segments", head: "GET /v1/records%00/../../x HTTP/1.1\r\n", status: 400, code: "bad-target"),
        Case(name: "a dot segment", head: "GET /v1/./changes?wait=0 HTTP/1.1\r\n", status: 400, code: "bad-target"),
        Case(name: "an encoded dot segment", head: "GET /v1/%2e%2e/v1/changes HTTP/1.1\r\n", status: 400, code: "bad-target"),
        Case(name: "a request line of control bytes", head: "\u{01}\u{02}\u{03} /\u{04} HTTP/1.1\r\n", status: 400, code: "bad-target"),
    ]

    @Test(arguments: cases)
    func isRefusedAndItsConnectionClosed(_ item: Case) throws {
        let fixture = try ServerFixture.withAccounts()
        let token = try fixture.issue(user: "mallory")
        for authorized in [false, true] {
            let connection = try fixture.connect()
            let authorization = authorized ? "Authorization: Bearer \(token.secret)\r\n" : ""
            try connection.write(Array((item.head + "Host: localhost\r\n" + authorization + "\r\n" + item.body).utf8))
            let response = try connection.receive()
            #expect(response.status == item.status, "\(item.name), authorized \(authorized): \(response.text)")
            if let code = item.code {
                #expect(try response.problem().code == code, "\(item.name)")
                #expect(response.header("Connection")?.lowercased() == "close", "\(item.name)")
            }
            #expect(connection.isClosed(within: 5), "\(item.name): the connection stays open")
        }
        // Nothing was minted or saved by any of them.
        #expect(try fixture.server.store.tokens(user: "mallory").count == 1)
        let page = try fixture.request("GET", "/v1/changes?wait=0", token: token.secret)
        #expect(try page.page().records.isEmpty)
    }

    /// What the checks must let through: every route of the protocol, query arguments that encode a
    /// slash (record paths do), a chunked body, a Content-Length repeated with the same value.
    @Test func wellFormedRequestsStillPass() throws {
        let fixture = try ServerFixture.withAccounts()
        let token = try fixture.issue(user: "alice")
        let listed = try fixture.request("GET", "/v1/records?prefix=" + encoded("Saves/a b") + "&limit=5", token: token.secret)
        #expect(listed.status == 200, "\(listed.text)")
        let body = Array(#"{"records":[{"path":"Saves/a.txt","type":"default","device":"laptop","data":"eJwDAAAAAAE="}]}"#.utf8)
        let connection = try fixture.connect()
        try connection.send("POST", "/v1/records/modify", headers: [token.header, ("Content-Type", "application/json")], body: body, chunked: true)
        let saved = try connection.receive()
        #expect(saved.status == 200, "\(saved.text)")
        let twice = try fixture.connect()
        try twice.write(Array(("POST /v1/records/modify HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(token.secret)\r\n"
            + "Content-Type: application/json\r\nContent-Length: \(body.count)\r\nContent-Length: \(body.count)\r\n\r\n").utf8) + body)
        #expect(try twice.receive().status == 200)
    }

    @Test func theChecksAloneByTheTable() {
        #expect(RequestHead.targetProblem(method: "GET", rawTarget: "/v1/records?path=Saves%2Fa%20b") == nil)
        #expect(RequestHead.targetProblem(method: "GET", rawTarget: "/v1/uploads/abc") == nil)
        #expect(RequestHead.targetProblem(method: "get", rawTarget: "/v1/changes")?.code == "bad-target")
        #expect(RequestHead.targetProblem(method: "GET", rawTarget: "*")?.code == "bad-target")
        #expect(RequestHead.targetProblem(method: "GET", rawTarget: "/v1/records?path=a%00b") == nil, "left to the path rules")
        #expect(RequestHead.targetProblem(method: "GET", rawTarget: "/v1/records%00?path=a")?.code == "bad-target")
        #expect(RequestHead.targetProblem(method: "GET", rawTarget: "/v1/..")?.code == "bad-target")
        #expect(RequestHead.targetProblem(method: "GET", rawTarget: "/v1\\records")?.code == "bad-target")
        #expect(RequestHead.framingProblem(contentLengths: [], transferEncodings: []) == nil)
        #expect(RequestHead.framingProblem(contentLengths: ["7"], transferEncodings: []) == nil)
        #expect(RequestHead.framingProblem(contentLengths: ["7", "7"], transferEncodings: []) == nil)
        #expect(RequestHead.framingProblem(contentLengths: [], transferEncodings: ["Chunked"]) == nil)
        #expect(RequestHead.framingProblem(contentLengths: ["-1"], transferEncodings: [])?.code == "bad-framing")
        #expect(RequestHead.framingProblem(contentLengths: ["7"], transferEncodings: ["chunked"])?.code == "bad-framing")
        #expect(RequestHead.framingProblem(contentLengths: [], transferEncodings: ["chunked", "chunked"])?.code == "not-implemented")
    }
}
