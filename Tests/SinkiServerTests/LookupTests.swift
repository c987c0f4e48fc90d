import Foundation
import SinkiRecord
@testable import SinkiServer
import SinkiTestSupport
import Testing

@Suite struct LookupTests {
    @Test func listsAPrefixWithOrWithoutData() throws {
        let fixture = try ServerFixture()
        let saved = try fixture.modify(["Games/slot 1/a.save", "Games/slot 1/b.save", "Games/slot 10/c.save", "Other/x"].map { fileRecord($0, $0) })
        let plain = try fixture.request("GET", "/v1/records?path=\(encoded("Games/slot 1"))").page()
        #expect(plain.records.map(\.path) == ["Games/slot 1/a.save", "Games/slot 1/b.save"])
        #expect(plain.records.allSatisfy { $0.data == nil && $0.changeTag > 0 })
        // The feed position before the listing: the last save's tag.
        #expect(plain.token.hasSuffix(".\(saved[3].record!.changeTag)") && !plain.more && plain.floor == 0)
        let withData = try fixture.request("GET", "/v1/records?path=Games&data=1").page()
        #expect(withData.records.count == 3)
        #expect(try withData.records.allSatisfy { try content(of: $0) == Array($0.path.utf8) })
        let all = try fixture.request("GET", "/v1/records").page()
        #expect(all.records.count == 4)
    }

    @Test func pagesContinueAfterAPath() throws {
        let fixture = try ServerFixture()
        _ = try fixture.modify((0..<7).map { fileRecord("R/\($0)", "x") })
        var after = ""
        var seen: [String] = []
        while true {
            let page = try fixture.request("GET", "/v1/records?path=R&limit=3&after=\(encoded(after))").page()
            seen += page.records.map(\.path)
            guard page.more, let last = page.records.last else { break }
            after = last.path
        }
        #expect(seen == (0..<7).map { "R/\($0)" })
    }

    @Test(arguments: ["..%2Fx", "%2Fetc", "a%2F%2Fb", "R%2F.", "R%2Fx%2F", "R%5Cx", "R%2Fa%00b"])
    func aBadPrefixIsRefused(path: String) throws {
        let fixture = try ServerFixture()
        let response = try fixture.request("GET", "/v1/records?path=\(path)")
        #expect(response.status == 400)
        #expect(try response.problem().code == "bad-path")
    }

    @Test(arguments: ["data=yes", "limit=0", "limit=x", "path=%FF"])
    func malformedArgumentsAreRefused(query: String) throws {
        let fixture = try ServerFixture()
        let response = try fixture.request("GET", "/v1/records?\(query)")
        #expect(response.status == 400)
        #expect(try response.problem().code == "bad-request")
    }
}
