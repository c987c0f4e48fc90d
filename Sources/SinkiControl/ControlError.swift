import SinkiRecord

/// Why a control request failed, as the agent answers it and the command line prints it.
public struct ControlError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The `code` of an error answer (docs/control.md).
    public enum Code: String, Sendable, Equatable {
        /// The line is not a request: bad JSON, a missing or malformed field, a line too long.
        case badRequest = "bad-request"
        case unknownCommand = "unknown-command"
        /// The path or conflict named does not exist.
        case notFound = "not-found"
        /// The peer runs as another user.
        case forbidden
        /// The agent is stopping or the part of it that answers is not there yet.
        case unavailable
        /// No agent answers on the socket (client side only).
        case notRunning = "not-running"
        /// The agent's answer is not the protocol (client side only).
        case badResponse = "bad-response"
        /// The command was understood but could not be carried out.
        case failed
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }

    var json: JSONValue { .object([("code", .string(code.rawValue)), ("message", .string(message))]) }

    init(json: JSONValue) throws(ControlError) {
        let fields = JSONFields(json, what: "error")
        let code = try fields.string("code")
        self.code = Code(rawValue: code) ?? .failed
        message = try fields.string("message")
    }
}
