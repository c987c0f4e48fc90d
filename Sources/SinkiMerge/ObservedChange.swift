import SinkiConfig
import SinkiRecord
import SinkiSupport

/// A remote change applied on this machine, as observers and `sinkid watch` see it. Never made for
/// this machine's own edits (the agent only makes these when it applies something from the server).
public struct ObservedChange: Sendable, Equatable {
    /// What happened to the path.
    public enum Event: String, Sendable, CaseIterable {
        /// New or new content from another device.
        case changed
        /// Deleted on another device.
        case deleted
        /// Edited on both sides and merged by the path's rule.
        case merged
        /// Edited on both sides and not merged: a conflict copy was kept, or the rule asks the user.
        case conflict
    }

    public var path: RecordPath
    public var event: Event
    /// The absolute path of the file on this machine.
    public var localPath: String
    /// The record's `type` (the merge rule named by its writer, or `dir`, `symlink`).
    public var type: String
    /// When it was applied, nanoseconds since the Unix epoch.
    public var time: Int64

    public init(path: RecordPath, event: Event, localPath: String, type: String, time: Int64 = Clock.now()) {
        self.path = path
        self.event = event
        self.localPath = localPath
        self.type = type
        self.time = time
    }

    /// Whether the change is for `watched`, written as in `[observe PATH]` and `sinkid watch PATH`:
    /// a path ending in `/` covers everything below it (`/` alone: everything), else only itself.
    public func matches(_ watched: String) -> Bool {
        if watched == "/" { return true }
        return watched.hasSuffix("/") ? path.string.hasPrefix(watched) : path.string == watched
    }

    /// The placeholders of an observer's `exec`.
    public var placeholders: [Placeholder: String] {
        [.path: path.string, .event: event.rawValue, .local: localPath]
    }

    /// The variables an observer gets in its environment.
    public var environment: [String: String] {
        ["SINKI_PATH": path.string, "SINKI_EVENT": event.rawValue, "SINKI_LOCAL_PATH": localPath, "SINKI_TYPE": type]
    }
}

/// The line `sinkid watch` prints per change: one JSON object, then `\n`. The schema (stable; new
/// keys may be added, existing ones keep their meaning):
///
/// | key | JSON type | meaning |
/// | --- | --- | --- |
/// | `path` | string | record path, `Root/relative/path` |
/// | `event` | string | `changed`, `deleted`, `merged` or `conflict` |
/// | `localPath` | string | the file on this machine, absolute |
/// | `type` | string | the record's type (merge rule name, `dir`, `symlink`) |
/// | `time` | string | when it was applied, RFC 3339 UTC with milliseconds |
///
/// Example: `{"path":"SaveGames/p1.save","event":"changed","localPath":"/home/a/SaveGames/p1.save","type":"compare","time":"2025-05-01T10:00:00.000Z"}`
public enum WatchLine {
    public static func render(_ change: ObservedChange) -> String {
        var writer = JSONWriter(capacity: 160)
        writer.beginObject()
        writer.field("path", change.path.string)
        writer.field("event", change.event.rawValue)
        writer.field("localPath", change.localPath)
        writer.field("type", change.type)
        writer.field("time", Clock.iso8601(change.time))
        writer.endObject()
        return String(decoding: writer.bytes, as: UTF8.self) + "\n"
    }
}
