import SinkiRecord
import SinkiSupport

/// A tus server as the client reaches it: the creation URL, and what every request carries.
public struct TusServer: Sendable {
    /// Where uploads are created (`POST`) and what `OPTIONS` asks: `http://HOST:PORT/v1/uploads/`.
    public var endpoint: String
    /// Sent with every request (`--header 'Name: value'`).
    public var headers: [(String, String)]
    /// Sent as `Authorization: Bearer TOKEN`.
    public var bearerToken: String?
    /// An absolute `Location` is taken for its path only, on the endpoint's own origin: sinki's agent
    /// talks to its own server, which may name a host it is not reached by (a proxy's public name, or
    /// one a hostile request made it write), and its token goes nowhere else.
    public var pinsOrigin = false

    public init(endpoint: String, headers: [(String, String)] = [], bearerToken: String? = nil, pinsOrigin: Bool = false) {
        self.endpoint = endpoint
        self.headers = headers
        self.bearerToken = bearerToken
        self.pinsOrigin = pinsOrigin
    }

    /// `location` (absolute, or relative as tus allows) resolved against the endpoint.
    public func resolve(_ location: String) -> String {
        var location = location
        if let scheme = location.range(of: "://"), location.hasPrefix("http://") || location.hasPrefix("https://") {
            guard pinsOrigin else { return location }
            let rest = location[scheme.upperBound...]
            location = rest.firstIndex(of: "/").map { String(rest[$0...]) } ?? "/"
        }
        let origin: Substring
        if let scheme = endpoint.range(of: "://"), let slash = endpoint[scheme.upperBound...].firstIndex(of: "/") {
            origin = endpoint[..<slash]
        } else {
            origin = Substring(endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint)
        }
        if location.hasPrefix("/") { return origin + location }
        let base = endpoint.hasSuffix("/") ? endpoint : String(endpoint[...(endpoint.lastIndex(of: "/") ?? endpoint.startIndex)])
        return base + location
    }
}

/// How uploads and downloads go. The defaults are `[transfer]`'s (docs/configuration.md).
public struct TusOptions: Sendable {
    /// Bytes per PATCH.
    public var chunkSize: Int64 = 16 << 20
    /// Partial uploads at once for a file above 4 chunks, when the server offers concatenation; 1 (the
    /// default): one upload per file. Parts help where one TCP stream cannot fill the link (long, fat
    /// paths); on a LAN or loopback one stream is as fast, and joining the parts costs the server a copy.
    public var partsPerFile = 1
    /// Failures in a row before giving up (a chunk that goes through starts the count again).
    public var attempts = 10
    /// Seconds to wait before each retry; past the end, the last one again. Not meant to be changed, but
    /// changeable for tests.
    public var retryDelays: [Double] = [0, 1, 3, 5, 10, 30]
    /// Up to this fraction more on each delay, so that many clients do not come back at once.
    public var retryJitter = 0.2
    /// Bytes per second for the whole client, both ways: set on its `HTTPClient` when the tus client
    /// is made (parallel parts share it); 0: leaves the HTTP client's own limits.
    public var maxRate: Int64 = 0
    /// Send `Upload-Checksum` with each chunk when the server offers an algorithm (crc32, sha256 or sha1).
    public var checksums = true
    /// Send the first chunk with the creation `POST` when offered. Saves a round trip, but the URL is
    /// known only after those bytes went, so an interruption then costs them.
    public var creationWithUpload = false
    /// Report the upload's SHA-256: the server's when its finishing answer gives it (sinki's do), else
    /// hashed as the file streams (a sequential upload to a server known not to say) or read at the end.
    public var computeSHA256 = false
    /// Gives up on a request when less than a byte per second moved for this long.
    public var stallTimeout: Double = 60

    public init() {}

    /// The wait before retry number `attempt` (0 is the first retry).
    func delay(before attempt: Int) -> Double {
        guard !retryDelays.isEmpty else { return 0 }
        let base = retryDelays[min(attempt, retryDelays.count - 1)]
        guard base > 0, retryJitter > 0 else { return base }
        return base * (1 + Double.random(in: 0...retryJitter))
    }
}

/// What a server said it offers in its `OPTIONS` answer; the client uses nothing else.
public struct TusCapabilities: Sendable, Equatable {
    public var versions: [String]
    public var extensions: Set<String>
    public var maxSize: Int64?
    public var checksumAlgorithms: [String]

    public init(versions: [String], extensions: Set<String>, maxSize: Int64?, checksumAlgorithms: [String]) {
        self.versions = versions
        self.extensions = extensions
        self.maxSize = maxSize
        self.checksumAlgorithms = checksumAlgorithms
    }

    public func offers(_ name: String) -> Bool { extensions.contains(name) }

    /// The checksum to send: crc32 when offered (a chunk needs guarding against damage on the way, not
    /// against forgery; the file's SHA-256 is checked end to end), else sha256, else sha1; nil without
    /// the checksum extension. `avoiding` names algorithms a server was seen to disagree about.
    public func checksum(avoiding: Set<Digest.Algorithm> = []) -> Digest.Algorithm? {
        guard offers("checksum") else { return nil }
        return [Digest.Algorithm.crc32, .sha256, .sha1].first { checksumAlgorithms.contains($0.rawValue) && !avoiding.contains($0) }
    }

    static func parse(_ response: HTTPResponse) -> TusCapabilities {
        func list(_ name: String) -> [String] {
            (response.header(name) ?? "").split(separator: ",").map { String($0).trimmedSpaces.lowercased() }.filter { !$0.isEmpty }
        }
        return TusCapabilities(versions: list("Tus-Version"), extensions: Set(list("Tus-Extension")),
                               maxSize: response.header("Tus-Max-Size").flatMap { Int64($0.trimmedSpaces) },
                               checksumAlgorithms: list("Tus-Checksum-Algorithm"))
    }
}

/// Where an upload stands, for the caller to keep (in its state database) and hand back to resume.
/// The client reports it before the first byte of each upload goes, and as chunks are acknowledged.
public struct TusUploadState: Sendable, Equatable {
    /// One upload on the server: the whole file, or one part of a parallel upload.
    public struct Part: Sendable, Equatable {
        public var url: String
        /// The part's first byte in the file, and its length.
        public var start: Int64
        public var length: Int64
        /// Bytes the server acknowledged.
        public var offset: Int64

        public init(url: String, start: Int64, length: Int64, offset: Int64) {
            self.url = url
            self.start = start
            self.length = length
            self.offset = offset
        }
    }

    /// The size of the file the upload is for.
    public var size: Int64
    /// The upload (for a parallel one: the final upload, once the parts are joined).
    public var url: String?
    /// Partial uploads of a parallel upload; empty for a sequential one.
    public var parts: [Part]

    public init(size: Int64, url: String? = nil, parts: [Part] = []) {
        self.size = size
        self.url = url
        self.parts = parts
    }

    /// The uploads it names: the parts, then the final one (a sequential upload's URL is its one part's).
    var urls: [String] { parts.map(\.url) + (url.map { [$0] } ?? []) }

    /// One line of text: `v1 SIZE URL|- [URL START LENGTH OFFSET]...` (URLs hold no spaces).
    public var encoded: String {
        var words = ["v1", String(size), url ?? "-"]
        for part in parts { words += [part.url, String(part.start), String(part.length), String(part.offset)] }
        return words.joined(separator: " ")
    }

    public init?(encoded: String) {
        let words = encoded.split(separator: " ").map(String.init)
        guard words.count >= 3, words[0] == "v1", let size = Int64(words[1]), (words.count - 3) % 4 == 0 else { return nil }
        self.size = size
        url = words[2] == "-" ? nil : words[2]
        parts = []
        var index = 3
        while index < words.count {
            guard let start = Int64(words[index + 1]), let length = Int64(words[index + 2]), let offset = Int64(words[index + 3]) else { return nil }
            parts.append(Part(url: words[index], start: start, length: length, offset: offset))
            index += 4
        }
    }
}

/// A finished upload.
public struct TusUploadResult: Sendable, Equatable {
    /// The upload's URL (for sinki, its last path segment is the asset id).
    public var url: String
    public var size: Int64
    /// Hex SHA-256 of the upload, when `computeSHA256` was set: the server's (the `ETag` of the answer
    /// that finished it), else of the bytes read.
    public var sha256: String?
    /// Bytes this call sent (not counting what an earlier run had sent).
    public var bytesSent: Int64
    /// Whether it went on from an earlier upload.
    public var resumed: Bool
}

extension String {
    /// Without spaces and tabs at either end.
    var trimmedSpaces: String {
        var view = Substring(self)
        while let first = view.first, first == " " || first == "\t" { view.removeFirst() }
        while let last = view.last, last == " " || last == "\t" { view.removeLast() }
        return String(view)
    }
}
