/// The digest of the records below a folder (docs/protocol.md, "Digests"): the XOR of one SHA-256 per
/// live record, over the record's path and content id. XOR makes it incremental (a save changes the
/// digest of each folder above its path by one XOR of the old entry and the new) and independent of
/// order, so the server and an agent, each keeping its own copy in its own transactions, reach the same
/// value for the same records. Tombstones add nothing: a deleted record and no record are the same
/// fact for what a folder holds, and retention may purge tombstones without changing any digest.
public struct TreeDigest: Sendable, Hashable, CustomStringConvertible {
    public var a: UInt64
    public var b: UInt64
    public var c: UInt64
    public var d: UInt64

    public init(a: UInt64, b: UInt64, c: UInt64, d: UInt64) {
        self.a = a
        self.b = b
        self.c = c
        self.d = d
    }

    /// The digest of no records.
    public static let empty = TreeDigest(a: 0, b: 0, c: 0, d: 0)

    public var isEmpty: Bool { self == .empty }

    /// One live record's entry: SHA-256 of its path's UTF-8 bytes, a NUL, and its content id (the
    /// record's `sha256`: empty for a folder).
    public static func entry(path: String, contentID: String) -> TreeDigest {
        let digest = Digest(.sha256)
        digest.update(Array(path.utf8))
        digest.update([0])
        digest.update(Array(contentID.utf8))
        return TreeDigest(bytes: digest.finish())!
    }

    /// The entry a record at `path` adds in its state: nothing for a tombstone (`contentID` nil).
    public static func entry(path: String, live contentID: String?) -> TreeDigest {
        contentID.map { entry(path: path, contentID: $0) } ?? .empty
    }

    public static func ^ (lhs: TreeDigest, rhs: TreeDigest) -> TreeDigest {
        TreeDigest(a: lhs.a ^ rhs.a, b: lhs.b ^ rhs.b, c: lhs.c ^ rhs.c, d: lhs.d ^ rhs.d)
    }

    public static func ^= (lhs: inout TreeDigest, rhs: TreeDigest) { lhs = lhs ^ rhs }

    /// From 32 bytes, most significant first; nil for any other count.
    public init?(bytes: [UInt8]) {
        guard bytes.count == 32 else { return nil }
        func word(_ start: Int) -> UInt64 { bytes[start..<start + 8].reduce(0) { $0 << 8 | UInt64($1) } }
        self.init(a: word(0), b: word(8), c: word(16), d: word(24))
    }

    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(32)
        for word in [a, b, c, d] { for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: word >> UInt64(shift))) } }
        return out
    }

    /// 64 lowercase hex digits, as the wire carries it.
    public var hex: String { Hex.encode(bytes) }

    /// From 64 hex digits; nil for anything else.
    public init?(hex: String) {
        guard hex.utf8.count == 64, let raw = Hex.decode(hex) else { return nil }
        self.init(bytes: raw)
    }

    /// The four words as signed 64-bit integers (SQL columns), in order.
    public var signedWords: [Int64] { [a, b, c, d].map { Int64(bitPattern: $0) } }

    public init(signedWords words: [Int64]) {
        precondition(words.count == 4, "bug: a tree digest is four words")
        self.init(a: UInt64(bitPattern: words[0]), b: UInt64(bitPattern: words[1]), c: UInt64(bitPattern: words[2]),
                  d: UInt64(bitPattern: words[3]))
    }

    public var description: String { String(hex.prefix(16)) + "…" }
}

/// What one batch of record changes does to the digests of the folders above them, gathered in memory
/// so that a store writes each folder once per batch (a thousand saves in one folder: one update).
public struct FolderDeltas: Sendable {
    /// The change to one folder's row.
    public struct Delta: Sendable, Equatable {
        /// To XOR into the digest of everything below the folder.
        public var digest = TreeDigest.empty
        /// To XOR into the digest of the records directly in it.
        public var direct = TreeDigest.empty
        /// The highest change tag saved below the folder in this batch (tombstones too).
        public var head: Int64 = 0
        /// The folder the folder is in; nil for a root.
        public var parent: String?
    }

    public private(set) var folders: [String: Delta] = [:]

    public init() {}

    public var isEmpty: Bool { folders.isEmpty }

    /// A record at `path` went from content `old` to content `new` (nil: no live record, a tombstone or
    /// nothing) at change tag `tag`. A path without a `/` (a root name alone) changes nothing.
    public mutating func change(path: String, from old: String?, to new: String?, tag: Int64) {
        let delta = TreeDigest.entry(path: path, live: old) ^ TreeDigest.entry(path: path, live: new)
        let ancestors = Self.folders(of: path)
        for (index, folder) in ancestors.enumerated() {
            var entry = folders[folder] ?? Delta(parent: index == 0 ? nil : ancestors[index - 1])
            entry.digest ^= delta
            if index == ancestors.count - 1 { entry.direct ^= delta }
            entry.head = max(entry.head, tag)
            folders[folder] = entry
        }
    }

    /// The folders a record at `path` counts in: every proper prefix at a `/`, the root first
    /// (`A/b/c` → `A`, `A/b`). By bytes, as paths are split everywhere.
    public static func folders(of path: String) -> [String] {
        var out: [String] = []
        let bytes = Array(path.utf8)
        for (index, byte) in bytes.enumerated() where byte == UInt8(ascii: "/") && index > 0 {
            out.append(String(decoding: bytes[..<index], as: UTF8.self))
        }
        return out
    }
}
