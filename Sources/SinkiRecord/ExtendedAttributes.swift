/// A file's extended attributes as a record carries them (issue 25, item 2): names in the `user.`
/// namespace with their values, sorted by the names' bytes, each name once. On the wire, the record's
/// `xattrs` field: an object of name to base64 value, absent when there are none.
public struct ExtendedAttributes: Sendable, Equatable {
    /// One attribute.
    public struct Entry: Sendable, Equatable {
        public var name: String
        public var value: [UInt8]

        public init(name: String, value: [UInt8]) {
            self.name = name
            self.value = value
        }
    }

    /// The bounds a set keeps, Linux's own where it has one (docs/configuration.md, `xattrs`): a writer
    /// sends no attribute past them, and the server refuses a record that breaks one.
    public enum Limits {
        /// Bytes of a name, its `user.` prefix included (XATTR_NAME_MAX).
        public static let nameBytes = 255
        /// Bytes of one value (XATTR_SIZE_MAX).
        public static let valueBytes = 64 << 10
        /// Attributes per file.
        public static let count = 64
        /// Bytes of all names and values of a file together.
        public static let totalBytes = 128 << 10
    }

    /// The namespace every name is in: the one a file's owner may set, which means nothing to the kernel.
    public static let namespace = "user."

    /// Sorted by name bytes, each name once.
    public private(set) var entries: [Entry]

    /// The attributes of `entries`, sorted; of two with one name, the later is kept.
    public init(_ entries: [Entry] = []) {
        var byName: [String: Int] = [:]
        var unique: [Entry] = []
        for entry in entries {
            if let at = byName[entry.name] { unique[at] = entry } else {
                byName[entry.name] = unique.count
                unique.append(entry)
            }
        }
        self.entries = unique.sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
    }

    public static let none = ExtendedAttributes()

    public var isEmpty: Bool { entries.isEmpty }
    public var names: [String] { entries.map(\.name) }

    public subscript(name: String) -> [UInt8]? {
        entries.first { $0.name.utf8.elementsEqual(name.utf8) }?.value
    }

    /// Bytes of all names and values.
    public var totalBytes: Int { entries.reduce(0) { $0 + $1.name.utf8.count + $1.value.count } }

    /// Why `name` cannot be carried; nil when it can.
    public static func nameProblem(_ name: String) -> String? {
        let bytes = name.utf8
        guard bytes.starts(with: namespace.utf8), bytes.count > namespace.utf8.count else { return "is not in the user. namespace" }
        guard bytes.count <= Limits.nameBytes else { return "is longer than \(Limits.nameBytes) bytes" }
        guard !bytes.contains(0) else { return "holds a NUL" }
        return nil
    }

    /// The first bound the set breaks, said for people; nil when it keeps them all.
    public var problem: String? {
        guard entries.count <= Limits.count else { return "\(entries.count) attributes, more than \(Limits.count)" }
        for entry in entries {
            if let problem = Self.nameProblem(entry.name) { return "the name \(quoted(entry.name)) \(problem)" }
            guard entry.value.count <= Limits.valueBytes else {
                return "the value of \(entry.name) is \(entry.value.count) bytes, more than \(Limits.valueBytes)"
            }
        }
        guard totalBytes <= Limits.totalBytes else { return "names and values of \(totalBytes) bytes, more than \(Limits.totalBytes)" }
        return nil
    }

    /// One byte string that stands for the whole set: per entry its name, a NUL, the value's length in
    /// four bytes (big-endian) and the value. What the agent names a set by and keeps of a record's.
    public var encoded: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(totalBytes + entries.count * 5)
        for entry in entries {
            out.append(contentsOf: entry.name.utf8)
            out.append(0)
            let count = UInt32(entry.value.count)
            out.append(contentsOf: [UInt8(count >> 24), UInt8(count >> 16 & 0xFF), UInt8(count >> 8 & 0xFF), UInt8(count & 0xFF)])
            out.append(contentsOf: entry.value)
        }
        return out
    }

    /// The set `encoded` stands for; nil for bytes it cannot have made.
    public init?(encoded bytes: [UInt8]) {
        var entries: [Entry] = []
        var index = 0
        while index < bytes.count {
            guard let end = bytes[index...].firstIndex(of: 0), end + 5 <= bytes.count,
                  let name = String(validating: bytes[index..<end], as: UTF8.self) else { return nil }
            let count = Int(bytes[end + 1]) << 24 | Int(bytes[end + 2]) << 16 | Int(bytes[end + 3]) << 8 | Int(bytes[end + 4])
            let start = end + 5
            guard start + count <= bytes.count else { return nil }
            entries.append(Entry(name: name, value: Array(bytes[start..<start + count])))
            index = start + count
        }
        self.init(entries)
    }

    /// Writes the set as the record's `xattrs` object.
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        for entry in entries {
            writer.key(entry.name)
            writer.base64(entry.value)
        }
        writer.endObject()
    }

    /// Reads the record's `xattrs` object (null: none). Names are checked, and the bounds, as it reads:
    /// a set past them is no set a writer may send.
    public static func read(from reader: inout JSONReader) throws -> ExtendedAttributes {
        if reader.readNull() { return .none }
        var entries: [Entry] = []
        var seen = Set<String>()
        var total = 0
        try reader.readObject { reader, name in
            if let problem = nameProblem(name) { throw RecordFieldError(field: "xattrs", message: "the name \(quoted(name)) \(problem)") }
            guard seen.insert(name).inserted else { throw RecordFieldError(field: "xattrs", message: "the name \(quoted(name)) appears twice") }
            guard entries.count < Limits.count else { throw RecordFieldError(field: "xattrs", message: "more than \(Limits.count) attributes") }
            let value = try reader.readBase64()
            guard value.count <= Limits.valueBytes else {
                throw RecordFieldError(field: "xattrs", message: "the value of \(name) is more than \(Limits.valueBytes) bytes")
            }
            total += name.utf8.count + value.count
            guard total <= Limits.totalBytes else {
                throw RecordFieldError(field: "xattrs", message: "names and values of more than \(Limits.totalBytes) bytes")
            }
            entries.append(Entry(name: name, value: value))
        }
        return ExtendedAttributes(entries)
    }
}
