import Foundation
import Glibc
import SinkiConfig

/// A moment as `restore --at` takes it, and as `history` shows one.
enum Moment {
    /// Nanoseconds since the epoch of `text`: RFC 3339 (`2026-12-01T18:00:00Z`, `…+01:00`, with a
    /// fraction or not), a local time (`2026-12-01 18:00` or `2026-12-01 18:00:05`, this machine's zone),
    /// or an age before `now` (`10m`, `2h`, `3d`, `1h30m`). Nil for anything else.
    static func parse(_ text: String, now: Int64) -> Int64? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if let first = trimmed.unicodeScalars.first, CharacterSet.decimalDigits.contains(first), !trimmed.contains("-"), !trimmed.contains(":") {
            guard let age = ConfigValues.duration(trimmed), age >= .zero else { return nil }
            let (seconds, attoseconds) = age.components
            return now - seconds * 1_000_000_000 - attoseconds / 1_000_000_000
        }
        for options: ISO8601DateFormatter.Options in [[.withInternetDateTime], [.withInternetDateTime, .withFractionalSeconds]] {
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = options
            if let date = formatter.date(from: trimmed) {
                // Whole seconds and microseconds apart: a Double of nanoseconds since 1970 is off by hundreds.
                let seconds = date.timeIntervalSince1970.rounded(.down)
                return Int64(seconds) * 1_000_000_000 + Int64(((date.timeIntervalSince1970 - seconds) * 1e6).rounded()) * 1000
            }
        }
        return local(trimmed)
    }

    /// `YYYY-MM-DD HH:MM[:SS]` in this machine's time zone (`mktime` decides summer time).
    private static func local(_ text: String) -> Int64? {
        let halves = text.split(separator: " ", omittingEmptySubsequences: true)
        guard halves.count == 2 else { return nil }
        let date = halves[0].split(separator: "-", omittingEmptySubsequences: false).map { Int32($0) }
        let time = halves[1].split(separator: ":", omittingEmptySubsequences: false).map { Int32($0) }
        guard date.count == 3, time.count == 2 || time.count == 3, !(date + time).contains(nil),
              halves[0].utf8.count == 10 else { return nil }
        let (year, month, day) = (date[0]!, date[1]!, date[2]!)
        let (hour, minute, second) = (time[0]!, time[1]!, time.count == 3 ? time[2]! : 0)
        guard (1...12).contains(month), (1...31).contains(day), (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second) else {
            return nil
        }
        var parts = tm()
        parts.tm_year = year - 1900
        parts.tm_mon = month - 1
        parts.tm_mday = day
        parts.tm_hour = hour
        parts.tm_min = minute
        parts.tm_sec = second
        parts.tm_isdst = -1
        let seconds = mktime(&parts)
        // A day past its month's end comes back normalised into the next: refused.
        guard seconds != -1, parts.tm_mday == day else { return nil }
        return Int64(seconds) * 1_000_000_000
    }

    /// `2026-12-01 18:00:05` in this machine's time zone.
    static func local(_ nanoseconds: Int64) -> String { format(nanoseconds, "%Y-%m-%d %H:%M:%S", utc: false) }

    /// `2026-12-01T18:00:05Z`.
    static func utc(_ nanoseconds: Int64) -> String { format(nanoseconds, "%Y-%m-%dT%H:%M:%SZ", utc: true) }

    private static func format(_ nanoseconds: Int64, _ pattern: String, utc: Bool) -> String {
        var seconds = time_t(nanoseconds / 1_000_000_000)
        var parts = tm()
        if utc { gmtime_r(&seconds, &parts) } else { localtime_r(&seconds, &parts) }
        var buffer = [CChar](repeating: 0, count: 64)
        let count = strftime(&buffer, buffer.count, pattern, &parts)
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
