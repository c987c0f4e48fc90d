import SinkiRecord
import SinkiSupport

/// What a device token may do: everything its user may, or less. A token minted from another is never
/// wider than its parent (`narrows(_:)`).
public struct TokenScope: Sendable, Equatable, Hashable {
    /// Reads only: no saves, deletes or uploads.
    public var readOnly: Bool
    /// Only record paths at or below this (`SaveGames` or `SaveGames/slot1`); nil: every path.
    public var prefix: String?
    /// Largest upload, in bytes; nil: the server's own limit.
    public var maxUploadBytes: Int64?
    /// Uploads the token (and the chain of tokens refreshed from it) may start; nil: no limit.
    public var maxUploads: Int64?
    /// When it stops working (nanoseconds since the epoch); nil: never.
    public var expiresAt: Int64?

    public init(readOnly: Bool = false, prefix: String? = nil, maxUploadBytes: Int64? = nil, maxUploads: Int64? = nil,
                expiresAt: Int64? = nil) {
        self.readOnly = readOnly
        self.prefix = prefix
        self.maxUploadBytes = maxUploadBytes
        self.maxUploads = maxUploads
        self.expiresAt = expiresAt
    }

    /// Everything a user may do.
    public static let full = TokenScope()

    /// Whether a record path is within the scope's prefix.
    public func covers(_ path: String) -> Bool {
        guard let prefix else { return true }
        return PathText.isWithin(path, prefix)
    }

    /// Whether a look-up or feed prefix asks only for what the scope covers.
    public func covers(prefix asked: String?) -> Bool {
        guard let prefix else { return true }
        guard let asked else { return false }
        return PathText.isWithin(asked, prefix)
    }

    /// The first field in which `self` would be wider than `parent`, by its wire name; nil when it is
    /// as narrow or narrower in every one.
    public func widerField(than parent: TokenScope) -> String? {
        if parent.readOnly && !readOnly { return "readOnly" }
        if let parentPrefix = parent.prefix {
            guard let prefix, PathText.isWithin(prefix, parentPrefix) else { return "prefix" }
        }
        if let limit = parent.maxUploadBytes {
            guard let mine = maxUploadBytes, mine <= limit else { return "maxUploadBytes" }
        }
        if let limit = parent.maxUploads {
            guard let mine = maxUploads, mine <= limit else { return "maxUploads" }
        }
        if let limit = parent.expiresAt {
            guard let mine = expiresAt, mine <= limit else { return "expiresAt" }
        }
        return nil
    }

    /// A scope in words, for `token list` and logs.
    public var summary: String {
        var parts: [String] = []
        if readOnly { parts.append("read-only") }
        if let prefix { parts.append("prefix \(prefix)/") }
        if let maxUploadBytes { parts.append("uploads ≤ \(maxUploadBytes) B") }
        if let maxUploads { parts.append("≤ \(maxUploads) uploads") }
        return parts.isEmpty ? "full" : parts.joined(separator: ", ")
    }
}
