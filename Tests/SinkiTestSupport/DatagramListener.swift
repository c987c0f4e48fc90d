import Glibc
import SinkiSupport

/// A bound Unix datagram socket standing in for systemd's notify socket.
public final class DatagramListener {
    public let fd: Int32
    private let timeoutSeconds: Int

    public init(_ path: String, timeoutSeconds: Int = 15) throws {
        self.timeoutSeconds = timeoutSeconds
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in for (i, byte) in path.utf8.enumerated() { raw[i] = byte } }
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard status == 0 else { throw SystemError("bind", errno: errno, path: path) }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    /// The next datagram, waiting up to the timeout given at init.
    public func receive() throws -> String {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let got = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard got >= 0 else { throw SystemError("recv", errno: errno, path: "a datagram after \(timeoutSeconds) s") }
        return String(decoding: buffer[..<got], as: UTF8.self)
    }
}
