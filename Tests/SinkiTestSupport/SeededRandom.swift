/// SplitMix64 (Steele, Lea and Flood, 2014): a small generator whose whole stream follows from one
/// 64-bit seed, so a test run that prints its seed can be replayed choice for choice. The helpers
/// below are written out here rather than taken from the standard library (`Int.random(in:using:)`),
/// whose way of turning bits into a range may change between toolchains and break old seeds.
public struct SeededRandom: Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A generator of its own for one concern (ops, faults, schedule), so that drawing more or fewer
    /// values for one of them never shifts the others.
    public mutating func split() -> SeededRandom { SeededRandom(seed: next()) }

    /// A number in `0..<count` (`count` > 0), by multiply-and-shift: no modulo bias worth naming.
    public mutating func below(_ count: Int) -> Int {
        precondition(count > 0, "bug: below(\(count))")
        return Int(next().multipliedFullWidth(by: UInt64(count)).high)
    }

    /// A number in `range`.
    public mutating func int(in range: ClosedRange<Int>) -> Int { range.lowerBound + below(range.count) }

    /// A number in [0, 1).
    public mutating func unit() -> Double { Double(next() >> 11) * 0x1.0p-53 }

    /// True with probability `p`.
    public mutating func chance(_ p: Double) -> Bool { unit() < p }

    /// An index into `weights`, each chosen in proportion to its weight.
    public mutating func weighted(_ weights: [Int]) -> Int {
        var left = below(weights.reduce(0, +))
        for (index, weight) in weights.enumerated() {
            if left < weight { return index }
            left -= weight
        }
        fatalError("bug: weighted(\(weights))")
    }

    /// `count` bytes of the stream.
    public mutating func bytes(_ count: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        out.withUnsafeMutableBytes { raw in
            var offset = 0
            while offset < count {
                var word = next()
                let take = min(8, count - offset)
                withUnsafeBytes(of: &word) { raw.baseAddress!.advanced(by: offset).copyMemory(from: $0.baseAddress!, byteCount: take) }
                offset += take
            }
        }
        return out
    }
}
