import Glibc

/// The pieces of the tus 1.0.0 protocol that both ends of sinki speak: version, header formats.
public enum Tus {
    /// The only protocol version sinki speaks, sent in `Tus-Resumable` and `Tus-Version`.
    public static let version = "1.0.0"
    /// The body type of a PATCH (and of a creation-with-upload POST).
    public static let chunkType = "application/offset+octet-stream"
    /// The `Upload-Metadata` key that makes an upload a content-defined chunk: its value is the chunk's
    /// SHA-256 in lowercase hex, and the finished upload goes to the user's chunks under that name.
    public static let chunkMetadataKey = "chunk"
}

/// `Upload-Metadata`: comma-separated `key base64value` pairs (the value may be absent).
///
/// Parsing is strict, because the server hands back what it parsed, never the raw header: keys are
/// 1–255 printable ASCII characters other than space and comma, each key at most once, values are
/// canonical base64 (padded) of at most 64 KiB.
public struct TusMetadata: Sendable, Equatable {
    public struct Pair: Sendable, Equatable {
        public var key: String
        /// nil when the key came without a value (allowed by tus); raw bytes, not necessarily UTF-8.
        public var value: [UInt8]?

        public init(key: String, value: [UInt8]?) {
            self.key = key
            self.value = value
        }
    }

    public var pairs: [Pair]

    public init(_ pairs: [Pair] = []) { self.pairs = pairs }

    /// Pairs of UTF-8 text.
    public init(text: [(String, String)]) { pairs = text.map { Pair(key: $0.0, value: Array($0.1.utf8)) } }

    public static let maxKeyBytes = 255
    public static let maxValueBytes = 64 << 10
    public static let maxPairs = 64

    /// Why a header was refused.
    public struct Invalid: Error, Sendable, Equatable, CustomStringConvertible {
        public var description: String
    }

    /// Parses the header; an empty header is no pairs.
    public static func parse(_ header: String) throws(Invalid) -> TusMetadata {
        var pairs: [Pair] = []
        var seen = Set<String>()
        let items = header.split(separator: ",", omittingEmptySubsequences: false)
        if header.allSatisfy({ $0 == " " || $0 == "\t" }) { return TusMetadata() }
        guard items.count <= maxPairs else { throw Invalid(description: "more than \(maxPairs) metadata pairs") }
        for item in items {
            let words = item.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard (1...2).contains(words.count) else {
                throw Invalid(description: "metadata item \(quoted(String(item))) is not KEY or KEY BASE64VALUE")
            }
            let key = String(words[0])
            guard (1...maxKeyBytes).contains(key.utf8.count), key.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ",") }) else {
                throw Invalid(description: "metadata key \(quoted(key)) must be 1-\(maxKeyBytes) printable ASCII characters without spaces or commas")
            }
            guard seen.insert(key).inserted else { throw Invalid(description: "metadata key \(quoted(key)) appears twice") }
            var value: [UInt8]?
            if words.count == 2 {
                let text = String(words[1])
                guard text.utf8.count <= (maxValueBytes + 2) / 3 * 4, let decoded = Base64.decode(text),
                      Base64.encode(decoded) == text else {
                    throw Invalid(description: "the value of metadata key \(quoted(key)) is not canonical base64 of at most \(maxValueBytes) bytes")
                }
                value = decoded
            }
            pairs.append(Pair(key: key, value: value))
        }
        return TusMetadata(pairs)
    }

    /// The header text, encoded afresh from the pairs.
    public var header: String {
        pairs.map { pair in pair.value.map { "\(pair.key) \(Base64.encode($0))" } ?? pair.key }.joined(separator: ",")
    }

    /// The value of `key` as UTF-8 text, if present and valid.
    public func text(_ key: String) -> String? {
        pairs.first { $0.key == key }?.value.flatMap { String(validating: $0, as: UTF8.self) }
    }
}

/// `Upload-Checksum: ALGORITHM BASE64DIGEST`.
public struct TusChecksum: Sendable, Equatable {
    public var algorithm: String
    public var digest: [UInt8]

    public init(algorithm: String, digest: [UInt8]) {
        self.algorithm = algorithm
        self.digest = digest
    }

    /// nil when the header is not two words with a base64 second.
    public static func parse(_ header: String) -> TusChecksum? {
        let words = header.split(separator: " ", omittingEmptySubsequences: true)
        guard words.count == 2, let digest = Base64.decode(String(words[1])) else { return nil }
        return TusChecksum(algorithm: words[0].lowercased(), digest: digest)
    }

    public var header: String { "\(algorithm) \(Base64.encode(digest))" }
}

/// HTTP dates (RFC 9110 IMF-fixdate), as `Upload-Expires` carries them.
public enum HTTPDate {
    private static let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// `Sun, 06 Nov 1994 08:49:37 GMT` for nanoseconds since the epoch.
    public static func format(_ nanoseconds: Int64) -> String {
        var seconds = time_t(nanoseconds / 1_000_000_000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }

    /// Nanoseconds since the epoch of an IMF-fixdate; nil for anything else, and for a date that
    /// nanoseconds since the epoch cannot hold (before 1677 or after 2262).
    public static func parse(_ text: String) -> Int64? {
        // Fixed-width digits only: `Int32` alone takes signs and any length, and a year such as 19294
        // or -2147483648 overflowed the arithmetic below (a trap, found by fuzzing).
        func digits(_ word: Substring, _ count: Int) -> Int32? {
            guard word.utf8.count == count, word.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
            return Int32(word)
        }
        let words = text.split(separator: " ")
        guard words.count == 6, words[5] == "GMT", let day = digits(words[1], 2), let month = months.firstIndex(of: String(words[2])),
              let year = digits(words[3], 4) else { return nil }
        let clock = words[4].split(separator: ":")
        guard clock.count == 3, let hour = digits(clock[0], 2), let minute = digits(clock[1], 2), let second = digits(clock[2], 2),
              (1...31).contains(day), hour < 24, minute < 60, second <= 60 else { return nil }
        var parts = tm()
        parts.tm_year = year - 1900
        parts.tm_mon = Int32(month)
        parts.tm_mday = day
        parts.tm_hour = hour
        parts.tm_min = minute
        parts.tm_sec = second
        let (nanoseconds, overflow) = Int64(timegm(&parts)).multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? nil : nanoseconds
    }
}
