import Foundation
@testable import SinkiServer
import SinkiTestSupport
import Testing

@Suite struct TokenFileTests {
    @Test func readsTokensSkippingCommentsAndBlankLines() throws {
        let text = """
            # sinki tokens: TOKEN USER DEVICE

            tok-1 alice laptop
            \ttok-2\talice   desktop\r
              # indented comment
            tok-3 bob phone
            """
        let tokens = try TokenFile.parse(text, file: "tokens")
        #expect(tokens == [
            "tok-1": ServerIdentity(user: "alice", device: "laptop"),
            "tok-2": ServerIdentity(user: "alice", device: "desktop"),
            "tok-3": ServerIdentity(user: "bob", device: "phone"),
        ])
    }

    @Test(arguments: [
        ("tok alice", "tokens:1: expected TOKEN USER DEVICE, found 2 fields"),
        ("# ok\ntok alice laptop extra", "tokens:2: expected TOKEN USER DEVICE, found 4 fields"),
        ("a u d\n\nb u d\na v e", "tokens:4: the token on this line is already given on line 1"),
        ("tok\u{7} alice laptop", "tokens:1: control character in \"tok\\u{7}\""),
    ])
    func aBadLineNamesTheFileAndLine(text: String, message: String) {
        #expect(throws: TokenFileError.self) { try TokenFile.parse(text, file: "tokens") }
        do {
            _ = try TokenFile.parse(text, file: "tokens")
        } catch {
            #expect(error.description == message)
        }
    }

    @Test func loadsAFileAndNamesOneItCannotRead() throws {
        let directory = TemporaryDirectory("sinki-tokens")
        let path = directory.child("tokens")
        try "t1 u d\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(try TokenFile.load(path: path) == ["t1": ServerIdentity(user: "u", device: "d")])
        do {
            _ = try TokenFile.load(path: directory.child("missing"))
            Issue.record("loaded a missing file")
        } catch {
            #expect(error.description == "\(directory.child("missing")): cannot read: No such file or directory")
        }
    }
}
