import Glibc
import SinkiRecord
import SinkiSupport

/// A listening TCP socket the server binds itself, so it knows the real port (for port 0) before
/// libmicrohttpd takes the socket over.
struct Listener {
    let socket: Int32
    let port: Int
    /// Bound to a loopback address (127.0.0.0/8 or ::1): only this machine can connect.
    let isLoopback: Bool

    /// Splits `HOST:PORT` or `[IPV6]:PORT`; an empty host means every IPv4 address.
    static func split(_ address: String) throws(ServerError) -> (host: String, port: UInt16) {
        let host: Substring
        let port: Substring
        if address.hasPrefix("[") {
            guard let close = address.firstIndex(of: "]"), address[address.index(after: close)...].hasPrefix(":") else {
                throw ServerError(.badAddress, "listen address \(quoted(address)) is not [IPV6]:PORT")
            }
            host = address[address.index(after: address.startIndex)..<close]
            port = address[address.index(close, offsetBy: 2)...]
        } else {
            guard let colon = address.lastIndex(of: ":"), !address[..<colon].contains(":") else {
                throw ServerError(.badAddress, "listen address \(quoted(address)) is not HOST:PORT (write IPv6 as [ADDRESS]:PORT)")
            }
            host = address[..<colon]
            port = address[address.index(after: colon)...]
        }
        guard let number = UInt16(port) else {
            throw ServerError(.badAddress, "listen address \(quoted(address)) has no port from 0 to 65535")
        }
        return (host.isEmpty ? "0.0.0.0" : String(host), number)
    }

    static func bind(_ address: String) throws(ServerError) -> Listener {
        let (host, port) = try split(address)
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE
        var found: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &found)
        guard status == 0, let info = found else {
            throw ServerError(.badAddress, "cannot listen on \(address): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(found) }

        func fail(_ call: String, _ fd: Int32) -> ServerError {
            let error = SystemError(call, errno: errno)
            if fd >= 0 { close(fd) }
            return ServerError(.cannotListen, "cannot listen on \(address): \(error)")
        }
        let fd = Glibc.socket(info.pointee.ai_family, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue | SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw fail("socket", -1) }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        guard Glibc.bind(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 else { throw fail("bind", fd) }
        guard listen(fd, SOMAXCONN) == 0 else { throw fail("listen", fd) }

        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { throw fail("getsockname", fd) }
        let family = Int32(storage.ss_family)
        let (bound, loopback): (UInt16, Bool) = withUnsafePointer(to: &storage) { pointer in
            if family == AF_INET6 {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { address in
                    // ::1 is fifteen zero bytes and a one.
                    let bytes = withUnsafeBytes(of: address.pointee.sin6_addr) { Array($0) }
                    return (UInt16(bigEndian: address.pointee.sin6_port), bytes == [UInt8](repeating: 0, count: 15) + [1])
                }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { address in
                (UInt16(bigEndian: address.pointee.sin_port), UInt32(bigEndian: address.pointee.sin_addr.s_addr) >> 24 == 127)
            }
        }
        return Listener(socket: fd, port: Int(bound), isLoopback: loopback)
    }
}
