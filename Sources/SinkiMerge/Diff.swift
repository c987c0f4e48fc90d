/// A longest common subsequence of two sequences of interned elements (Myers' O(ND) algorithm with
/// the linear-space middle split), as the index pairs that match.
///
/// Three-way merges align each side with the base through this. Elements are `Int` ids (lines or
/// JSON values interned by `Interner`), so comparing is cheap however long a line is.
enum Diff {
    /// Work above this many steps gives up: two big files with almost nothing in common are not
    /// worth a merge, and the rule's fallback keeps both anyway.
    static let defaultBudget = 200_000_000

    /// The merge gave up: the inputs differ too much for the work budget.
    struct TooComplex: Error {}

    /// Pairs `(i, j)` with `a[i] == b[j]`, increasing in both, as many as a longest common
    /// subsequence has. Deterministic: the same inputs always give the same pairs.
    static func matches(_ a: [Int], _ b: [Int], budget: Int = defaultBudget) throws(TooComplex) -> [(Int, Int)] {
        var state = State(a: a, b: b, budget: budget)
        var out: [(Int, Int)] = []
        out.reserveCapacity(min(a.count, b.count))
        try state.solve(0, a.count, 0, b.count, into: &out)
        return out
    }

    private struct State {
        let a: [Int]
        let b: [Int]
        var budget: Int
        // Reused between calls to `split`, sized for the largest problem.
        var forward: [Int] = []
        var backward: [Int] = []

        init(a: [Int], b: [Int], budget: Int) {
            self.a = a
            self.b = b
            self.budget = budget
        }

        mutating func solve(_ aLow: Int, _ aHigh: Int, _ bLow: Int, _ bHigh: Int, into out: inout [(Int, Int)]) throws(TooComplex) {
            var aLow = aLow, aHigh = aHigh, bLow = bLow, bHigh = bHigh
            while aLow < aHigh, bLow < bHigh, a[aLow] == b[bLow] {
                out.append((aLow, bLow))
                aLow += 1
                bLow += 1
            }
            var suffix = 0
            while aLow < aHigh, bLow < bHigh, a[aHigh - 1] == b[bHigh - 1] {
                aHigh -= 1
                bHigh -= 1
                suffix += 1
            }
            if aLow < aHigh, bLow < bHigh {
                // With equal ends trimmed and both sides non-empty, at least two edits separate
                // them, so the split point leaves two strictly smaller problems.
                // nil: the searches met only past the middle, which means nothing in common.
                if let (x, y) = try split(aLow, aHigh, bLow, bHigh) {
                    try solve(aLow, x, bLow, y, into: &out)
                    try solve(x, aHigh, y, bHigh, into: &out)
                }
            }
            for offset in 0..<suffix { out.append((aHigh + offset, bHigh + offset)) }
        }

        /// A point on an optimal edit path between the corners, found by running the path search
        /// from both ends until they overlap (Myers 1986, section 4b); nil when the two ranges have
        /// no element in common (then the searches only meet after `(n + m) / 2` edits each).
        private mutating func split(_ aLow: Int, _ aHigh: Int, _ bLow: Int, _ bHigh: Int) throws(TooComplex) -> (Int, Int)? {
            let n = aHigh - aLow, m = bHigh - bLow
            let maxD = (n + m + 1) / 2
            let offset = maxD
            let length = 2 * maxD + 2
            if forward.count < length {
                forward = [Int](repeating: -1, count: length)
                backward = [Int](repeating: -1, count: length)
            }
            for index in 0..<length {
                forward[index] = -1
                backward[index] = -1
            }
            forward[offset + 1] = 0
            backward[offset + 1] = 0
            let delta = n - m
            // With an odd delta the forward pass meets the backward one, else the reverse.
            let checkForward = delta % 2 != 0
            var forwardStart = 0, forwardEnd = 0, backwardStart = 0, backwardEnd = 0
            for d in 0..<maxD {
                budget -= 2 * d + 2
                if budget < 0 { throw TooComplex() }
                var k1 = -d + forwardStart
                while k1 <= d - forwardEnd {
                    let index = offset + k1
                    var x1 = (k1 == -d || (k1 != d && forward[index - 1] < forward[index + 1])) ? forward[index + 1] : forward[index - 1] + 1
                    var y1 = x1 - k1
                    while x1 < n, y1 < m, a[aLow + x1] == b[bLow + y1] {
                        x1 += 1
                        y1 += 1
                    }
                    forward[index] = x1
                    if x1 > n {
                        forwardEnd += 2
                    } else if y1 > m {
                        forwardStart += 2
                    } else if checkForward {
                        let other = offset + delta - k1
                        if other >= 0, other < length, backward[other] != -1, x1 >= n - backward[other] {
                            return (aLow + x1, bLow + y1)
                        }
                    }
                    k1 += 2
                }
                var k2 = -d + backwardStart
                while k2 <= d - backwardEnd {
                    let index = offset + k2
                    var x2 = (k2 == -d || (k2 != d && backward[index - 1] < backward[index + 1])) ? backward[index + 1] : backward[index - 1] + 1
                    var y2 = x2 - k2
                    while x2 < n, y2 < m, a[aLow + n - x2 - 1] == b[bLow + m - y2 - 1] {
                        x2 += 1
                        y2 += 1
                    }
                    backward[index] = x2
                    if x2 > n {
                        backwardEnd += 2
                    } else if y2 > m {
                        backwardStart += 2
                    } else if !checkForward {
                        let other = offset + delta - k2
                        if other >= 0, other < length, forward[other] != -1 {
                            let x1 = forward[other]
                            let y1 = offset + x1 - other
                            if x1 >= n - x2 { return (aLow + x1, bLow + y1) }
                        }
                    }
                    k2 += 2
                }
            }
            return nil
        }
    }
}

/// Gives equal elements one small id, so diffs compare integers.
struct Interner<Element: Hashable> {
    private var ids: [Element: Int] = [:]

    mutating func id(_ element: Element) -> Int {
        if let known = ids[element] { return known }
        let next = ids.count
        ids[element] = next
        return next
    }

    mutating func ids(_ elements: [Element]) -> [Int] { elements.map { id($0) } }
}
