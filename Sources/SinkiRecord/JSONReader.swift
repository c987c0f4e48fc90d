/// A JSON text that could not be read, with the byte offset where reading stopped.
public struct JSONError: Error, Sendable, CustomStringConvertible {
    public var offset: Int
    public var message: String
    public var description: String { "bad JSON at byte \(offset): \(message)" }
}

/// A pull reader over JSON bytes: callers walk objects by key and read the types they expect.
///
/// Pulling keeps large record batches from becoming trees of boxed values, and lets base64 content be
/// decoded straight from the input bytes.
public struct JSONReader {
    private let bytes: [UInt8]
    private var index = 0
    /// Objects and arrays open around the reader's position.
    private var depth = 0

    /// Deepest nesting read. Reading recurses once per level, so without a bound a body of a few
    /// megabytes of `[` (a change-feed page, a modify request) overflowed the stack of whoever read it;
    /// no document of the protocol nests more than a handful of levels.
    public static let maxDepth = 512

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    private func fail(_ message: String) -> JSONError { JSONError(offset: index, message: message) }

    private mutating func skipSpace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return
            }
        }
    }

    private mutating func expect(_ byte: UInt8) throws {
        skipSpace()
        guard index < bytes.count, bytes[index] == byte else {
            throw fail("expected '\(Character(Unicode.Scalar(byte)))'")
        }
        index += 1
    }

    private mutating func peek() -> UInt8? {
        skipSpace()
        return index < bytes.count ? bytes[index] : nil
    }

    /// Checks that nothing but whitespace follows the value just read.
    public mutating func finish() throws {
        skipSpace()
        if index != bytes.count { throw fail("unexpected text after the value") }
    }

    /// Reads an object, calling `body` once per key with the reader positioned at its value.
    /// `body` must consume the value (read it or `skipValue()`).
    public mutating func readObject(_ body: (inout JSONReader, String) throws -> Void) throws {
        try expect(UInt8(ascii: "{"))
        try enter()
        defer { depth -= 1 }
        if peek() == UInt8(ascii: "}") { index += 1; return }
        while true {
            let key = try readString()
            try expect(UInt8(ascii: ":"))
            try body(&self, key)
            switch peek() {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"): index += 1; return
            default: throw fail("expected ',' or '}' in object")
            }
        }
    }

    /// Reads an array, calling `body` once per element; `body` must consume the element.
    public mutating func readArray(_ body: (inout JSONReader) throws -> Void) throws {
        try expect(UInt8(ascii: "["))
        try enter()
        defer { depth -= 1 }
        if peek() == UInt8(ascii: "]") { index += 1; return }
        while true {
            try body(&self)
            switch peek() {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"): index += 1; return
            default: throw fail("expected ',' or ']' in array")
            }
        }
    }

    private mutating func enter() throws {
        guard depth < Self.maxDepth else { throw fail("nested deeper than \(Self.maxDepth) levels") }
        depth += 1
    }

    /// Consumes `null` if it is next and says so.
    public mutating func readNull() -> Bool {
        guard peek() == UInt8(ascii: "n"), index + 4 <= bytes.count,
              bytes[index + 1] == UInt8(ascii: "u"), bytes[index + 2] == UInt8(ascii: "l"),
              bytes[index + 3] == UInt8(ascii: "l") else { return false }
        index += 4
        return true
    }

    public mutating func readBool() throws -> Bool {
        switch peek() {
        case UInt8(ascii: "t") where matches("true"): index += 4; return true
        case UInt8(ascii: "f") where matches("false"): index += 5; return false
        default: throw fail("expected true or false")
        }
    }

    private func matches(_ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count else { return false }
        for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { return false }
        return true
    }

    /// Reads an integer that fits Int64 exactly (no fraction, no exponent).
    public mutating func readInt64() throws -> Int64 {
        skipSpace()
        var negative = false
        if index < bytes.count, bytes[index] == UInt8(ascii: "-") { negative = true; index += 1 }
        let start = index
        var value: Int64 = 0
        while index < bytes.count, bytes[index] >= 48, bytes[index] <= 57 {
            let digit = Int64(bytes[index] - 48)
            let (times10, o1) = value.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times10.addingReportingOverflow(digit)
            if o1 || o2 { throw fail("integer out of range") }
            value = sum
            index += 1
        }
        if index == start { throw fail("expected an integer") }
        if index < bytes.count, [UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E")].contains(bytes[index]) {
            throw fail("expected an integer, found a fraction")
        }
        return negative ? -value : value
    }

    public mutating func readInt() throws -> Int { Int(try readInt64()) }

    /// Reads any JSON number as a Double.
    public mutating func readDouble() throws -> Double {
        skipSpace()
        let start = index
        while index < bytes.count, "+-.eE0123456789".utf8.contains(bytes[index]) { index += 1 }
        guard index > start, let value = Double(String(decoding: bytes[start..<index], as: UTF8.self)) else {
            throw fail("expected a number")
        }
        // `1e999` reads as infinity, which JSON cannot write back (the writer puts null): refused like an
        // integer out of range.
        guard value.isFinite else { throw fail("number out of range") }
        return value
    }

    public mutating func readString() throws -> String {
        try expect(UInt8(ascii: "\""))
        let start = index
        // Fast path: no escapes, so the bytes between the quotes are the string.
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let text = bytes.withUnsafeBufferPointer { String(validating: UnsafeBufferPointer(rebasing: $0[start..<index]), as: UTF8.self) }
                guard let text else { throw fail("string is not valid UTF-8") }
                index += 1
                return text
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw fail("control character in string") }
            index += 1
        }
        index = start
        return try readEscapedString()
    }

    private mutating func readEscapedString() throws -> String {
        var out: [UInt8] = []
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                guard let text = String(validating: out, as: UTF8.self) else { throw fail("string is not valid UTF-8") }
                return text
            case UInt8(ascii: "\\"):
                guard index < bytes.count else { throw fail("unterminated escape") }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""): out.append(0x22)
                case UInt8(ascii: "\\"): out.append(0x5C)
                case UInt8(ascii: "/"): out.append(0x2F)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try readHex4()
                    if (0xD800..<0xDC00).contains(scalar) {
                        guard index + 6 <= bytes.count, bytes[index] == 0x5C, bytes[index + 1] == UInt8(ascii: "u") else {
                            throw fail("unpaired surrogate")
                        }
                        index += 2
                        let low = try readHex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw fail("unpaired surrogate") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00..<0xE000).contains(scalar) {
                        throw fail("unpaired surrogate")
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw fail("bad \\u escape") }
                    out.append(contentsOf: Array(String(Character(unicode)).utf8))
                default: throw fail("bad escape")
                }
            default:
                if byte < 0x20 { throw fail("control character in string") }
                out.append(byte)
            }
        }
        throw fail("unterminated string")
    }

    private mutating func readHex4() throws -> UInt32 {
        guard index + 4 <= bytes.count else { throw fail("short \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt32
            switch byte {
            case 48...57: digit = UInt32(byte - 48)
            case 65...70: digit = UInt32(byte - 55)
            case 97...102: digit = UInt32(byte - 87)
            default: throw fail("bad hex digit in \\u escape")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    /// Reads a base64 string straight into bytes.
    public mutating func readBase64() throws -> [UInt8] {
        try expect(UInt8(ascii: "\""))
        let start = index
        while index < bytes.count, bytes[index] != UInt8(ascii: "\""), bytes[index] != UInt8(ascii: "\\") { index += 1 }
        if index < bytes.count, bytes[index] == UInt8(ascii: "\"") {
            let end = index
            index += 1
            let decoded = bytes.withUnsafeBufferPointer { Base64.decode(UnsafeBufferPointer(rebasing: $0[start..<end])) }
            guard let decoded else { index = start; throw fail("bad base64") }
            return decoded
        }
        // Escaped (some encoders write "\/"): unescape, then decode.
        index = start - 1
        let text = try readString()
        guard let decoded = Base64.decode(text) else { throw fail("bad base64") }
        return decoded
    }

    /// Skips one value of any type.
    public mutating func skipValue() throws {
        switch peek() {
        case UInt8(ascii: "{"): try readObject { reader, _ in try reader.skipValue() }
        case UInt8(ascii: "["): try readArray { reader in try reader.skipValue() }
        case UInt8(ascii: "\""): _ = try readString()
        case UInt8(ascii: "t"), UInt8(ascii: "f"): _ = try readBool()
        case UInt8(ascii: "n"): if !readNull() { throw fail("expected null") }
        case .some: _ = try readDouble()
        case .none: throw fail("unexpected end of input")
        }
    }

    /// Reads any value into a tree; for small documents where shape varies.
    public mutating func readValue() throws -> JSONValue {
        switch peek() {
        case UInt8(ascii: "{"):
            var members: [(String, JSONValue)] = []
            try readObject { reader, key in members.append((key, try reader.readValue())) }
            return .object(members)
        case UInt8(ascii: "["):
            var elements: [JSONValue] = []
            try readArray { reader in elements.append(try reader.readValue()) }
            return .array(elements)
        case UInt8(ascii: "\""): return .string(try readString())
        case UInt8(ascii: "t"), UInt8(ascii: "f"): return .bool(try readBool())
        case UInt8(ascii: "n"):
            if readNull() { return .null }
            throw fail("expected null")
        case .some:
            let start = index
            if let integer = try? readInt64() { return .int(integer) }
            index = start
            return .double(try readDouble())
        case .none: throw fail("unexpected end of input")
        }
    }
}

/// A JSON value as a tree, keeping object members in their order.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.int(a), .int(b)): return a == b
        case let (.double(a), .double(b)): return a == b
        case let (.int(a), .double(b)), let (.double(b), .int(a)): return Double(a) == b
        case let (.string(a), .string(b)): return a == b
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)):
            // Members as the subscript reads them: of a repeated key, the last counts. (Comparing `a`'s
            // members one by one against `b`'s last ones made an object with a repeated key unequal to
            // itself.)
            return Dictionary(a, uniquingKeysWith: { _, last in last }) == Dictionary(b, uniquingKeysWith: { _, last in last })
        default: return false
        }
    }

    public subscript(key: String) -> JSONValue? {
        if case let .object(members) = self { return members.last(where: { $0.0 == key })?.1 }
        return nil
    }

    /// An array's element; nil when out of range or not an array.
    public subscript(index: Int) -> JSONValue? {
        if case let .array(elements) = self, elements.indices.contains(index) { return elements[index] }
        return nil
    }

    /// Writes the value as JSON.
    public func write(to writer: inout JSONWriter) {
        switch self {
        case .null: writer.null()
        case let .bool(value): writer.bool(value)
        case let .int(value): writer.int(value)
        case let .double(value): writer.double(value)
        case let .string(value): writer.string(value)
        case let .array(elements):
            writer.beginArray()
            for element in elements { element.write(to: &writer) }
            writer.endArray()
        case let .object(members):
            writer.beginObject()
            for (key, value) in members {
                writer.key(key)
                value.write(to: &writer)
            }
            writer.endObject()
        }
    }

    public static func parse(_ bytes: [UInt8]) throws -> JSONValue {
        var reader = JSONReader(bytes)
        let value = try reader.readValue()
        try reader.finish()
        return value
    }
}
