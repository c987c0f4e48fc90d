/// The `union` rule: text merged line by line against the base. A stretch only one side changed
/// takes that side; where both changed, the base lines there stay deleted (each was deleted on at
/// least one side) and the lines each side added are all kept, the side whose added lines sort
/// first (bytewise) before the other, lines both added once. The result does not depend on which
/// side is local.
enum UnionMerge {
    /// Why a text could not be merged as lines.
    enum Failure: Error, Equatable, CustomStringConvertible {
        /// A NUL byte: the file is not text.
        case binary(side: String)
        case tooComplex

        var description: String {
            switch self {
            case let .binary(side): return "the \(side) version is not text (it holds a NUL byte)"
            case .tooComplex: return "the versions differ too much to merge line by line"
            }
        }
    }

    static func merge(base: [UInt8], local: [UInt8], remote: [UInt8]) throws(Failure) -> [UInt8] {
        for (name, bytes) in [("base", base), ("local", local), ("remote", remote)] where bytes.contains(0) {
            throw .binary(side: name)
        }
        let baseLines = lines(base), localLines = lines(local), remoteLines = lines(remote)
        var interner = Interner<ArraySlice<UInt8>>()
        let baseIDs = interner.ids(baseLines), localIDs = interner.ids(localLines), remoteIDs = interner.ids(remoteLines)
        var text: [ArraySlice<UInt8>] = []
        for (ids, lines) in [(baseIDs, baseLines), (localIDs, localLines), (remoteIDs, remoteLines)] {
            for (id, line) in zip(ids, lines) where id == text.count { text.append(line) }
        }
        func precedes(_ x: [Int], _ y: [Int]) -> Bool {
            x.lazy.map { text[$0] }.lexicographicallyPrecedes(y.lazy.map { text[$0] }) { $0.lexicographicallyPrecedes($1) }
        }
        let merged: [Int]
        do {
            merged = try ThreeWay.merge(base: baseIDs, first: localIDs, second: remoteIDs) { chunk in
                let added1 = zip(chunk.first, chunk.firstKept).filter { !$0.1 }.map { localIDs[$0.0] }
                let added2 = zip(chunk.second, chunk.secondKept).filter { !$0.1 }.map { remoteIDs[$0.0] }
                return try ThreeWay.interleave(added1, added2, precedes: precedes)
            }
        } catch {
            throw .tooComplex
        }
        var out: [UInt8] = []
        out.reserveCapacity(max(local.count, remote.count))
        for (position, id) in merged.enumerated() {
            out += text[id]
            // A last line without its newline that no longer ends the file gets one.
            if position < merged.count - 1, text[id].last != UInt8(ascii: "\n") { out.append(UInt8(ascii: "\n")) }
        }
        return out
    }

    /// The lines of a text, each with its `\n` (the last may lack one).
    static func lines(_ bytes: [UInt8]) -> [ArraySlice<UInt8>] {
        var out: [ArraySlice<UInt8>] = []
        var start = 0
        for index in bytes.indices where bytes[index] == UInt8(ascii: "\n") {
            out.append(bytes[start...index])
            start = index + 1
        }
        if start < bytes.count { out.append(bytes[start...]) }
        return out
    }
}
