import Testing
@testable import SinkiRecord

/// The record's `xattrs` field (issue 25, item 2): an object of name to base64 value, absent when there
/// are none, names in the `user.` namespace, within the bounds.
@Suite struct ExtendedAttributesTests {
    @Test func attributesRoundTripAndAreLeftOutWhenNone() throws {
        var record = Record(path: "A/f", size: 1, sha256: "ab")
        #expect(!String(decoding: record.jsonBytes(), as: UTF8.self).contains("xattrs"))
        record.xattrs = ExtendedAttributes([.init(name: "user.b", value: [0, 255]), .init(name: "user.a", value: Array("1".utf8))])
        #expect(record.xattrs.names == ["user.a", "user.b"])
        let json = String(decoding: record.jsonBytes(), as: UTF8.self)
        #expect(json.contains(#""xattrs":{"user.a":"MQ==","user.b":"AP8="}"#))
        var reader = JSONReader(record.jsonBytes())
        #expect(try Record.read(from: &reader) == record)
        #expect(ExtendedAttributes(encoded: record.xattrs.encoded) == record.xattrs)
        #expect(ExtendedAttributes(encoded: [1, 2, 3]) == nil)
    }

    @Test(arguments: [
        (#"{"path":"A/b","xattrs":{"trusted.x":"AA=="}}"#, "not in the user. namespace"),
        (#"{"path":"A/b","xattrs":{"user.":"AA=="}}"#, "not in the user. namespace"),
        (#"{"path":"A/b","xattrs":{"user.a":"AA==","user.a":"AA=="}}"#, "appears twice"),
        (#"{"path":"A/b","xattrs":{"user.\#(String(repeating: "n", count: 251))":"AA=="}}"#, "longer than 255 bytes"),
        (#"{"path":"A/b","xattrs":{"user.big":"\#(String(repeating: "A", count: 87_384))"}}"#, "more than 65536 bytes"),
    ])
    func attributesPastTheBoundsAreRefusedNamingTheField(text: String, why: String) {
        var reader = JSONReader(Array(text.utf8))
        #expect {
            try Record.read(from: &reader)
        } throws: { error in
            guard let error = error as? RecordFieldError else { return false }
            return error.field == "xattrs" && error.message.contains(why)
        }
    }

    @Test func aSetPastTheCountOrTheTotalIsRefused() {
        let many = (0...ExtendedAttributes.Limits.count).map { "\"user.\($0)\":\"AA==\"" }.joined(separator: ",")
        var reader = JSONReader(Array(#"{"path":"A/b","xattrs":{\#(many)}}"#.utf8))
        #expect(throws: RecordFieldError.self) { try Record.read(from: &reader) }
        let value = String(repeating: "A", count: 87_380)  // 65,535 bytes each
        let heavy = (0..<3).map { "\"user.\($0)\":\"\(value)\"" }.joined(separator: ",")
        reader = JSONReader(Array(#"{"path":"A/b","xattrs":{\#(heavy)}}"#.utf8))
        #expect(throws: RecordFieldError.self) { try Record.read(from: &reader) }
        let set = ExtendedAttributes((0..<3).map { .init(name: "user.\($0)", value: [UInt8](repeating: 1, count: 65_535)) })
        #expect(set.problem?.contains("more than 131072") == true)
    }
}
