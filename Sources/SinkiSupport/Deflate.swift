import CZlib
import Glibc

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
        if level == 0 { return stored(input) }
        // zlib's default state (a 32 KiB window and a 64 KiB hash table cleared on every init) costs
        // more than compressing a 4 KiB file; a window no larger than the input finds the same matches.
        var windowBits: Int32 = 9
        while windowBits < 15 && (1 << windowBits) < input.count { windowBits += 1 }
        var stream = z_stream()
        let ready = deflateInit2_(&stream, level, Z_DEFLATED, windowBits, max(1, min(8, windowBits - 7)), Z_DEFAULT_STRATEGY,
                                  ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size))
        precondition(ready == Z_OK, "bug: deflateInit2 failed with \(ready)")
        defer { deflateEnd(&stream) }
        var out = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(input.count))))
        let status = out.withUnsafeMutableBufferPointer { dst in
            stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
            stream.avail_in = uInt(input.count)
            stream.next_out = dst.baseAddress
            stream.avail_out = uInt(dst.count)
            return deflate(&stream, Z_FINISH)
        }
        precondition(status == Z_STREAM_END, "bug: deflate failed with \(status) on a buffer sized by deflateBound")
        out.removeLast(out.count - Int(stream.total_out))
        return out
    }

    /// A zlib stream of stored (uncompressed) blocks, framed here: zlib's level 0 would first set up
    /// its whole compression state only to copy the bytes. The checksum is zlib's `adler32`.
    static func stored(_ input: UnsafeRawBufferPointer) -> [UInt8] {
        let blockLimit = 65_535
        var out: [UInt8] = []
        out.reserveCapacity(input.count + 6 + 5 * (input.count / blockLimit + 1))
        out += [0x78, 0x01] // deflate with a 32 KiB window, no dictionary, "fastest"; (0x7801 % 31 == 0)
        var offset = 0
        repeat {
            let count = min(blockLimit, input.count - offset)
            let length = UInt16(count)
            out.append(offset + count == input.count ? 1 : 0) // BFINAL, BTYPE 00 (stored), padded to the byte
            out += [UInt8(length & 0xff), UInt8(length >> 8), UInt8(~length & 0xff), UInt8(~length >> 8)]
            if count > 0 { out.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[offset..<(offset + count)])) }
            offset += count
        } while offset < input.count
        let sum = UInt32(adler32(1, input.baseAddress?.assumingMemoryBound(to: Bytef.self), uInt(input.count)))
        out += [UInt8(sum >> 24), UInt8((sum >> 16) & 0xff), UInt8((sum >> 8) & 0xff), UInt8(sum & 0xff)]
        return out
    }

    public static func compress(_ input: [UInt8], level: Int32 = Deflate.level) -> [UInt8] {
        input.withUnsafeBytes { compress($0, level: level) }
    }

    /// Compresses for sending: content that does not shrink (already compressed, encrypted or
    /// random) is stored in zlib's uncompressed blocks instead of spending CPU on it. The byte
    /// entropy of the first 4 KiB decides: a deflate probe costs more than a small file's whole
    /// send, mostly in building Huffman trees for bytes that have no pattern.
    public static func compressForSending(_ input: [UInt8]) -> [UInt8] {
        input.withUnsafeBytes { buffer in
            let sample = UnsafeRawBufferPointer(rebasing: buffer[0..<min(buffer.count, 4096)])
            if sample.count >= 512 && entropyBits(sample) > incompressibleBits { return stored(buffer) }
            return compress(buffer, level: level)
        }
    }

    /// Above this many bits per byte (of 8) content is taken as incompressible. Text and most
    /// uncompressed binary formats stay well under 7; compressed or random bytes measure 7.6 on a
    /// 512-byte sample and 7.95 on 4 KiB. Content whose bytes are evenly spread yet repeat in long
    /// runs (rare) is sent stored: larger, never wrong.
    static let incompressibleBits = 7.5

    /// Order-0 (byte frequency) entropy of `sample`, in bits per byte.
    static func entropyBits(_ sample: UnsafeRawBufferPointer) -> Double {
        withUnsafeTemporaryAllocation(of: Int32.self, capacity: 256) { counts in
            counts.initialize(repeating: 0)
            for byte in sample { counts[Int(byte)] += 1 }
            let total = Double(sample.count)
            var bits = 0.0
            for count in counts where count > 0 {
                let share = Double(count) / total
                bits -= share * log2(share)
            }
            return bits
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
