import SinkiControl
import SinkiRecord
import SinkiSupport

/// Numbers and times for people, as status prints them.
enum Format {
    /// `512 B`, `3.4 KiB`, `12.0 MiB`, `1.2 GiB`.
    static func bytes(_ count: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(count)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(count) B" : "\(one(value)) \(units[unit])"
    }

    /// `4s`, `12m`, `3h 5m`, `2d 4h`.
    static func duration(_ seconds: Double) -> String {
        let total = Int(max(0, seconds).rounded())
        if total < 60 { return "\(total)s" }
        if total < 3600 { return "\(total / 60)m" + (total % 60 > 0 && total < 600 ? " \(total % 60)s" : "") }
        if total < 86400 { return "\(total / 3600)h" + (total % 3600 / 60 > 0 ? " \(total % 3600 / 60)m" : "") }
        return "\(total / 86400)d" + (total % 86400 / 3600 > 0 ? " \(total % 86400 / 3600)h" : "")
    }

    /// `3s ago`, or `just now`.
    static func ago(_ nanoseconds: Int64, now: Int64) -> String {
        let seconds = Double(now - nanoseconds) / 1e9
        return seconds < 1 ? "just now" : duration(seconds) + " ago"
    }

    static func one(_ value: Double) -> String {
        let tenths = Int((value * 10).rounded())
        return "\(tenths / 10).\(tenths % 10)"
    }

    static func plural(_ count: Int, _ word: String) -> String { "\(count) \(word)\(count == 1 ? "" : "s")" }

    /// A conflict for people: its path and who it is with, then each version and where it is kept.
    static func conflict(_ conflict: ConflictEntry, now: Int64) -> [String] {
        func side(_ name: String, _ version: ConflictVersion) -> String {
            let facts = version.deleted ? "deleted" : "\(bytes(version.size)), modified \(ago(version.modifiedAt, now: now))"
            return "  \(name) (\(version.device)): \(facts)" + (version.copy.map { ", kept at \($0)" } ?? "")
        }
        return ["\(conflict.path)  with \(conflict.remoteDevice), \(ago(conflict.detectedAt, now: now))",
                side("local", conflict.local), side("remote", conflict.remote)]
    }
}
