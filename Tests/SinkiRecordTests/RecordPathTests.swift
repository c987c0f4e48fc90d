import Testing
@testable import SinkiRecord

@Suite struct RecordPathTests {
    @Test(arguments: ["SaveGames/a", "SaveGames/slot 1/plåyer.save", "R/.hidden", "R/a..b", "R/...", "R/日本語/ファイル"])
    func acceptsOrdinaryPaths(_ path: String) throws {
        let checked = try RecordPath(validating: path)
        #expect(checked.string == path)
    }

    @Test(arguments: [
        ("", PathError.empty),
        ("/etc/x", .absolute("/etc/x")),
        ("../x", .dotComponent("../x")),
        ("R/a/../../x", .dotComponent("R/a/../../x")),
        ("R/./x", .dotComponent("R/./x")),
        ("R/x/", .emptyComponent("R/x/")),
        ("R//x", .emptyComponent("R//x")),
        ("R/a\\b", .forbiddenCharacter("R/a\\b", "a backslash")),
        ("R/a\0b", .forbiddenCharacter("R/a\0b", "a NUL byte")),
        ("R", .noRelativePart("R")),
    ])
    func refusesUnsafePaths(_ path: String, _ error: PathError) {
        #expect(throws: error) { try RecordPath(validating: path) }
    }

    @Test func refusesOverlongPaths() {
        #expect(throws: PathError.tooLong("R/" + String(repeating: "x", count: 256))) {
            try RecordPath(validating: "R/" + String(repeating: "x", count: 256))
        }
    }

    @Test func splitsRootAndRelative() throws {
        let path = try RecordPath(validating: "SaveGames/dir/sub/file.txt")
        #expect(path.root == "SaveGames")
        #expect(path.relative == "dir/sub/file.txt")
        #expect(path.name == "file.txt")
        #expect(path.parent?.string == "SaveGames/dir/sub")
        #expect(path.depth == 3)
        #expect(try RecordPath(validating: "SaveGames/top").parent == nil)
        #expect(path.isWithin(try RecordPath(validating: "SaveGames/dir")))
        #expect(!path.isWithin(try RecordPath(validating: "SaveGames/di")))
    }

    @Test func errorsQuoteOddCharacters() {
        #expect(PathError.dotComponent("a/../b\n").description == #"path "a/../b\u{a}" has a '.' or '..' component"#)
    }
}
