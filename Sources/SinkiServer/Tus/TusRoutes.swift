import CMicroHTTPDShim
import SinkiRecord
import SinkiSupport

/// The tus 1.0.0 endpoint at `/v1/uploads/` (docs/protocol.md, "Uploads"): each route checks the
/// request against the protocol and hands it to the `UploadStore`, which stores.
enum TusEndpoint {
    static let path = Routes.uploads
    static let extensions = ["creation", "creation-with-upload", "creation-defer-length", "termination", "checksum",
                             "expiration", "concatenation"]
    /// SHA-1 (which the protocol requires), SHA-256, and CRC-32, which sinki's own client prefers: a chunk
    /// only needs guarding against damage on the way, and checks in less than half the time of SHA-256.
    static let checksumAlgorithms: [Digest.Algorithm] = [.sha1, .sha256, .crc32]

    /// Every tus answer carries the protocol version, errors included.
    static let headers = [("Tus-Resumable", Tus.version)]

    /// Where the upload `id` lives: absolute when the request says where the server is reached.
    static func location(_ id: String, origin: String? = nil) -> String { (origin ?? "") + path + id }

    /// `Tus-Resumable` must name the version this server speaks (412 with `Tus-Version` otherwise).
    static func checkVersion(_ request: Request) throws(RouteError) {
        let sent = request.header("Tus-Resumable")
        guard sent == Tus.version else {
            let detail = sent.map { "Tus-Resumable \(quoted($0)) is not a version this server speaks (\(Tus.version))" }
                ?? "send Tus-Resumable: \(Tus.version)"
            throw RouteError(Problem(.tusVersion, detail: detail), headers: [("Tus-Version", Tus.version)])
        }
    }

    /// A non-negative integer header; nil when absent.
    static func integer(_ request: Request, _ name: String) throws(Problem) -> Int64? {
        try integer(request.header(name), name)
    }

    /// The header text behind `integer(_:_:)`, apart from the request (the fuzz target calls it).
    static func integer(_ header: String?, _ name: String) throws(Problem) -> Int64? {
        guard let text = header else { return nil }
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), let value = Int64(text) else {
            throw Problem(.badRequest, detail: "\(name) must be a non-negative integer, not \(quoted(text))")
        }
        return value
    }

    static func metadata(_ request: Request) throws(Problem) -> TusMetadata {
        try metadata(request.header("Upload-Metadata"))
    }

    static func metadata(_ header: String?) throws(Problem) -> TusMetadata {
        guard let header else { return TusMetadata() }
        do { return try TusMetadata.parse(header) } catch {
            throw Problem(.badRequest, detail: "Upload-Metadata: \(error.description)")
        }
    }

    /// The chunk a creation uploads (metadata key `chunk`: its SHA-256 in lowercase hex); nil for an
    /// ordinary upload.
    static func chunkName(_ metadata: TusMetadata) throws(Problem) -> String? {
        guard let pair = metadata.pairs.first(where: { $0.key == Tus.chunkMetadataKey }) else { return nil }
        guard let value = pair.value, let name = String(validating: value, as: UTF8.self), ChunkStore.isName(name) else {
            let shown = pair.value.map { String(decoding: $0.prefix(80), as: UTF8.self) } ?? ""
            throw Problem(.badRequest, detail: "Upload-Metadata \(Tus.chunkMetadataKey) must be the chunk's SHA-256 as 64 lowercase hex "
                          + "digits (base64-encoded like every metadata value), not \(quoted(shown))")
        }
        return name
    }

    /// `Upload-Checksum`, when sent: an algorithm this server offers and a digest of its size.
    static func checksum(_ request: Request) throws(Problem) -> (Digest.Algorithm, [UInt8])? {
        try checksum(request.header("Upload-Checksum"))
    }

    static func checksum(_ header: String?) throws(Problem) -> (Digest.Algorithm, [UInt8])? {
        guard let header else { return nil }
        guard let parsed = TusChecksum.parse(header) else {
            throw Problem(.badRequest, detail: "Upload-Checksum must be \"ALGORITHM BASE64DIGEST\", not \(quoted(header))")
        }
        guard let algorithm = Digest.Algorithm(rawValue: parsed.algorithm), checksumAlgorithms.contains(algorithm) else {
            throw Problem(.badRequest, detail: "checksum algorithm \(quoted(parsed.algorithm)) is not offered (Tus-Checksum-Algorithm: \(checksumAlgorithms.map(\.rawValue).joined(separator: ",")))")
        }
        guard parsed.digest.count == algorithm.byteCount else {
            throw Problem(.badRequest, detail: "a \(algorithm.rawValue) digest has \(algorithm.byteCount) bytes, not \(parsed.digest.count)")
        }
        return (algorithm, parsed.digest)
    }

    /// A chunk's body must be `application/offset+octet-stream` (415 otherwise).
    static func checkChunkType(_ request: Request) throws(Problem) {
        try checkChunkType(request.header("Content-Type"))
    }

    static func checkChunkType(_ type: String?) throws(Problem) {
        guard MediaType.essence(of: type) == Tus.chunkType else {
            throw Problem(.unsupportedMediaType, detail: "a chunk is sent as \(Tus.chunkType), not \(type.map(quoted) ?? "without Content-Type")")
        }
    }

    /// The upload ids an `Upload-Concat: final;URL URL…` header names (absolute URLs or `/v1/uploads/ID`).
    static func finalParts(_ header: String) throws(Problem) -> [String] {
        let urls = header.dropFirst("final;".count).split(separator: " ")
        guard !urls.isEmpty else { throw Problem(.badRequest, detail: "Upload-Concat: final; names no partial upload") }
        return try urls.map { url throws(Problem) in
            guard let range = url.range(of: TusEndpoint.path) else {
                throw Problem(.badRequest, detail: "\(quoted(String(url))) is not an upload of this server")
            }
            let id = String(url[range.upperBound...])
            guard !id.isEmpty, !id.contains("/") else { throw Problem(.badRequest, detail: "\(quoted(String(url))) is not an upload URL") }
            return id
        }
    }

    static func hasBody(_ request: Request) -> Bool {
        (request.contentLength ?? 0) > 0 || request.header("Transfer-Encoding") != nil
    }

    /// Headers that describe an upload's progress: the offset, the expiry while it can expire, and once
    /// it is an asset its ETag (its SHA-256, as `GET /v1/assets/ID` gives it), so that the client that
    /// finished it learns what the server holds without hashing the file itself.
    static func progressHeaders(_ info: UploadInfo, settings: UploadSettings) -> [(String, String)] {
        var headers = [("Upload-Offset", String(info.offset))]
        if info.canExpire { headers.append(("Upload-Expires", HTTPDate.format(info.touchedAt + settings.expiryNanoseconds))) }
        if info.isFinished, info.concat != .partial, !info.sha256.isEmpty { headers.append(("ETag", "\"\(info.sha256)\"")) }
        return headers
    }
}

/// `OPTIONS /v1/uploads/[ID]`: what the server offers.
struct TusOptionsRoute: Route {
    let settings: UploadSettings
    var commonHeaders: [(String, String)] { TusEndpoint.headers }

    func respond(to request: Request) throws -> Reply {
        .response(Response(status: 204, contentType: nil, headers: [
            ("Tus-Version", Tus.version),
            ("Tus-Extension", TusEndpoint.extensions.joined(separator: ",")),
            ("Tus-Max-Size", String(settings.maxSize)),
            ("Tus-Checksum-Algorithm", TusEndpoint.checksumAlgorithms.map(\.rawValue).joined(separator: ",")),
        ], body: .bytes([])))
    }
}

/// `POST /v1/uploads/`: creation, creation-with-upload, creation-defer-length, and concatenation
/// (`Upload-Concat: partial` or `final;URL URL…`).
struct TusCreateRoute: Route {
    let store: UploadStore
    /// Where clients reach the server, for `Location`.
    var origin = PublicOrigin.local
    /// Where a token's chain counts its uploads (`maxUploads`); nil without accounts.
    var accounts: (any AccountStore)? = nil
    var commonHeaders: [(String, String)] { TusEndpoint.headers }

    private enum Plan {
        /// One upload; `chunk`: the name of the chunk it uploads.
        case single(length: Int64?, concat: UploadInfo.Concat, chunk: String?)
        case final(parts: [String])
    }

    private func plan(_ request: Request, metadata: TusMetadata) throws -> Plan {
        try TusEndpoint.checkVersion(request)
        try request.requireWritable()
        let length = try TusEndpoint.integer(request, "Upload-Length")
        let deferred = request.header("Upload-Defer-Length")
        if let chunk = try TusEndpoint.chunkName(metadata) {
            return .single(length: try chunkLength(request, length: length, deferred: deferred), concat: .none, chunk: chunk)
        }
        var concat = UploadInfo.Concat.none
        if let header = request.header("Upload-Concat") {
            if header == "partial" {
                concat = .partial
            } else if header.hasPrefix("final;") {
                guard length == nil, deferred == nil else {
                    throw Problem(.badRequest, detail: "a final upload takes no Upload-Length or Upload-Defer-Length: its parts say")
                }
                guard !TusEndpoint.hasBody(request) else { throw Problem(.badRequest, detail: "a final upload takes no body") }
                return .final(parts: try TusEndpoint.finalParts(header))
            } else {
                throw Problem(.badRequest, detail: "Upload-Concat must be \"partial\" or \"final;URL…\", not \(quoted(header))")
            }
        }
        switch (length, deferred) {
        case (nil, nil):
            throw Problem(.badRequest, detail: "send Upload-Length, or Upload-Defer-Length: 1")
        case (.some, .some):
            throw Problem(.badRequest, detail: "send Upload-Length or Upload-Defer-Length, not both")
        case (nil, let deferred?):
            guard deferred == "1" else { throw Problem(.badRequest, detail: "Upload-Defer-Length must be 1, not \(quoted(deferred))") }
            return .single(length: nil, concat: concat, chunk: nil)
        case (let length?, nil):
            try checkLength(request, length)
            return .single(length: length, concat: concat, chunk: nil)
        }
    }

    /// The server's and the token's limits on an upload's length.
    private func checkLength(_ request: Request, _ length: Int64) throws(Problem) {
        guard length <= store.settings.maxSize else {
            throw Problem(.tooLarge, detail: "Upload-Length \(length) is over Tus-Max-Size \(store.settings.maxSize)")
        }
        if let most = request.identity.scope.maxUploadBytes, length > most {
            throw Problem(.tooLarge, detail: "Upload-Length \(length) is over the token's maxUploadBytes \(most)", field: "maxUploadBytes")
        }
    }

    /// A chunk upload's length: given at creation, 1 byte to the largest chunk (2 MiB), and within the
    /// server's and the token's limits; never part of a concatenation.
    private func chunkLength(_ request: Request, length: Int64?, deferred: String?) throws(Problem) -> Int64 {
        guard request.header("Upload-Concat") == nil else {
            throw Problem(.badRequest, detail: "a chunk upload (Upload-Metadata \(Tus.chunkMetadataKey)) takes no Upload-Concat")
        }
        guard let length, deferred == nil else {
            throw Problem(.badRequest, detail: "a chunk upload sends its Upload-Length (1 to \(ChunkStore.maxChunkBytes)), not Upload-Defer-Length")
        }
        guard length >= 1 else { throw Problem(.badRequest, detail: "a chunk is 1 to \(ChunkStore.maxChunkBytes) bytes; Upload-Length is 0") }
        guard length <= ChunkStore.maxChunkBytes else {
            throw Problem(.tooLarge, detail: "a chunk is at most \(ChunkStore.maxChunkBytes) bytes; Upload-Length is \(length)")
        }
        try checkLength(request, length)
        return length
    }

    /// One upload more for the token's chain, refused once it has started `maxUploads`. Counted once
    /// per POST whose headers pass, whatever becomes of its body.
    private func count(_ request: Request) throws {
        guard let accounts, let chain = request.identity.chainID else { return }
        let most = request.identity.scope.maxUploads
        guard try accounts.countUpload(chainID: chain, limit: most) else {
            throw Problem(.beyondScope, detail: "token \(request.identity.tokenID ?? "-") has started its maxUploads of \(most ?? 0) uploads",
                          field: "maxUploads")
        }
    }

    func begin(_ request: Request) throws -> BodyPolicy {
        let metadata = try TusEndpoint.metadata(request)
        let plan = try plan(request, metadata: metadata)
        // A chunk upload is not counted: a 1 GiB file is a thousand of them. Each chunk, and a record's
        // manifest as a whole, are still held to the token's maxUploadBytes.
        if case .single(_, _, chunk: nil) = plan { try count(request) }
        if case .final = plan { try count(request) }
        guard TusEndpoint.hasBody(request) else { return .none }
        guard case let .single(length, concat, chunk) = plan else { return .none }
        // creation-with-upload: the body is the first chunk.
        try TusEndpoint.checkChunkType(request)
        let checksum = try TusEndpoint.checksum(request)
        if let declared = request.contentLength.map(Int64.init), let length, declared > length {
            throw Problem(.tooLarge, detail: "the body of \(declared) bytes is longer than Upload-Length \(length)")
        }
        if let chunk, let length, request.contentLength.map(Int64.init) == length, request.scopePrefix == nil {
            // A whole chunk in its creating request: straight into the user's chunks, no upload kept.
            return .stream(try DirectChunkWriter(chunks: store.chunks, user: request.identity.user, name: chunk, length: length,
                                                 checksum: checksum))
        }
        let upload = try store.create(user: request.identity.user, length: length, metadata: metadata, concat: concat,
                                      scope: request.scopePrefix, chunk: chunk)
        do {
            return .stream(try store.beginChunk(upload, offset: 0, newLength: nil, declaredLength: request.contentLength.map(Int64.init),
                                                checksum: checksum, createdHere: true, maxBytes: request.identity.scope.maxUploadBytes,
                                                socket: sinki_mhd_connection_fd(request.connection.raw)))
        } catch {
            store.remove(upload)
            throw error
        }
    }

    func respond(to request: Request) throws -> Reply {
        if let direct = request.sink as? DirectChunkWriter {
            _ = try direct.commit()
            // Done already: the id names no upload (a HEAD answers 404, and the client asks whether the
            // chunk is held).
            let location = TusEndpoint.location(RandomID.hex(bytes: 16), origin: origin.origin(for: request))
            return .response(Response(status: 201, contentType: nil, headers: [("Location", location), ("Upload-Offset", String(direct.length))],
                                      body: .bytes([])))
        }
        let info: UploadInfo
        if let writer = request.sink as? ChunkWriter {
            info = try writer.commit()
        } else {
            let metadata = try TusEndpoint.metadata(request)
            switch try plan(request, metadata: metadata) {
            case let .single(length, concat, chunk):
                info = try store.create(user: request.identity.user, length: length, metadata: metadata, concat: concat,
                                        scope: request.scopePrefix, chunk: chunk).info
            case let .final(parts):
                info = try store.createFinal(user: request.identity.user, parts: parts, metadata: metadata, scope: request.scopePrefix,
                                             maxBytes: request.identity.scope.maxUploadBytes).info
            }
        }
        var headers = [("Location", TusEndpoint.location(info.id, origin: origin.origin(for: request)))]
        headers += TusEndpoint.progressHeaders(info, settings: store.settings)
        return .response(Response(status: 201, contentType: nil, headers: headers, body: .bytes([])))
    }
}

/// `HEAD /v1/uploads/ID`: where the upload stands.
struct TusHeadRoute: Route {
    let store: UploadStore
    var commonHeaders: [(String, String)] { TusEndpoint.headers }

    func respond(to request: Request) throws -> Reply {
        try TusEndpoint.checkVersion(request)
        let info = try store.lookup(request.pathParameter, user: request.identity.user, prefix: request.scopePrefix).info
        var headers = TusEndpoint.progressHeaders(info, settings: store.settings)
        if let length = info.length { headers.append(("Upload-Length", String(length))) } else { headers.append(("Upload-Defer-Length", "1")) }
        if !info.metadata.pairs.isEmpty { headers.append(("Upload-Metadata", info.metadata.header)) }
        switch info.concat {
        case .none: break
        case .partial: headers.append(("Upload-Concat", "partial"))
        case .final: headers.append(("Upload-Concat", "final;" + info.parts.map { TusEndpoint.location($0) }.joined(separator: " ")))
        }
        headers.append(("Cache-Control", "no-store"))
        return .response(Response(status: 200, contentType: nil, headers: headers, body: .bytes([])))
    }
}

/// `PATCH /v1/uploads/ID`: a chunk at the upload's offset, streamed to disk.
struct TusPatchRoute: Route {
    let store: UploadStore
    var commonHeaders: [(String, String)] { TusEndpoint.headers }

    func begin(_ request: Request) throws -> BodyPolicy {
        try TusEndpoint.checkVersion(request)
        try request.requireWritable()
        try TusEndpoint.checkChunkType(request)
        let upload = try store.lookup(request.pathParameter, user: request.identity.user, prefix: request.scopePrefix)
        guard let offset = try TusEndpoint.integer(request, "Upload-Offset") else {
            throw Problem(.badRequest, detail: "a PATCH needs Upload-Offset")
        }
        let newLength = try TusEndpoint.integer(request, "Upload-Length")
        let checksum = try TusEndpoint.checksum(request)
        return .stream(try store.beginChunk(upload, offset: offset, newLength: newLength, declaredLength: request.contentLength.map(Int64.init),
                                            checksum: checksum, createdHere: false, maxBytes: request.identity.scope.maxUploadBytes,
                                            socket: sinki_mhd_connection_fd(request.connection.raw)))
    }

    func respond(to request: Request) throws -> Reply {
        guard let writer = request.sink as? ChunkWriter else { throw Problem(.internalError, detail: "bug: PATCH without its writer") }
        let info = try writer.commit()
        return .response(Response(status: 204, contentType: nil, headers: TusEndpoint.progressHeaders(info, settings: store.settings),
                                  body: .bytes([])))
    }
}

/// `DELETE /v1/uploads/ID`: termination.
struct TusDeleteRoute: Route {
    let store: UploadStore
    var commonHeaders: [(String, String)] { TusEndpoint.headers }

    func begin(_ request: Request) throws -> BodyPolicy {
        try TusEndpoint.checkVersion(request)
        try request.requireWritable()
        return .none
    }

    func respond(to request: Request) throws -> Reply {
        let upload = try store.lookup(request.pathParameter, user: request.identity.user, prefix: request.scopePrefix)
        try store.terminate(upload)
        return .response(Response(status: 204, contentType: nil, body: .bytes([])))
    }
}
