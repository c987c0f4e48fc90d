import SinkiSupport

/// One device's bearer token as the server keeps it: never the secret itself, only its hash.
public struct DeviceToken: Sendable, Equatable {
    /// Short and public (`token list`, `token revoke ID`); also the first part of the secret text.
    public var id: String
    public var user: String
    public var device: String
    public var scope: TokenScope
    /// The token it was minted from (nil: made by an administrator with `sinkid serve token add`).
    /// Revoking a token revokes every token minted from it.
    public var parentID: String?
    /// The first token of a chain of refreshes (`continues`): the chain shares one upload count.
    public var chainID: String
    /// SHA-256 of the secret.
    public var secretHash: [UInt8]
    public var createdAt: Int64
    public var lastUsedAt: Int64?
    public var revokedAt: Int64?
    /// Uploads started by the chain so far (against `scope.maxUploads`).
    public var uploadsUsed: Int64

    public init(id: String, user: String, device: String, scope: TokenScope, parentID: String?, chainID: String,
                secretHash: [UInt8], createdAt: Int64, lastUsedAt: Int64? = nil, revokedAt: Int64? = nil, uploadsUsed: Int64 = 0) {
        self.id = id
        self.user = user
        self.device = device
        self.scope = scope
        self.parentID = parentID
        self.chainID = chainID
        self.secretHash = secretHash
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
        self.revokedAt = revokedAt
        self.uploadsUsed = uploadsUsed
    }

    /// Whether the token works at `now`.
    public func isLive(at now: Int64) -> Bool {
        revokedAt == nil && (scope.expiresAt.map { now < $0 } ?? true)
    }
}

/// The text of a bearer token: `sinki_ID_SECRET`, where SECRET is 256 random bits (base64url). Only
/// its holder has it; the server keeps its SHA-256. A token in any other form (imported from a tokens
/// file) is known by the hash of its whole text, and its id is made from that hash.
public struct TokenSecret: Sendable, Equatable {
    public let text: String

    static let prefix = "sinki_"

    public init(text: String) { self.text = text }

    /// A new token for id `id`.
    public static func make(id: String) -> TokenSecret {
        var generator = SystemRandomNumberGenerator()
        var bytes = [UInt8](repeating: 0, count: 32)
        for index in bytes.indices { bytes[index] = UInt8.random(in: 0...255, using: &generator) }
        return TokenSecret(text: prefix + id + "_" + Base64URL.encode(bytes))
    }

    /// A new token id: 12 hex digits.
    public static func makeID() -> String { "t" + RandomID.hex(bytes: 6) }

    /// The id this text names (for a token of another form: one made from its hash).
    public var id: String {
        if text.hasPrefix(Self.prefix) {
            let rest = text.utf8.dropFirst(Self.prefix.utf8.count)
            if let underscore = rest.firstIndex(of: UInt8(ascii: "_")), let id = String(rest[..<underscore]), !id.isEmpty { return id }
        }
        return "x" + String(Digest.sha256Hex(Array(text.utf8)).prefix(12))
    }

    /// SHA-256 of the whole text.
    public var hash: [UInt8] { Digest.hash(Array(text.utf8)) }

    /// Whether this text hashes to `stored`, comparing every byte whatever the first difference.
    public func matches(_ stored: [UInt8]) -> Bool {
        let mine = hash
        guard mine.count == stored.count else { return false }
        var difference: UInt8 = 0
        for index in mine.indices { difference |= mine[index] ^ stored[index] }
        return difference == 0
    }
}

/// base64 with the URL alphabet and no padding (RFC 4648 §5): a token that fits in a header, a file
/// and a shell argument without quoting.
enum Base64URL {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        var index = 0
        while index + 2 < bytes.count {
            let value = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            for shift in [18, 12, 6, 0] { out.append(alphabet[Int(value >> UInt32(shift) & 63)]) }
            index += 3
        }
        let left = bytes.count - index
        if left == 1 {
            let value = UInt32(bytes[index]) << 16
            out += [alphabet[Int(value >> 18 & 63)], alphabet[Int(value >> 12 & 63)]]
        } else if left == 2 {
            let value = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8
            out += [alphabet[Int(value >> 18 & 63)], alphabet[Int(value >> 12 & 63)], alphabet[Int(value >> 6 & 63)]]
        }
        return String(decoding: out, as: UTF8.self)
    }
}
