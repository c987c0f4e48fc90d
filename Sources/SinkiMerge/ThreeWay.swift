/// The diff3 walk shared by the `union` rule (lines) and the `json` rule (array elements and
/// object keys): each side is aligned with the base on its own; base elements both sides kept are
/// stable and cut the sequences into chunks; a chunk only one side changed takes that side.
///
/// Everything here is symmetric in the two sides: the stable elements and the chunks do not depend
/// on which side is which, and a chunk both sides changed goes to `conflict`, which callers make
/// symmetric too. So merging (local, remote) and (remote, local) gives the same sequence.
enum ThreeWay {
    /// A stretch between two stable elements, as index ranges into base and both sides.
    struct Chunk {
        var base: Range<Int>
        var first: Range<Int>
        var second: Range<Int>
        /// Which elements of each side were matched to a base element (kept from the base).
        var firstKept: [Bool]
        var secondKept: [Bool]
    }

    /// Merges `first` and `second` against `base`; `conflict` settles a chunk both changed and
    /// returns the elements (ids) to put there.
    static func merge(base: [Int], first: [Int], second: [Int], budget: Int = Diff.defaultBudget,
                      conflict: (Chunk) throws -> [Int]) throws -> [Int] {
        let firstMatches = try Diff.matches(base, first, budget: budget)
        let secondMatches = try Diff.matches(base, second, budget: budget)
        var inFirst = [Int?](repeating: nil, count: base.count)
        var inSecond = [Int?](repeating: nil, count: base.count)
        for (i, j) in firstMatches { inFirst[i] = j }
        for (i, j) in secondMatches { inSecond[i] = j }
        var firstKept = [Bool](repeating: false, count: first.count)
        var secondKept = [Bool](repeating: false, count: second.count)
        for (_, j) in firstMatches { firstKept[j] = true }
        for (_, j) in secondMatches { secondKept[j] = true }

        var out: [Int] = []
        out.reserveCapacity(max(first.count, second.count))
        var b = 0, f = 0, s = 0
        func settle(_ baseEnd: Int, _ firstEnd: Int, _ secondEnd: Int) throws {
            let chunk = Chunk(base: b..<baseEnd, first: f..<firstEnd, second: s..<secondEnd,
                              firstKept: Array(firstKept[f..<firstEnd]), secondKept: Array(secondKept[s..<secondEnd]))
            let baseSlice = base[chunk.base], firstSlice = first[chunk.first], secondSlice = second[chunk.second]
            if firstSlice.elementsEqual(baseSlice) {
                out += secondSlice
            } else if secondSlice.elementsEqual(baseSlice) || firstSlice.elementsEqual(secondSlice) {
                out += firstSlice
            } else {
                out += try conflict(chunk)
            }
        }
        for i in 0..<base.count {
            guard let j = inFirst[i], let k = inSecond[i] else { continue }
            try settle(i, j, k)
            out.append(base[i])
            b = i + 1
            f = j + 1
            s = k + 1
        }
        try settle(base.count, first.count, second.count)
        return out
    }

    /// The two runs of elements put side by side without repeating what they share: a longest
    /// common subsequence appears once, and between its elements the run that sorts first (by
    /// `precedes`) goes first. The result depends only on the pair, not on its order.
    static func interleave(_ x: [Int], _ y: [Int], precedes: ([Int], [Int]) -> Bool, budget: Int = Diff.defaultBudget) throws -> [Int] {
        let (lead, follow) = precedes(y, x) ? (y, x) : (x, y)
        if lead == follow { return lead }
        var out: [Int] = []
        var i = 0, j = 0
        for (li, fj) in try Diff.matches(lead, follow, budget: budget) {
            out += lead[i..<li]
            out += follow[j..<fj]
            out.append(lead[li])
            i = li + 1
            j = fj + 1
        }
        out += lead[i...]
        out += follow[j...]
        return out
    }
}
