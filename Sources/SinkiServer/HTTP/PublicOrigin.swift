/// Where clients reach this server, for the absolute URLs it hands out (tus `Location`): some tus
/// clients do not resolve relative ones. Taken from `Host`; behind a proxy (`--behind-proxy`) from
/// `X-Forwarded-Proto` and `X-Forwarded-Host` first, as tusd does. Headers are believed only that far:
/// a host that is not a plain name, address and port gives no origin, and the URL stays relative.
enum PublicOrigin {
    /// `scheme://host[:port]`, or nil when the request names no usable host.
    static func of(_ request: Request, behindProxy: Bool) -> String? {
        var scheme = "http"
        var host = request.header("Host")
        if behindProxy {
            if let proto = firstValue(request.header("X-Forwarded-Proto"))?.lowercased(), proto == "https" || proto == "http" {
                scheme = proto
            }
            if let forwarded = firstValue(request.header("X-Forwarded-Host")) { host = forwarded }
        }
        guard let host = host.map(trimmed), isPlainHost(host) else { return nil }
        return scheme + "://" + host
    }

    /// The first of a comma-separated list (a chain of proxies appends theirs).
    private static func firstValue(_ header: String?) -> String? {
        guard let first = header?.split(separator: ",", maxSplits: 1).first else { return nil }
        let value = trimmed(String(first))
        return value.isEmpty ? nil : value
    }

    private static func trimmed(_ text: String) -> String {
        String(text.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
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
