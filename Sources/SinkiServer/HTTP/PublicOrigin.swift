import CMicroHTTPDShim
import Glibc

/// Where clients reach this server, for the absolute URLs it hands out (tus `Location`): some tus
/// clients do not resolve relative ones. A request's own `Host` is never believed (a client could
/// name any host and be handed URLs there); behind a proxy (`--behind-proxy`) its `X-Forwarded-Proto`
/// and `X-Forwarded-Host` are, as a proxy that sets them (replacing what the client sent) says; and a
/// configured public URL (`--public-url`) wins over both.
public enum PublicOrigin: Sendable, Equatable {
    /// `--public-url`: `scheme://host[:port]`, as configured (checked by `parse`).
    case configured(String)
    /// `--behind-proxy`: the forwarded headers, else the local address.
    case forwarded
    /// The address the client's connection reached: the listening one, or under a wildcard the
    /// interface's own.
    case local

    /// `scheme://host[:port]`, or nil when nothing usable names one (the URL then stays relative).
    func origin(for request: Request) -> String? {
        switch self {
        case let .configured(origin):
            return origin
        case .forwarded:
            var scheme = "http"
            if let proto = Self.onlyValue(request.header("X-Forwarded-Proto"))?.lowercased(), proto == "https" || proto == "http" {
                scheme = proto
            }
            if let host = Self.onlyValue(request.header("X-Forwarded-Host")) {
                return Self.isPlainHost(host) ? scheme + "://" + host : nil
            }
            return Self.localOrigin(request.connection)
        case .local:
            return Self.localOrigin(request.connection)
        }
    }

    /// A `--public-url` value as an origin (`http(s)://HOST[:PORT]`, a trailing slash dropped); nil
    /// when it is anything else (a path, a query, credentials, another scheme).
    public static func parse(publicURL text: String) -> String? {
        let lower = text.lowercased()
        guard let scheme = ["https://", "http://"].first(where: { lower.hasPrefix($0) }) else { return nil }
        var host = String(text.dropFirst(scheme.count))
        if host.hasSuffix("/") { host.removeLast() }
        guard isPlainHost(host) else { return nil }
        return scheme + host
    }

    /// The header's value when it holds exactly one: a list means a proxy appended to what the client
    /// sent, and which entry is whose cannot be told.
    private static func onlyValue(_ header: String?) -> String? {
        guard let header else { return nil }
        let value = trimmed(header)
        return value.isEmpty || value.contains(",") ? nil : value
    }

    private static func trimmed(_ text: String) -> String {
        String(text.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }

    /// `http://ADDRESS:PORT` of the connection's local end (IPv6 in brackets).
    private static func localOrigin(_ connection: Connection) -> String? {
        let fd = sinki_mhd_connection_fd(connection.raw)
        guard fd >= 0 else { return nil }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { return nil }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let family = Int32(storage.ss_family)
        return withUnsafePointer(to: &storage) { pointer -> String? in
            if family == AF_INET6 {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { address in
                    var raw = address.pointee.sin6_addr
                    guard inet_ntop(AF_INET6, &raw, &text, socklen_t(text.count)) != nil else { return nil }
                    var name = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                    // An IPv4 client of a dual-stack socket: the plain IPv4 address.
                    if name.hasPrefix("::ffff:"), name.contains(".") { return "http://\(name.dropFirst(7)):\(UInt16(bigEndian: address.pointee.sin6_port))" }
                    name = "[" + name + "]"
                    return "http://\(name):\(UInt16(bigEndian: address.pointee.sin6_port))"
                }
            }
            guard family == AF_INET else { return nil }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { address in
                var raw = address.pointee.sin_addr
                guard inet_ntop(AF_INET, &raw, &text, socklen_t(text.count)) != nil else { return nil }
                let name = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                return "http://\(name):\(UInt16(bigEndian: address.pointee.sin_port))"
            }
        }
    }

    /// A DNS name, IPv4 address or bracketed IPv6 address, with an optional port: nothing that could
    /// end the header or change the URL's path.
    static func isPlainHost(_ text: String) -> Bool {
        guard !text.isEmpty, text.utf8.count <= 261 else { return false }
        return text.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "."), UInt8(ascii: "-"), UInt8(ascii: ":"), UInt8(ascii: "["), UInt8(ascii: "]"), UInt8(ascii: "_"):
                return true
            default:
                return false
            }
        }
    }
}
