import SinkiRecord

/// A JSON document as the `json` rule sees it: numbers keep their text exactly as written (a merge
/// must not round `12345678901234567890` or turn `1.50` into `1.5` in a value neither side touched),
/// object members keep their order, and equality is strict (same members in the same order).
indirect enum JSONNode: Hashable, Sendable {
    case null
    case bool(Bool)
    /// The number's text as written.
    case number(String)
    case string(String)
    case array([JSONNode])
    case object([Member])

    /// One `key: value` of an object.
    struct Member: Hashable, Sendable {
        var key: String
        var value: JSONNode
    }

    var members: [Member]? {
        if case let .object(members) = self { return members }
        return nil
    }

    var elements: [JSONNode]? {
        if case let .array(elements) = self { return elements }
        return nil
    }

    subscript(key: String) -> JSONNode? { members?.first { $0.key == key }?.value }
}

/// Reads JSON text into a `JSONNode` (RFC 8259; a UTF-8 byte-order mark is skipped). Objects with a
/// key twice are refused: which one a reader keeps is not agreed, so they are not merged.
struct JSONNodeReader {
    /// Why a text is not JSON the rule can merge.
    struct Failure: Error, CustomStringConvertible {
        var offset: Int
        var message: String
        var description: String { "not JSON the json rule can merge (byte \(offset): \(message))" }
    }

    /// Deeper nesting is refused rather than risking the stack.
    static let maxDepth = 512

    private let bytes: [UInt8]
    private var index = 0

    static func parse(_ bytes: [UInt8]) throws(Failure) -> JSONNode {
        var reader = JSONNodeReader(bytes: bytes)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { reader.index = 3 }
        let node = try reader.value(depth: 0)
        reader.skipSpace()
        guard reader.index == bytes.count else { throw reader.fail("text after the value") }
        return node
    }

    private init(bytes: [UInt8]) { self.bytes = bytes }

    private func fail(_ message: String) -> Failure { Failure(offset: index, message: message) }

    private mutating func skipSpace() {
        while index < bytes.count, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[index]) { index += 1 }
    }

    private mutating func literal(_ word: String) -> Bool {
        let utf8 = Array(word.utf8)
        guard bytes.count - index >= utf8.count, bytes[index..<index + utf8.count].elementsEqual(utf8) else { return false }
        index += utf8.count
        return true
    }

    private mutating func value(depth: Int) throws(Failure) -> JSONNode {
        guard depth < Self.maxDepth else { throw fail("nested deeper than \(Self.maxDepth)") }
        skipSpace()
        guard index < bytes.count else { throw fail("unexpected end") }
        switch bytes[index] {
        case UInt8(ascii: "{"):
            index += 1
            var members: [JSONNode.Member] = []
            var seen = Set<String>()
            skipSpace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") { index += 1; return .object(members) }
            while true {
                skipSpace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw fail("expected a key") }
                let keyOffset = index
                let key = try string()
                guard seen.insert(key).inserted else { throw Failure(offset: keyOffset, message: "key \(quoted(key)) appears twice") }
                skipSpace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':'") }
                index += 1
                members.append(JSONNode.Member(key: key, value: try value(depth: depth + 1)))
                skipSpace()
                guard index < bytes.count else { throw fail("unterminated object") }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "}") { index += 1; return .object(members) }
                throw fail("expected ',' or '}'")
            }
        case UInt8(ascii: "["):
            index += 1
            var elements: [JSONNode] = []
            skipSpace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") { index += 1; return .array(elements) }
            while true {
                elements.append(try value(depth: depth + 1))
                skipSpace()
                guard index < bytes.count else { throw fail("unterminated array") }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(elements) }
                throw fail("expected ',' or ']'")
            }
        case UInt8(ascii: "\""):
            return .string(try string())
        case UInt8(ascii: "t"):
            if literal("true") { return .bool(true) }
        case UInt8(ascii: "f"):
            if literal("false") { return .bool(false) }
        case UInt8(ascii: "n"):
            if literal("null") { return .null }
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return .number(try number())
        default:
            break
        }
        throw fail("expected a value")
    }

    /// A number, checked against the JSON grammar, as its text.
    private mutating func number() throws(Failure) -> String {
        let start = index
        func digits() -> Int {
            let from = index
            while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") { index += 1 }
            return index - from
        }
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        let whole = index
        guard digits() > 0 else { throw fail("bad number") }
        if bytes[whole] == UInt8(ascii: "0"), index - whole > 1 { throw fail("number with a leading zero") }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard digits() > 0 else { throw fail("bad fraction") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard digits() > 0 else { throw fail("bad exponent") }
        }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    private mutating func string() throws(Failure) -> String {
        index += 1
        var out: [UInt8] = []
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                guard let text = String(validating: out, as: UTF8.self) else { throw fail("string is not UTF-8") }
                return text
            case UInt8(ascii: "\\"):
                guard index < bytes.count else { throw fail("unterminated escape") }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800..<0xDC00).contains(scalar) {
                        guard bytes.count - index >= 6, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                            throw fail("unpaired surrogate")
                        }
                        index += 2
                        let low = try hex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw fail("unpaired surrogate") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw fail("bad \\u escape") }
                    out += Array(String(unicode).utf8)
                default: throw fail("bad escape")
                }
            default:
                guard byte >= 0x20 else { throw fail("control character in a string") }
                out.append(byte)
            }
        }
        throw fail("unterminated string")
    }

    private mutating func hex4() throws(Failure) -> UInt32 {
        guard bytes.count - index >= 4 else { throw fail("short \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - 48
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - 87
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - 55
            default: throw fail("bad \\u escape")
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }
}
