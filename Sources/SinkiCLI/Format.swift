import SinkiControl
import SinkiRecord
import SinkiSupport

/// Numbers and times for people, as status prints them.
enum Format {
    static func bytes(_ count: Int64) -> String { HumanUnits.bytes(count) }

    static func duration(_ seconds: Double) -> String { HumanUnits.duration(seconds) }

    /// `3s ago`, or `just now`.
    static func ago(_ nanoseconds: Int64, now: Int64) -> String {
        let seconds = Double(now - nanoseconds) / 1e9
        return seconds < 1 ? "just now" : duration(seconds) + " ago"
    }

    static func one(_ value: Double) -> String { HumanUnits.oneDecimal(value) }

    /// The columns `text` takes on a terminal: colour escapes take none, every other character one.
    static func columns(_ text: String) -> Int {
        var count = 0
        var escaped = false
        for character in text {
            if escaped {
                if character.isLetter { escaped = false }
            } else if character == "\u{1B}" {
                escaped = true
            } else {
                count += 1
            }
        }
        return count
    }

    static func plural(_ count: Int, _ word: String) -> String { "\(count) \(word)\(count == 1 ? "" : "s")" }

    /// A conflict for people: its path, who it is with and where it was found, then each version and
    /// where it is kept.
    static func conflict(_ conflict: ConflictEntry, now: Int64) -> [String] {
        func side(_ name: String, _ version: ConflictVersion) -> String {
            let facts = version.deleted ? "deleted" : "\(bytes(version.size)), modified \(ago(version.modifiedAt, now: now))"
            return "  \(name) (\(version.device)): \(facts)" + (version.copy.map { ", kept at \($0)" } ?? "")
        }
        let found = conflict.foundBy == conflict.local.device ? "found here" : "found on \(conflict.foundBy)"
        let reach = conflict.shared ? "; every device lists it" : ""
        return ["\(conflict.path)  with \(conflict.remoteDevice), \(found) \(ago(conflict.detectedAt, now: now))\(reach)",
                side("local", conflict.local), side("remote", conflict.remote)]
    }
}
