import Glibc
import SinkiRecord
import SinkiSupport

/// The command line's side of the control socket: one connection, requests answered in order.
/// Blocking; not for the event loop.
public final class ControlClient {
    private let socket: FileDescriptor
    private var buffer: [UInt8] = []
    private var ended = false
    /// Answers longer than this are not the protocol.
    static let maxLine = 64 << 20

    /// Connects to the agent using `stateDirectory`; `.notRunning` when none answers there.
    public init(stateDirectory: String, timeout: Double = 30) throws(ControlError) {
        let path = ControlSocket.path(stateDirectory: stateDirectory)
        let directory: FileDescriptor
        do { directory = try ControlSocket.openDirectory(stateDirectory) } catch {
            if error.errno == ENOENT { throw ControlError(.notRunning, "no agent runs with the state folder \(stateDirectory)") }
            throw ControlError(.failed, "cannot open the state folder \(stateDirectory): \(error.message)")
        }
        let name = ControlSocket.address(of: ControlSocket.fileName, in: directory, directoryPath: stateDirectory)
        guard case (var address, let length)? = ControlSocket.address(name) else {
            throw ControlError(.failed, "the socket path \(path) is too long")
        }
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ControlError(.failed, "socket: \(String(cString: strerror(errno)))") }
        socket = FileDescriptor(raw: fd, path: path)
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, length) }
        }
        if status != 0 {
            let code = errno
            if code == ENOENT || code == ECONNREFUSED {
                throw ControlError(.notRunning, "no agent runs with the state folder \(stateDirectory)")
            }
            throw ControlError(.failed, "cannot connect to \(path): \(String(cString: strerror(code)))")
        }
        setTimeout(timeout)
    }

    /// Seconds a read waits for the agent; 0 waits for ever (`watch`).
    public func setTimeout(_ seconds: Double) {
        var value = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - seconds.rounded(.down)) * 1_000_000))
        setsockopt(socket.raw, SOL_SOCKET, SO_RCVTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Sends `request` and returns the agent's result; an error answer is thrown.
    public func send(_ request: ControlRequest) throws(ControlError) -> JSONValue {
        do { try socket.write(request.line + [UInt8(ascii: "\n")]) } catch {
            // The agent may have hung up after saying why (a refused peer): read that first.
            if let line = try? readLine() { return try ControlResponse.parse(line) }
            throw ControlError(.failed, "cannot send to the agent: \(error.message)")
        }
        guard let line = try readLine() else {
            throw ControlError(.badResponse, "the agent closed the connection without answering")
        }
        return try ControlResponse.parse(line)
    }

    /// The next line from the agent, without its newline; nil when the agent closed the connection.
    public func readLine() throws(ControlError) -> [UInt8]? {
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = Array(buffer[..<newline])
                buffer.removeSubrange(...newline)
                return line
            }
            if ended { return nil }
            guard buffer.count <= Self.maxLine else { throw ControlError(.badResponse, "the agent's answer is too long") }
            var chunk = [UInt8](repeating: 0, count: 64 * 1024)
            let count = chunk.withUnsafeMutableBytes { read(socket.raw, $0.baseAddress, $0.count) }
            if count > 0 {
                buffer.append(contentsOf: chunk[..<count])
            } else if count == 0 {
                ended = true
            } else {
                let code = errno
                if code == EINTR { continue }
                if code == EAGAIN || code == EWOULDBLOCK { throw ControlError(.failed, "the agent did not answer in time") }
                throw ControlError(.failed, "cannot read from the agent: \(String(cString: strerror(code)))")
            }
        }
    }
}
