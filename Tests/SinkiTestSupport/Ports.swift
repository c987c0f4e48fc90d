import Glibc

/// A port on 127.0.0.1 that was free a moment ago (bound to port 0, read back, closed): for a peer
/// that must be told its port, or for a URL where nothing listens.
public func freePort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
            _ = bind(fd, raw, length)
            _ = getsockname(fd, raw, &length)
        }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}
