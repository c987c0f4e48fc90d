import Testing
@testable import SinkiRecord

/// Inputs the fuzz targets (Fuzz/, docs/fuzzing.md) found breaking a parser, fed to the same functions.
/// Each is also in the target's seed corpus as `Fuzz/corpus/TARGET/regress-…`.
@Suite struct FuzzRegressionTests {
    /// record-path, `regress-joiner-after-slash` (`R/` then U+200D): a valid path whose `/` is followed by
    /// a joiner or a combining mark is one Character "/\u{200D}" to `String`, so `root` found no "/" and
    /// its force unwrap trapped; a hostile feed could end the agent with one record.
    @Test(arguments: ["R/\u{200D}", "SaveGames/\u{301}x", "SaveGames/link/\u{301}x", "SaveGames/a\u{301}/\u{301}b/\u{200D}"])
    func pathsSplitOnEverySlashByte(_ text: String) throws {
        let path = try RecordPath(validating: text)
        let components = text.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).map(Array.init)
        #expect(Array(path.root.utf8) == components[0])
        #expect(Array(path.name.utf8) == components.last)
        #expect(Array(path.relative.utf8) == Array(components.dropFirst().joined(separator: [UInt8(ascii: "/")])))
        #expect(path.relativeComponents.map { Array($0.utf8) } == Array(components.dropFirst()))
        #expect(path.depth == components.count - 1)
        if components.count > 2 {
            let parent = try #require(path.parent)
            #expect(Array(parent.string.utf8) == Array(components.dropLast().joined(separator: [UInt8(ascii: "/")])))
            #expect(path.isWithin(parent))
        } else {
            #expect(path.parent == nil)
        }
    }

    /// Two spellings of one name (NFC and NFD `café`) are two files on Linux: as record paths they are
    /// two paths, not one, and neither lies within the other's folder.
    @Test func canonicallyEqualSpellingsAreDifferentPaths() throws {
        let composed = try RecordPath(validating: "SaveGames/caf\u{E9}")
        let decomposed = try RecordPath(validating: "SaveGames/cafe\u{301}")
        #expect(composed.string == decomposed.string) // String itself says equal…
        #expect(composed != decomposed) // …the paths do not.
        #expect(Set([composed, decomposed]).count == 2)
        #expect(!(try RecordPath(validating: "SaveGames/cafe\u{301}/x")).isWithin(composed))
        #expect(composed < decomposed || decomposed < composed)
    }

    /// record-json, `regress-duplicate-key.json`: an object with a repeated key was unequal to itself
    /// (each member was compared with the other object's last one), so a document did not read back
    /// equal to what it was.
    @Test func objectWithARepeatedKeyEqualsItself() throws {
        let text = #"{"code": "oblems/bad-json", "title": "t", "code": "bad-json"}"#
        let value = try JSONValue.parse(Array(text.utf8))
        #expect(value == value)
        #expect(value["code"] == .string("bad-json"))
        var writer = JSONWriter()
        value.write(to: &writer)
        #expect(try JSONValue.parse(writer.bytes) == value)
        #expect(value == (try JSONValue.parse(Array(#"{"title": "t", "code": "bad-json"}"#.utf8))))
    }

    /// record-json, `regress-infinite-number.json` (`11e308`): read as infinity, which the writer can only
    /// put as null; now refused like an integer out of range.
    @Test(arguments: ["11e308", "-1e999", #"{"path":"A/b","extra":1e400}"#])
    func numbersBeyondDoubleAreRefused(_ text: String) {
        #expect(throws: JSONError.self) { try JSONValue.parse(Array(text.utf8)) }
        #expect(throws: JSONError.self) { try RecordPage.parse(Array(#"{"records":[],"x":"#.utf8) + Array(text.utf8) + [UInt8(ascii: "}")]) }
    }

    /// record-json, `regress-deep-nesting.json` (600 levels in the corpus; here 200,000, which overflowed
    /// the stack under the fuzzer's sanitizer and in a release build alike): reading recursed once per
    /// level of an unknown field's value, so a feed page or a modify body of `[[[[…` ended the process.
    @Test func deepNestingIsATypedError() throws {
        let deep = Array(#"{"records":[{"path":"A/b","x":"#.utf8) + [UInt8](repeating: UInt8(ascii: "["), count: 200_000) + Array("}]}".utf8)
        #expect(throws: JSONError.self) { try RecordPage.parse(deep) }
        #expect(throws: JSONError.self) { try ModifyRequest.parse(deep) }
        #expect(throws: JSONError.self) { try JSONValue.parse([UInt8](repeating: UInt8(ascii: "{"), count: 200_000)) }
        do {
            _ = try JSONValue.parse([UInt8](repeating: UInt8(ascii: "["), count: 200_000))
        } catch let error as JSONError {
            #expect(error.message == "nested deeper than \(JSONReader.maxDepth) levels")
        }
        // Nesting up to the limit still reads.
        let limit = JSONReader.maxDepth
        let nested = [UInt8](repeating: UInt8(ascii: "["), count: limit) + [UInt8](repeating: UInt8(ascii: "]"), count: limit)
        #expect(throws: Never.self) { try JSONValue.parse(nested) }
    }

    /// tus-headers, `regress-http-date-year-overflow` (`Sun, 06 Nov 19294 08:49:37 GMT`): the year went
    /// through unchecked arithmetic into nanoseconds and trapped on overflow.
    @Test(arguments: ["Sun, 06 Nov 19294 08:49:37 GMT", "Sun, 06 Nov -2147483648 08:49:37 GMT", "Sun, 06 Nov 2263 00:00:00 GMT",
                      "Sun, +6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 8:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT"])
    func httpDatesOutOfRangeAreRefused(_ text: String) {
        #expect(HTTPDate.parse(text) == nil)
    }

    @Test func httpDatesReadBack() throws {
        let parsed = try #require(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT"))
        #expect(parsed == 784_111_777_000_000_000)
        #expect(HTTPDate.format(parsed) == "Sun, 06 Nov 1994 08:49:37 GMT")
        // Nanoseconds since the epoch reach from 1677 to 2262.
        let early = try #require(HTTPDate.parse("Fri, 01 Jan 1700 00:00:00 GMT"))
        #expect(HTTPDate.format(early) == "Fri, 01 Jan 1700 00:00:00 GMT")
        #expect(HTTPDate.parse("Fri, 11 Apr 2262 23:47:16 GMT") != nil)
        #expect(HTTPDate.parse("Mon, 01 Jan 0999 00:00:00 GMT") == nil)
    }
}
