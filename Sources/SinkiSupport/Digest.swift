import CCrypto
import CZlib

/// A streaming hash: SHA-256 or SHA-1 through OpenSSL's libcrypto (SHA-NI where the CPU has it), or
/// CRC-32 through zlib.
public final class Digest {
    /// The algorithms sinki uses: SHA-256 for content; for tus chunk checksums, CRC-32 (cheap, and all a
    /// chunk needs: the file's SHA-256 is checked end to end) and SHA-1 or SHA-256 for peers that ask.
    public enum Algorithm: String, Sendable, CaseIterable {
        case sha256
        case sha1
        /// CRC-32 as in zlib and gzip (ISO-HDLC, polynomial 0x04C11DB7 reflected); its digest is the
        /// value's 4 bytes, most significant first.
        case crc32

        var md: OpaquePointer? { self == .sha256 ? EVP_sha256() : EVP_sha1() }
        public var byteCount: Int {
            switch self {
            case .sha256: 32
            case .sha1: 20
            case .crc32: 4
            }
        }
    }

    private enum State {
        case evp(OpaquePointer)
        case crc(UInt)
    }

    private var state: State
    public let algorithm: Algorithm

    public init(_ algorithm: Algorithm = .sha256) {
        self.algorithm = algorithm
        state = Self.fresh(algorithm)
    }

    /// Initialises libcrypto so that it stays whole until the process is gone: without this, the
    /// first user (libcurl's global init, or a hash) lets it free its tables at exit, and a hash still
    /// running on a worker thread then fails (an agent stopped by SIGTERM mid-hash aborted so). Call
    /// first thing in `main`, before anything else touches OpenSSL; later calls change nothing.
    public static func keepLibraryUntilExit() {
        _ = sinki_crypto_init_without_atexit()
    }

    private static func fresh(_ algorithm: Algorithm) -> State {
        guard algorithm != .crc32 else { return .crc(0) }
        guard let context = EVP_MD_CTX_new() else { fatalError("bug: EVP_MD_CTX_new failed (out of memory)") }
        EVP_DigestInit_ex(context, algorithm.md, nil)
        return .evp(context)
    }

    private init(copying other: UInt, _ algorithm: Algorithm) {
        self.algorithm = algorithm
        guard algorithm != .crc32 else {
            state = .crc(other)
            return
        }
        guard let context = EVP_MD_CTX_new() else { fatalError("bug: EVP_MD_CTX_new failed (out of memory)") }
        EVP_MD_CTX_copy_ex(context, OpaquePointer(bitPattern: other))
        state = .evp(context)
    }

    deinit {
        if case .evp(let context) = state { EVP_MD_CTX_free(context) }
    }

    /// An independent hasher in the same state: feed it bytes that may yet be taken back.
    /// Made from the C state alone, the copy shares nothing with this digest: it may go to another thread.
    public func copy() -> sending Digest {
        switch state {
        case .evp(let context):
            // The context crosses as an address (pointers are not Sendable); it is only read, during this call.
            Digest(copying: UInt(bitPattern: context), algorithm)
        case .crc(let value):
            Digest(copying: value, algorithm)
        }
    }

    public func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        switch state {
        case .evp(let context):
            EVP_DigestUpdate(context, base, bytes.count)
        case .crc(let value):
            state = .crc(CZlib.crc32_z(value, base.assumingMemoryBound(to: UInt8.self), bytes.count))
        }
    }

    public func update(_ bytes: [UInt8]) { bytes.withUnsafeBytes { update($0) } }

    /// The digest so far; the hasher starts over afterwards.
    public func finish() -> [UInt8] {
        switch state {
        case .evp(let context):
            var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
            var length: UInt32 = 0
            EVP_DigestFinal_ex(context, &out, &length)
            EVP_DigestInit_ex(context, algorithm.md, nil)
            return Array(out[0..<Int(length)])
        case .crc(let value):
            state = .crc(0)
            return [UInt8(truncatingIfNeeded: value >> 24), UInt8(truncatingIfNeeded: value >> 16),
                    UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value)]
        }
    }

    public func finishHex() -> String { Hex.encode(finish()) }

    /// One-shot hash of a buffer.
    public static func hash(_ bytes: UnsafeRawBufferPointer, _ algorithm: Algorithm = .sha256) -> [UInt8] {
        guard algorithm != .crc32 else {
            let digest = Digest(.crc32)
            digest.update(bytes)
            return digest.finish()
        }
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        EVP_Digest(bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1), bytes.count, &out, &length, algorithm.md, nil)
        return Array(out[0..<Int(length)])
    }

    public static func hash(_ bytes: [UInt8], _ algorithm: Algorithm = .sha256) -> [UInt8] {
        bytes.withUnsafeBytes { hash($0, algorithm) }
    }

    public static func sha256Hex(_ bytes: [UInt8]) -> String { Hex.encode(hash(bytes)) }
}

/// Lowercase hexadecimal.
public enum Hex {
    public static func encode(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    public static func decode(_ text: String) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        func nibble(_ byte: UInt8) -> UInt8? {
            switch byte {
            case 48...57: return byte - 48
            case 97...102: return byte - 87
            case 65...70: return byte - 55
            default: return nil
            }
        }
        var out = [UInt8]()
        out.reserveCapacity(utf8.count / 2)
        var index = 0
        while index < utf8.count {
            guard let high = nibble(utf8[index]), let low = nibble(utf8[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }
}
