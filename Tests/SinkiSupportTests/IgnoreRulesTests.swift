import Testing
@testable import SinkiSupport

@Suite struct IgnoreRulesTests {
    func ignored(_ patterns: [String], _ path: String, directory: Bool = false) -> Bool {
        IgnoreRules(patterns: patterns).isIgnoredWithParents(path, isDirectory: directory)
    }

    @Test func namesMatchAtAnyDepth() {
        #expect(ignored(["*.tmp"], "a.tmp"))
        #expect(ignored(["*.tmp"], "deep/down/a.tmp"))
        #expect(!ignored(["*.tmp"], "a.tmpx"))
        #expect(ignored(["cache"], "x/cache", directory: true))
        #expect(ignored(["cache"], "x/cache/inside.bin"))
    }

    @Test func leadingSlashAnchorsToTheRoot() {
        #expect(ignored(["/build"], "build", directory: true))
        #expect(!ignored(["/build"], "src/build", directory: true))
        #expect(ignored(["docs/*.md"], "docs/a.md"))
        #expect(!ignored(["docs/*.md"], "x/docs/a.md"))
    }

    @Test func trailingSlashMatchesDirectoriesOnly() {
        #expect(ignored([".cache/"], ".cache", directory: true))
        #expect(!ignored([".cache/"], ".cache", directory: false))
        #expect(ignored([".cache/"], "a/.cache/f"))
    }

    @Test func doubleStarSpansDirectories() {
        #expect(ignored(["**/logs"], "a/b/logs", directory: true))
        #expect(ignored(["a/**/z"], "a/z"))
        #expect(ignored(["a/**/z"], "a/b/c/z"))
        #expect(ignored(["a/**"], "a/b/c"))
        #expect(!ignored(["a/**"], "a", directory: true))
    }

    @Test func negationReIncludesAndTheLastRuleWins() {
        #expect(!ignored(["*.log", "!keep.log"], "keep.log"))
        #expect(ignored(["*.log", "!keep.log"], "drop.log"))
        #expect(ignored(["!keep.log", "*.log"], "keep.log"))
        // Inside an ignored directory nothing comes back (as in git).
        #expect(ignored(["tmp/", "!tmp/keep"], "tmp/keep"))
    }

    @Test func commentsClassesAndEscapes() {
        #expect(IgnoreRules(patterns: ["# a comment", "", "   "]).isEmpty)
        #expect(ignored(["\\#hash"], "#hash"))
        #expect(ignored(["file[0-9].txt"], "file7.txt"))
        #expect(!ignored(["file[!0-9].txt"], "file7.txt"))
        #expect(ignored(["?.c"], "x.c"))
        #expect(!ignored(["?.c"], "xy.c"))
        #expect(ignored(["trailing   "], "trailing"))
    }

    @Test func builtInEditorArtifactsAreIgnoredUnlessReIncluded() {
        let rules = IgnoreRules(config: [], fileText: nil)
        #expect(rules.isIgnored(".notes.txt.swp", isDirectory: false))
        #expect(rules.isIgnored(".#draft.org", isDirectory: false))
        #expect(!rules.isIgnored("notes.txt", isDirectory: false))
        let reIncluded = IgnoreRules(config: [], fileText: "!.notes.txt.swp\n")
        #expect(!reIncluded.isIgnored(".notes.txt.swp", isDirectory: false))
    }

    /// The literal start and end of a pattern reject names early; classes, escapes and wildcards
    /// next to them must still match as the full matcher says.
    @Test func literalEndsDoNotChangeWhatMatches() {
        #expect(ignored(["[abc]x"], "bx") && !ignored(["[abc]x"], "dx"))
        #expect(ignored(["*[0-9]"], "save7") && !ignored(["*[0-9]"], "save"))
        #expect(ignored(["\\*x"], "*x") && !ignored(["\\*x"], "ax"))
        #expect(ignored(["a*b*c"], "abc") && ignored(["a*b*c"], "a-b-c") && !ignored(["a*b*c"], "ab"))
        #expect(ignored(["abc"], "abc") && !ignored(["abc"], "abcd") && !ignored(["abc"], "ab"))
        #expect(ignored(["*.kate-swp"], "deep/dir/notes.kate-swp") && !ignored(["*.kate-swp"], "kate-swp"))
        #expect(ignored(["é*ü"], "dir/éxü") && !ignored(["é*ü"], "éxu"))
    }
}
