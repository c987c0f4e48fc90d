import CZlib

/// Content that zlib could not inflate, or that inflated past its declared size.
public struct CompressionError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var description: String { "zlib: \(message)" }
}

/// zlib streams for inline record content (design §2: `data` is zlib-compressed).
public enum Deflate {
    /// Compression level for record content: level 1 keeps a 10,000-file scan CPU-light while still
    /// shrinking text-like saves severalfold.
    public static let level: Int32 = 1

    public static func compress(_ input: UnsafeRawBufferPointer, level: Int32 = Deflate.level) -> [UInt8] {
        var bound = compressBound(uLong(input.count))
        var out = [UInt8](repeating: 0, count: Int(bound))
        let status = out.withUnsafeMutableBufferPointer { dst in
            compress2(dst.baseAddress, &bound, input.baseAddress?.assumingMemoryBound(to: Bytef.self) ?? UnsafePointer(bitPattern: 1),
                      uLong(input.count), level)
        }
        precondition(status == Z_OK, "bug: compress2 failed with \(status) on a buffer sized by compressBound")
        out.removeLast(out.count - Int(bound))
        return out
    }

    public static func compress(_ input: [UInt8], level: Int32 = Deflate.level) -> [UInt8] {
        input.withUnsafeBytes { compress($0, level: level) }
    }

    /// Compresses for sending: content that does not shrink (already compressed, encrypted or
    /// random) is stored in zlib's uncompressed blocks instead of spending CPU on it. A 1 KiB probe
    /// at level 1 decides.
    public static func compressForSending(_ input: [UInt8]) -> [UInt8] {
        input.withUnsafeBytes { buffer in
            let probeCount = min(buffer.count, 1024)
            if probeCount >= 256 {
                let probe = compress(UnsafeRawBufferPointer(rebasing: buffer[0..<probeCount]), level: level)
                if probe.count * 10 > probeCount * 9 { return compress(buffer, level: 0) }
            }
            return compress(buffer, level: level)
        }
    }

    /// Inflates a zlib stream that must yield exactly `expectedSize` bytes; anything else is an error,
    /// so that a hostile record cannot make the agent allocate more than it declared.
    public static func decompress(_ input: [UInt8], expectedSize: Int) throws(CompressionError) -> [UInt8] {
        guard expectedSize >= 0 else { throw CompressionError(message: "negative size") }
        var out = [UInt8](repeating: 0, count: expectedSize + 1)
        var stream = z_stream()
        guard inflateInit_(&stream, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            throw CompressionError(message: "inflateInit failed")
        }
        defer { inflateEnd(&stream) }
        let status: Int32 = input.withUnsafeBufferPointer { src in
            out.withUnsafeMutableBufferPointer { dst in
                stream.next_in = UnsafeMutablePointer(mutating: src.baseAddress)
                stream.avail_in = uInt(src.count)
                stream.next_out = dst.baseAddress
                stream.avail_out = uInt(dst.count)
                return inflate(&stream, Z_FINISH)
            }
        }
        guard status == Z_STREAM_END else {
            if status == Z_BUF_ERROR || (status == Z_OK && stream.avail_out == 0) {
                throw CompressionError(message: "content is larger than its declared size \(expectedSize)")
            }
            throw CompressionError(message: "content is not a valid zlib stream (\(status))")
        }
        guard Int(stream.total_out) == expectedSize else {
            throw CompressionError(message: "content is \(stream.total_out) bytes, declared \(expectedSize)")
        }
        out.removeLast()
        return out
    }
}
