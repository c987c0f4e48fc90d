import SinkiSupport

/// Names for the copy that keeps the losing side of a conflict beside the path (design §5):
/// `name.sync-conflict-YYYYMMDD-HHMMSS-DEVICE.ext`.
public enum ConflictName {
    public static let marker = ".sync-conflict-"

    /// The conflict copy's name for `name`, written by `device`, at `time` (ns since the epoch);
    /// `attempt` > 0 adds a counter when that name is taken.
    public static func make(for name: String, device: String, time: Int64, attempt: Int = 0) -> String {
        let safeDevice = String(device.map { $0 == "/" || $0 == "\0" || $0 == "\\" ? "_" : $0 }.prefix(64))
        var tag = marker + Clock.conflictStamp(time) + "-" + (safeDevice.isEmpty ? "unknown" : safeDevice)
        if attempt > 0 { tag += "-\(attempt)" }
        // The extension is what follows the last dot, unless that dot starts the name (".bashrc").
        if let dot = name.lastIndex(of: "."), dot != name.startIndex {
            let stem = name[..<dot]
            let ext = name[dot...]
            return String(stem) + tag + String(ext)
        }
        return name + tag
    }

    /// Whether a name is a conflict copy.
    public static func isConflictCopy(_ name: String) -> Bool { name.contains(marker) }
}
