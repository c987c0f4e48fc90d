import SinkiRecord

/// A remote change applied to the disk, as `sinkid watch` prints it (one JSON line).
public struct WatchEvent: Sendable, Equatable {
    public var path: String
    /// `changed`, `deleted`, `merged` or `conflict` (the observer events of docs/configuration.md).
    public var event: String
    /// Where it is on this machine.
    public var localPath: String
    /// The record's type (merge rule, `dir`, `symlink`).
    public var type: String
    public var at: Int64

    public init(path: String, event: String, localPath: String, type: String, at: Int64) {
        self.path = path
        self.event = event
        self.localPath = localPath
        self.type = type
        self.at = at
    }

    public var json: JSONValue {
        .object([("event", .string(event)), ("path", .string(path)), ("localPath", .string(localPath)),
                 ("type", .string(type)), ("at", .time(at))])
    }

    public init(json: JSONValue) throws(ControlError) {
        let fields = JSONFields(json, what: "event")
        self.init(path: try fields.string("path"), event: try fields.string("event"), localPath: try fields.string("localPath"),
                  type: try fields.string("type"), at: try fields.time("at"))
    }
}
