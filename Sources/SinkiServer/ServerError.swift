import SinkiSupport

/// Why the server could not open its store or start serving; the message names the address or path.
public struct ServerError: Error, Sendable, CustomStringConvertible {
    public enum Code: Sendable, Equatable {
        /// The listen address is not `HOST:PORT` / `[IPV6]:PORT`, or does not resolve.
        case badAddress
        /// socket, bind or listen failed (address in use, not ours, no permission).
        case cannotListen
        /// libmicrohttpd would not start.
        case cannotStart
        /// The data folder or the record store could not be opened.
        case store
        /// `start()` after `start()` or `stop()`.
        case wrongState
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
