import Testing
@testable import SinkiMerge

/// The `union` rule: line by line against the base, both sides' additions kept, deletions kept.
struct UnionMergeTests {
    func union(_ base: String, _ local: String, _ remote: String) throws -> String {
        let merged = text(try UnionMerge.merge(base: bytes(base), local: bytes(local), remote: bytes(remote)))
        // Whichever side runs it, the same bytes.
        let swapped = text(try UnionMerge.merge(base: bytes(base), local: bytes(remote), remote: bytes(local)))
        #expect(merged == swapped, "not symmetric")
        return merged
    }

    @Test func changesOnDifferentLinesBothApply() throws {
        #expect(try union("a\nb\nc\nd\n", "A\nb\nc\nd\n", "a\nb\nc\nD\n") == "A\nb\nc\nD\n")
    }

    @Test func linesAddedOnBothSidesAreAllKeptInAStableOrder() throws {
        // Both appended at the end: the run that sorts first goes first.
        #expect(try union("one\ntwo\n", "one\ntwo\nzebra\n", "one\ntwo\napple\n") == "one\ntwo\napple\nzebra\n")
        // Several lines each, their own order kept inside each run.
        #expect(try union("x\n", "x\nm2\nm1\n", "x\nb2\nb1\n") == "x\nb2\nb1\nm2\nm1\n")
    }

    @Test func aLineBothSidesAddedAppearsOnce() throws {
        #expect(try union("a\n", "a\nsame\n", "a\nsame\n") == "a\nsame\n")
        #expect(try union("a\n", "a\nl\nshared\n", "a\nshared\nr\n") == "a\nl\nshared\nr\n")
    }

    @Test func aLineDeletedOnOneSideStaysDeleted() throws {
        #expect(try union("a\nb\nc\n", "a\nc\n", "a\nb\nc\nd\n") == "a\nc\nd\n")
        // Deleted on one side, replaced on the other, in the same stretch: the deletion holds, the
        // replacement's new line is added.
        #expect(try union("a\nb\nc\n", "a\nc\n", "a\nB\nc\n") == "a\nB\nc\n")
        // Both replaced the same line differently: the old line goes, both new ones stay.
        #expect(try union("a\nold\nc\n", "a\nmine\nc\n", "a\ntheirs\nc\n") == "a\nmine\ntheirs\nc\n")
    }

    @Test func addsAtBothEndsAndTheMiddle() throws {
        let base = "1\n2\n3\n4\n5\n"
        let local = "0\n1\n2\n3\n4\n5\n"
        let remote = "1\n2\n3\n3.5\n4\n5\n6\n"
        #expect(try union(base, local, remote) == "0\n1\n2\n3\n3.5\n4\n5\n6\n")
    }

    @Test func aLastLineWithoutNewlineGetsOneWhenItNoLongerEndsTheFile() throws {
        #expect(try union("a\n", "a\nb", "a\nc") == "a\nb\nc")
        #expect(try union("", "x", "y") == "x\ny")
    }

    @Test func crlfLinesStayWhole() throws {
        #expect(try union("a\r\nb\r\n", "a\r\nb\r\nc\r\n", "z\r\na\r\nb\r\n") == "z\r\na\r\nb\r\nc\r\n")
    }

    @Test func binaryIsRefused() {
        #expect(throws: UnionMerge.Failure.binary(side: "local")) {
            try UnionMerge.merge(base: bytes("a\n"), local: [0x61, 0, 0x0A], remote: bytes("b\n"))
        }
    }

    @Test func symmetricOnRandomEdits() throws {
        var random = SeededRandom(seed: 42)
        let words = ["a\n", "b\n", "c\n", "d\n", "e\n", "f"]
        func edit(_ lines: [String]) -> [String] {
            var out = lines
            for _ in 0..<Int.random(in: 0...4, using: &random) {
                switch Int.random(in: 0..<3, using: &random) {
                case 0 where !out.isEmpty: out.remove(at: Int.random(in: 0..<out.count, using: &random))
                case 1: out.insert(words.randomElement(using: &random)!, at: Int.random(in: 0...out.count, using: &random))
                default: if !out.isEmpty { out[Int.random(in: 0..<out.count, using: &random)] = words.randomElement(using: &random)! }
                }
            }
            return out
        }
        for _ in 0..<2000 {
            let base = (0..<Int.random(in: 0...8, using: &random)).map { _ in words.randomElement(using: &random)! }
            let merged = try union(base.joined(), edit(base).joined(), edit(base).joined())
            #expect(!merged.contains("\0"))
        }
    }
}
