import CCrypto

/// A streaming SHA-256 or SHA-1 hash through OpenSSL's libcrypto (SHA-NI where the CPU has it).
public final class Digest {
    /// The algorithms sinki uses: SHA-256 for content, SHA-1 for tus checksums peers ask for.
    public enum Algorithm: String, Sendable {
        case sha256
        case sha1

        var md: OpaquePointer? { self == .sha256 ? EVP_sha256() : EVP_sha1() }
        public var byteCount: Int { self == .sha256 ? 32 : 20 }
    }

    private let context: OpaquePointer
    public let algorithm: Algorithm

    public init(_ algorithm: Algorithm = .sha256) {
        guard let context = EVP_MD_CTX_new() else { fatalError("bug: EVP_MD_CTX_new failed (out of memory)") }
        self.context = context
        self.algorithm = algorithm
        EVP_DigestInit_ex(context, algorithm.md, nil)
    }

    private init(copying other: UInt, _ algorithm: Algorithm) {
        guard let context = EVP_MD_CTX_new() else { fatalError("bug: EVP_MD_CTX_new failed (out of memory)") }
        EVP_MD_CTX_copy_ex(context, OpaquePointer(bitPattern: other))
        self.context = context
        self.algorithm = algorithm
    }

    deinit { EVP_MD_CTX_free(context) }

    /// An independent hasher in the same state: feed it bytes that may yet be taken back.
    /// Made from the C state alone, the copy shares nothing with this digest: it may go to another thread.
    public func copy() -> sending Digest {
        // The context crosses as an address (pointers are not Sendable); it is only read, during this call.
        Digest(copying: UInt(bitPattern: context), algorithm)
    }

    public func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        EVP_DigestUpdate(context, base, bytes.count)
    }

    public func update(_ bytes: [UInt8]) { bytes.withUnsafeBytes { update($0) } }

    /// The digest so far; the hasher starts over afterwards.
    public func finish() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &out, &length)
        EVP_DigestInit_ex(context, algorithm.md, nil)
        return Array(out[0..<Int(length)])
    }

    public func finishHex() -> String { Hex.encode(finish()) }

    /// One-shot hash of a buffer.
    public static func hash(_ bytes: UnsafeRawBufferPointer, _ algorithm: Algorithm = .sha256) -> [UInt8] {
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
