/// Appends JSON text to a byte buffer without building an intermediate tree.
///
/// Foundation's `JSONEncoder` spends most of a large modify batch in reflection; this writer is the
/// hot path for records, so it writes bytes directly. Commas are inferred from the previous byte.
public struct JSONWriter: Sendable {
    public private(set) var bytes: [UInt8]

    public init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    private mutating func separate() {
        if let last = bytes.last, last != UInt8(ascii: "{"), last != UInt8(ascii: "["), last != UInt8(ascii: ":") {
            bytes.append(UInt8(ascii: ","))
        }
    }

    public mutating func beginObject() { separate(); bytes.append(UInt8(ascii: "{")) }
    public mutating func endObject() { bytes.append(UInt8(ascii: "}")) }
    public mutating func beginArray() { separate(); bytes.append(UInt8(ascii: "[")) }
    public mutating func endArray() { bytes.append(UInt8(ascii: "]")) }

    public mutating func key(_ name: String) {
        separate()
        appendQuoted(name)
        bytes.append(UInt8(ascii: ":"))
    }

    public mutating func string(_ value: String) { separate(); appendQuoted(value) }
    public mutating func null() { separate(); bytes.append(contentsOf: [110, 117, 108, 108]) }
    public mutating func bool(_ value: Bool) {
        separate()
        bytes.append(contentsOf: value ? Array("true".utf8) : Array("false".utf8))
    }
    public mutating func int(_ value: Int64) { separate(); appendInt(value) }
    public mutating func int(_ value: Int) { int(Int64(value)) }
    public mutating func double(_ value: Double) {
        separate()
        if value.isFinite { bytes.append(contentsOf: "\(value)".utf8) } else { bytes.append(contentsOf: "null".utf8) }
    }

    /// Writes `data` as a base64 JSON string.
    public mutating func base64(_ data: [UInt8]) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        Base64.encode(data, into: &bytes)
        bytes.append(UInt8(ascii: "\""))
    }

    /// Inserts already-encoded JSON (a value produced by another writer).
    public mutating func raw(_ json: [UInt8]) { separate(); bytes.append(contentsOf: json) }

    public mutating func field(_ name: String, _ value: String) { key(name); appendQuoted(value) }
    public mutating func field(_ name: String, _ value: Int64) { key(name); appendInt(value) }
    public mutating func field(_ name: String, _ value: Int) { key(name); appendInt(Int64(value)) }
    public mutating func field(_ name: String, _ value: Bool) { key(name); bool(value) }

    private mutating func appendInt(_ value: Int64) {
        if value == 0 { bytes.append(UInt8(ascii: "0")); return }
        var magnitude = value.magnitude
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            while magnitude > 0 {
                buffer[count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                count += 1
            }
            for index in stride(from: count - 1, through: 0, by: -1) { bytes.append(buffer[index]) }
        }
    }

    private mutating func appendQuoted(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { utf8 in
            var start = 0
            for index in 0..<utf8.count {
                let byte = utf8[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<index]))
                switch byte {
                case UInt8(ascii: "\""): bytes.append(contentsOf: [92, 34])
                case UInt8(ascii: "\\"): bytes.append(contentsOf: [92, 92])
                case 0x0A: bytes.append(contentsOf: [92, 110])
                case 0x0D: bytes.append(contentsOf: [92, 114])
                case 0x09: bytes.append(contentsOf: [92, 116])
                default:
                    let hex = Array("0123456789abcdef".utf8)
                    bytes.append(contentsOf: [92, 117, 48, 48, hex[Int(byte >> 4)], hex[Int(byte & 15)]])
                }
                start = index + 1
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<utf8.count]))
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
