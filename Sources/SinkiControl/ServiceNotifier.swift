import Glibc
import SinkiSupport

/// Tells systemd how the service is doing (`sd_notify`): one datagram per message to the socket in
/// `$NOTIFY_SOCKET`, so no libsystemd is needed. Not Sendable: the agent's loop owns it.
public final class ServiceNotifier {
    private let socket: FileDescriptor
    private var address: sockaddr_un
    private let length: socklen_t
    /// The last `STATUS=` sent, so a repeat is not sent again.
    private var lastStatus: String?

    /// A notifier for `$NOTIFY_SOCKET`; nil when the variable is unset (not started by systemd).
    public init?(socketPath: String? = getenv("NOTIFY_SOCKET").map { String(cString: $0) }) {
        guard let socketPath, !socketPath.isEmpty, let (address, length) = ControlSocket.address(socketPath) else { return nil }
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        socket = FileDescriptor(raw: fd, path: socketPath)
        self.address = address
        self.length = length
    }

    /// Sends `KEY=VALUE` lines in one datagram; never blocks. Returns whether it was sent.
    @discardableResult
    public func notify(_ message: String) -> Bool {
        var bytes = Array(message.utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { target in
                bytes.withUnsafeMutableBytes { sendto(socket.raw, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL), target, length) }
            }
        }
        return sent == bytes.count
    }

    /// `READY=1`: start-up is done (the first scan), with a status line.
    public func ready(status: String) {
        lastStatus = status
        notify("READY=1\nSTATUS=\(status)")
    }

    /// `STATUS=…`, when it differs from the last one sent.
    public func status(_ status: String) {
        guard status != lastStatus else { return }
        lastStatus = status
        notify("STATUS=\(status)")
    }

    /// `STOPPING=1`: shutting down.
    public func stopping() {
        lastStatus = "stopping"
        notify("STOPPING=1\nSTATUS=stopping")
    }

    /// `RELOADING=1`: a config reload began; `ready(status:)` ends it.
    public func reloading() {
        notify("RELOADING=1")
    }
}
