/// Standard base64 (RFC 4648, with padding) straight to and from byte buffers.
public enum Base64 {
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let reverse: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        return table
    }()

    public static func encode(_ data: [UInt8], into out: inout [UInt8]) {
        let outputCount = (data.count + 2) / 3 * 4
        let start = out.count
        out.append(contentsOf: repeatElement(0, count: outputCount))
        out.withUnsafeMutableBufferPointer { dst in
            data.withUnsafeBufferPointer { src in
                alphabet.withUnsafeBufferPointer { table in
                    var o = start
                    var i = 0
                    let whole = src.count - src.count % 3
                    while i < whole {
                        let v = UInt32(src[i]) << 16 | UInt32(src[i + 1]) << 8 | UInt32(src[i + 2])
                        dst[o] = table[Int(v >> 18)]
                        dst[o + 1] = table[Int(v >> 12 & 63)]
                        dst[o + 2] = table[Int(v >> 6 & 63)]
                        dst[o + 3] = table[Int(v & 63)]
                        i += 3
                        o += 4
                    }
                    let rest = src.count - whole
                    if rest > 0 {
                        let b0 = UInt32(src[i])
                        let b1 = rest == 2 ? UInt32(src[i + 1]) : 0
                        let v = b0 << 16 | b1 << 8
                        dst[o] = table[Int(v >> 18)]
                        dst[o + 1] = table[Int(v >> 12 & 63)]
                        dst[o + 2] = rest == 2 ? table[Int(v >> 6 & 63)] : UInt8(ascii: "=")
                        dst[o + 3] = UInt8(ascii: "=")
                    }
                }
            }
        }
    }

    public static func encode(_ data: [UInt8]) -> String {
        var out: [UInt8] = []
        encode(data, into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes base64 text; nil when a byte is outside the alphabet or the length is wrong.
    public static func decode(_ text: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        var count = text.count
        guard count % 4 == 0 else { return nil }
        if count == 0 { return [] }
        var padding = 0
        if text[count - 1] == UInt8(ascii: "=") { padding += 1 }
        if text[count - 2] == UInt8(ascii: "=") { padding += 1 }
        let outputCount = count / 4 * 3 - padding
        var out = [UInt8](repeating: 0, count: outputCount)
        var valid = true
        reverse.withUnsafeBufferPointer { table in
            out.withUnsafeMutableBufferPointer { dst in
                var o = 0
                var i = 0
                count -= padding > 0 ? 4 : 0
                var bad: UInt8 = 0
                while i < count {
                    let a = table[Int(text[i])], b = table[Int(text[i + 1])]
                    let c = table[Int(text[i + 2])], d = table[Int(text[i + 3])]
                    bad |= a | b | c | d
                    let v = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6 | UInt32(d)
                    dst[o] = UInt8(truncatingIfNeeded: v >> 16)
                    dst[o + 1] = UInt8(truncatingIfNeeded: v >> 8)
                    dst[o + 2] = UInt8(truncatingIfNeeded: v)
                    i += 4
                    o += 3
                }
                if bad & 0xC0 != 0 { valid = false; return }
                if padding > 0 {
                    let a = table[Int(text[i])], b = table[Int(text[i + 1])]
                    let c = padding == 1 ? table[Int(text[i + 2])] : 0
                    if (a | b | c) & 0xC0 != 0 { valid = false; return }
                    let v = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6
                    dst[o] = UInt8(truncatingIfNeeded: v >> 16)
                    if padding == 1 { dst[o + 1] = UInt8(truncatingIfNeeded: v >> 8) }
                }
            }
        }
        return valid ? out : nil
    }

    public static func decode(_ text: String) -> [UInt8]? {
        var text = text
        return text.withUTF8 { decode($0) }
    }
}
