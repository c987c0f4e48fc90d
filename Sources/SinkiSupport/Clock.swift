import Glibc

/// Wall-clock and monotonic time in nanoseconds.
public enum Clock {
    /// Nanoseconds since the Unix epoch.
    public static func now() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
    }

    /// Nanoseconds on a clock that never jumps.
    public static func monotonic() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
    }

    /// `YYYYMMDD-HHMMSS` in UTC, as conflict copies are named.
    public static func conflictStamp(_ nanoseconds: Int64) -> String {
        var seconds = time_t(nanoseconds / 1_000_000_000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(parts.tm_year + 1900)\(two(parts.tm_mon + 1))\(two(parts.tm_mday))-\(two(parts.tm_hour))\(two(parts.tm_min))\(two(parts.tm_sec))"
    }

    /// RFC 3339 UTC with milliseconds, for logs and status.
    public static func iso8601(_ nanoseconds: Int64) -> String {
        var seconds = time_t(nanoseconds / 1_000_000_000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ value: Int, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        let millis = Int(nanoseconds % 1_000_000_000 / 1_000_000)
        return "\(pad(Int(parts.tm_year) + 1900, 4))-\(pad(Int(parts.tm_mon) + 1, 2))-\(pad(Int(parts.tm_mday), 2))T"
            + "\(pad(Int(parts.tm_hour), 2)):\(pad(Int(parts.tm_min), 2)):\(pad(Int(parts.tm_sec), 2)).\(pad(millis, 3))Z"
    }
}
