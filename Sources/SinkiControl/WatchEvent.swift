/// A remote change applied to the disk, for the `sinkid watch` clients whose path covers it: its
/// record path and the line they are sent, rendered by the agent (`SinkiMerge.WatchLine`, the
/// schema of docs/merge-rules.md).
public struct WatchEvent: Sendable, Equatable {
    public var path: String
    /// One JSON object and its `\n`.
    public var line: [UInt8]

    public init(path: String, line: [UInt8]) {
        self.path = path
        self.line = line
    }
}
