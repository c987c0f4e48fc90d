import SinkiRecord

/// Names of conflict copies: `name.sync-conflict-YYYYMMDD-HHMMSS-DEVICE.ext` beside the path
/// (docs/merge-rules.md), with `-N` before the extension when that name is taken.
public enum ConflictName {
    /// The `attempt`th candidate for a copy of `path`'s version written by `device` at `modifiedAt`
    /// (nanoseconds since the epoch). The executor takes the first candidate that is free in every
    /// tree and on disk; the name stays in the path's own folder, so a copy never leaves its root.
    public static func candidate(for path: RecordPath, device: String, modifiedAt: Int64, attempt: Int = 0) -> RecordPath {
        let name = path.name
        let utf8 = Array(name.utf8)
        // A leading dot is a hidden file's name, not an extension.
        let dot = utf8.lastIndex(of: UInt8(ascii: ".")).flatMap { $0 > 0 ? $0 : nil }
        let stem = String(decoding: utf8[..<(dot ?? utf8.count)], as: UTF8.self)
        let ext = dot.map { String(decoding: utf8[$0...], as: UTF8.self) } ?? ""
        let counter = attempt > 0 ? "-\(attempt)" : ""
        let copy = "\(stem).sync-conflict-\(stamp(modifiedAt))-\(safe(device))\(counter)\(ext)"
        let folder = path.parent?.string ?? path.root
        // Only a name longer than NAME_MAX can fail here; the stem is then cut until it fits.
        if let made = try? RecordPath(validating: folder + "/" + copy) { return made }
        let budget = max(1, RecordPath.maxComponentBytes - (copy.utf8.count - stem.utf8.count))
        let cut = String(decoding: Array(stem.utf8.prefix(budget)), as: UTF8.self)
        let shorter = "\(cut).sync-conflict-\(stamp(modifiedAt))-\(safe(device))\(counter)\(ext)"
        return (try? RecordPath(validating: folder + "/" + shorter)) ?? path
    }

    /// A device name cannot add a folder level or a byte a path refuses.
    private static func safe(_ device: String) -> String {
        let cleaned = String(device.unicodeScalars.map { $0 == "/" || $0 == "\\" || $0.value < 0x20 ? "_" : Character($0) })
        return cleaned.isEmpty ? "device" : String(cleaned.prefix(64))
    }

    /// `YYYYMMDD-HHMMSS` in UTC (days to civil date: Howard Hinnant's algorithm, no Foundation).
    static func stamp(_ nanoseconds: Int64) -> String {
        let seconds = nanoseconds / 1_000_000_000 - (nanoseconds % 1_000_000_000 < 0 ? 1 : 0)
        var days = seconds / 86_400
        var rest = seconds % 86_400
        if rest < 0 { rest += 86_400; days -= 1 }
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(year)\(two(month))\(two(day))-\(two(rest / 3600))\(two(rest / 60 % 60))\(two(rest % 60))"
    }
}
