import Testing
@testable import SinkiMerge

/// The LCS under every three-way merge, checked against the textbook dynamic program.
struct DiffTests {
    /// Length of a longest common subsequence by dynamic programming (small inputs only).
    static func lcsLength(_ a: [Int], _ b: [Int]) -> Int {
        var table = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in stride(from: a.count - 1, through: 0, by: -1) {
            for j in stride(from: b.count - 1, through: 0, by: -1) {
                table[i][j] = a[i] == b[j] ? table[i + 1][j + 1] + 1 : max(table[i + 1][j], table[i][j + 1])
            }
        }
        return table[0][0]
    }

    @Test func matchesAreACommonSubsequenceOfMaximalLength() throws {
        var random = SeededRandom(seed: 7)
        for round in 0..<3000 {
            let alphabet = Int.random(in: 1...(round % 3 == 0 ? 2 : 6), using: &random)
            let a = (0..<Int.random(in: 0...30, using: &random)).map { _ in Int.random(in: 0..<alphabet, using: &random) }
            let b = (0..<Int.random(in: 0...30, using: &random)).map { _ in Int.random(in: 0..<alphabet, using: &random) }
            let pairs = try Diff.matches(a, b)
            #expect(pairs.count == Self.lcsLength(a, b), "a=\(a) b=\(b)")
            for (index, (i, j)) in pairs.enumerated() {
                #expect(a[i] == b[j])
                if index > 0 {
                    #expect(i > pairs[index - 1].0 && j > pairs[index - 1].1)
                }
            }
        }
    }

    @Test func emptyAndEqualInputs() throws {
        #expect(try Diff.matches([], []).isEmpty)
        #expect(try Diff.matches([1, 2], []).isEmpty)
        #expect(try Diff.matches([], [1]).isEmpty)
        #expect(try Diff.matches([1, 2, 3], [1, 2, 3]).map { $0.0 } == [0, 1, 2])
    }

    @Test func largeInputsWithFewEditsAreFast() throws {
        let a = Array(0..<200_000)
        var b = a
        b.remove(at: 1000)
        b.insert(-1, at: 150_000)
        b[199_000] = -2
        let pairs = try Diff.matches(a, b)
        #expect(pairs.count == 200_000 - 2)
    }

    @Test func givesUpPastItsBudget() {
        let a = Array(0..<3000), b = Array(3000..<6000)
        #expect(throws: Diff.TooComplex.self) { try Diff.matches(a, b, budget: 10_000) }
    }
}
