import SinkiRecord

/// Which side `sinkid resolve --keep` keeps.
public enum ResolveChoice: String, Sendable, Equatable, CaseIterable {
    case local, remote, both
}

/// One request on the control socket: a JSON object on one line (docs/control.md).
public enum ControlRequest: Sendable, Equatable {
    case status
    /// Pause the agent, or with `root` (a root's name) only that root.
    case pause(root: String?)
    /// End the agent's pause and every root's (and confirm safety stops), or with `root` that root's pause.
    case resume(root: String?)
    /// Sync now: look at the disk again and ask the server for news at once; with `verify`, also
    /// compare everything with the server and answer when that is done.
    case sync(verify: Bool)
    /// Put entries the server refused (all, or those at or below `path`) back in the queue.
    case retry(path: String?)
    case conflicts
    case resolve(path: String, keep: ResolveChoice)
    /// Stream remote changes applied at (or below) a path until the client hangs up.
    case watch(WatchPath)
    /// Where the agent's server is and which token file it uses, for commands that ask the server
    /// themselves with the agent's token (`sinkid history`, `cat`, `restore`).
    case server

    /// The commands, as the `command` field names them.
    public static let commandNames = ["status", "pause", "resume", "sync", "retry", "conflicts", "resolve", "watch", "server"]

    public var command: String {
        switch self {
        case .status: "status"
        case .pause: "pause"
        case .resume: "resume"
        case .sync: "sync"
        case .retry: "retry"
        case .conflicts: "conflicts"
        case .resolve: "resolve"
        case .watch: "watch"
        case .server: "server"
        }
    }

    /// The request as one line, without its newline.
    public var line: [UInt8] {
        var members: [(String, JSONValue)] = [("command", .string(command))]
        switch self {
        case .status, .conflicts, .server: break
        case let .pause(root), let .resume(root): if let root { members.append(("root", .string(root))) }
        case let .sync(verify): if verify { members.append(("verify", .bool(true))) }
        case let .retry(path): if let path { members.append(("path", .string(path))) }
        case let .resolve(path, keep): members += [("path", .string(path)), ("keep", .string(keep.rawValue))]
        case let .watch(path): members.append(("path", .string(path.text)))
        }
        var writer = JSONWriter()
        JSONValue.object(members).write(to: &writer)
        return writer.bytes
    }

    /// Reads one request line; unknown members are ignored so that newer clients can add some.
    public static func parse(_ line: [UInt8]) throws(ControlError) -> ControlRequest {
        let value: JSONValue
        do { value = try JSONValue.parse(line) } catch { throw ControlError(.badRequest, "the request is not JSON: \(error)") }
        guard case .object = value else { throw ControlError(.badRequest, "the request is not a JSON object") }
        let fields = JSONFields(value, what: "request", code: .badRequest)
        let command = try fields.string("command")
        switch command {
        case "status": return .status
        case "pause": return .pause(root: try fields.optionalString("root"))
        case "resume": return .resume(root: try fields.optionalString("root"))
        case "sync":
            let verify = fields.has("verify") ? try fields.bool("verify") : false
            return .sync(verify: verify)
        case "conflicts": return .conflicts
        case "retry": return .retry(path: try fields.optionalString("path"))
        case "resolve":
            let path = try fields.string("path")
            let keep = try fields.string("keep")
            guard let choice = ResolveChoice(rawValue: keep) else {
                throw ControlError(.badRequest, "keep must be local, remote or both, not \(quoted(keep))")
            }
            return .resolve(path: path, keep: choice)
        case "watch": return .watch(try WatchPath(try fields.string("path")))
        case "server": return .server
        default:
            var message = "unknown command \(quoted(command))"
            if let near = ControlRequest.commandNames.min(by: { distance($0, command) < distance($1, command) }),
               distance(near, command) <= 2 {
                message += "; did you mean \(near)?"
            }
            throw ControlError(.unknownCommand, message)
        }
    }

    /// Edit distance, for suggesting the command meant.
    private static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        var row = Array(0...b.count)
        for i in a.indices {
            var next = [i + 1]
            for j in b.indices {
                next.append(min(row[j + 1] + 1, next[j] + 1, row[j] + (a[i] == b[j] ? 0 : 1)))
            }
            row = next
        }
        return row[b.count]
    }
}

/// What `sinkid watch PATH` follows: `/` (every root), `ROOT/…/` (everything below, recursively)
/// or `ROOT/…/NAME` (that path only).
public struct WatchPath: Sendable, Equatable, CustomStringConvertible {
    /// As given.
    public let text: String
    /// Ends in `/`: everything below.
    public var recursive: Bool { text.hasSuffix("/") }

    public init(_ text: String) throws(ControlError) {
        if text != "/" {
            let body = text.hasSuffix("/") ? String(text.dropLast()) : text
            // A root alone is a valid folder to watch; RecordPath wants something below it.
            let probe = body.contains("/") ? body : body + "/x"
            do { _ = try RecordPath(validating: probe) } catch {
                throw ControlError(.badRequest, "cannot watch \(quoted(text)): \(error)")
            }
            if !text.hasSuffix("/") && !body.contains("/") {
                throw ControlError(.badRequest, "\(quoted(text)) is a root; write \(quoted(text + "/")) to watch everything in it")
            }
        }
        self.text = text
    }

    /// The root named, nil for `/`.
    public var rootName: String? { text == "/" ? nil : String(text.prefix { $0 != "/" }) }

    /// Whether a change at record path `path` is one to report.
    public func matches(_ path: String) -> Bool {
        if text == "/" { return true }
        return recursive ? path.hasPrefix(text) : path == text
    }

    public var description: String { text }
}

/// Answers on the control socket: `{"ok":true,"result":…}` or `{"ok":false,"error":{code,message}}`,
/// one per line; `watch` then streams events (docs/control.md).
public enum ControlResponse {
    public static func success(_ result: JSONValue) -> [UInt8] {
        line(.object([("ok", .bool(true)), ("result", result)]))
    }

    public static func failure(_ error: ControlError) -> [UInt8] {
        line(.object([("ok", .bool(false)), ("error", error.json)]))
    }

    static func line(_ value: JSONValue) -> [UInt8] {
        var writer = JSONWriter()
        value.write(to: &writer)
        return writer.bytes + [UInt8(ascii: "\n")]
    }

    /// Reads an answer line: the result, or the agent's error thrown.
    public static func parse(_ line: [UInt8]) throws(ControlError) -> JSONValue {
        let value: JSONValue
        do { value = try JSONValue.parse(line) } catch { throw ControlError(.badResponse, "the agent's answer is not JSON: \(error)") }
        let fields = JSONFields(value, what: "answer")
        if try fields.bool("ok") {
            return value["result"] ?? .null
        }
        guard let error = value["error"] else { throw ControlError(.badResponse, "an error answer without an error") }
        throw try ControlError(json: error)
    }
}

/// A short answer to a command that changes something.
public struct ControlAck: Sendable, Equatable {
    /// One line for people.
    public var message: String
    public init(_ message: String) { self.message = message }

    public var json: JSONValue { .object([("message", .string(message))]) }
    public init(json: JSONValue) throws(ControlError) { message = try JSONFields(json, what: "result").string("message") }
}
