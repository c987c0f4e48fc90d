import SinkiRecord

/// What the control socket asks of a running agent. The agent implements it; `ControlServer` turns
/// requests into these calls and their results into answers (docs/control.md).
public protocol ControlHandler: Actor {
    /// Everything `sinkid status` shows.
    func status() async -> StatusReport
    /// Stops pushes and pulls until `resume` (the batch in flight finishes); with `root`, only that
    /// root's sending and applying.
    func pause(root: String?) async throws(ControlError) -> ControlAck
    /// Ends a pause (every one, or `root`'s), and confirms a safety stop.
    func resume(root: String?) async throws(ControlError) -> ControlAck
    /// Looks at the disk again and asks the server for news now.
    func syncNow(verify: Bool) async -> ControlAck
    /// Puts refused changes (all, or at or below `path`) back in the queue; returns their paths.
    func retry(path: String?) async throws(ControlError) -> [String]
    /// Conflicts left for `resolve`.
    func conflicts() async throws(ControlError) -> [ConflictEntry]
    func resolve(path: String, keep: ResolveChoice) async throws(ControlError) -> ControlAck
    /// Checks that `path` can be watched here (its root is synced); events then come through
    /// `ControlServer.publish`.
    func checkWatch(_ path: WatchPath) async throws(ControlError)
    /// The server the agent syncs with and how it authenticates.
    func server() async throws(ControlError) -> ServerAccessNote
}

/// Where an agent's server is (`server` on the control socket): what a command needs to ask that
/// server itself with the agent's token. The token is not in it: its file is, readable by the user
/// who runs the agent, as the socket is.
public struct ServerAccessNote: Sendable, Equatable {
    public var url: String
    /// The bearer token's file; nil when the agent sends none.
    public var tokenFile: String?
    /// Certificates trusted for an `https://` server; nil: the system's.
    public var caFile: String?
    public var device: String
    /// Each root's name and folder.
    public var roots: [(name: String, path: String)]

    public init(url: String, tokenFile: String?, caFile: String?, device: String, roots: [(name: String, path: String)]) {
        self.url = url
        self.tokenFile = tokenFile
        self.caFile = caFile
        self.device = device
        self.roots = roots
    }

    public static func == (lhs: ServerAccessNote, rhs: ServerAccessNote) -> Bool {
        lhs.url == rhs.url && lhs.tokenFile == rhs.tokenFile && lhs.caFile == rhs.caFile && lhs.device == rhs.device
            && lhs.roots.map(\.name) == rhs.roots.map(\.name) && lhs.roots.map(\.path) == rhs.roots.map(\.path)
    }

    public var json: JSONValue {
        .object([("url", .string(url)), ("tokenFile", tokenFile.map { .string($0) } ?? .null), ("caFile", caFile.map { .string($0) } ?? .null),
                 ("device", .string(device)),
                 ("roots", .array(roots.map { .object([("name", .string($0.name)), ("path", .string($0.path))]) }))])
    }

    public init(json: JSONValue) throws(ControlError) {
        let fields = JSONFields(json, what: "answer", code: .badResponse)
        var roots: [(name: String, path: String)] = []
        for item in try fields.array("roots") {
            let root = JSONFields(item, what: "root", code: .badResponse)
            roots.append((try root.string("name"), try root.string("path")))
        }
        self.init(url: try fields.string("url"), tokenFile: try fields.optionalString("tokenFile"), caFile: try fields.optionalString("caFile"),
                  device: try fields.string("device"), roots: roots)
    }
}
