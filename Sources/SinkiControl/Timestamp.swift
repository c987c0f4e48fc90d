import Glibc
import SinkiSupport

/// Times in control answers: RFC 3339 UTC with milliseconds (`2026-11-01T12:00:00.123Z`), as logs write them.
public enum Timestamp {
    public static func format(_ nanoseconds: Int64) -> String { Clock.iso8601(nanoseconds) }

    /// Reads `YYYY-MM-DDTHH:MM:SS[.fraction]Z`; nil for anything else.
    public static func parse(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20, bytes.last == UInt8(ascii: "Z") else { return nil }
        func number(_ from: Int, _ count: Int) -> Int32? {
            var value: Int32 = 0
            for byte in bytes[from..<from + count] {
                guard (48...57).contains(byte) else { return nil }
                value = value * 10 + Int32(byte - 48)
            }
            return value
        }
        guard bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"), bytes[10] == UInt8(ascii: "T"),
              bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"),
              let year = number(0, 4), let month = number(5, 2), let day = number(8, 2),
              let hour = number(11, 2), let minute = number(14, 2), let second = number(17, 2) else { return nil }
        var fraction: Int64 = 0
        var index = 19
        if bytes[index] == UInt8(ascii: ".") {
            index += 1
            var scale: Int64 = 100_000_000
            while index < bytes.count - 1 {
                let byte = bytes[index]
                guard (48...57).contains(byte) else { return nil }
                fraction += Int64(byte - 48) * scale
                scale /= 10
                index += 1
            }
        }
        guard index == bytes.count - 1 else { return nil }
        var parts = tm()
        parts.tm_year = year - 1900
        parts.tm_mon = month - 1
        parts.tm_mday = day
        parts.tm_hour = hour
        parts.tm_min = minute
        parts.tm_sec = second
        let seconds = timegm(&parts)
        return Int64(seconds) * 1_000_000_000 + fraction
    }
}
