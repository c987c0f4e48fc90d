import Glibc
import SinkiRecord
import SinkiSupport

/// `GET /v1/assets/ID`: a finished upload's bytes, served from its file by libmicrohttpd, or a manifest
/// asset's (`ID` its hash, named by a live record of the user) read from its chunks in order; with
/// a single `Range` for resumed downloads (206, or 416 outside the asset).
struct AssetRoute: Route {
    let store: UploadStore
    /// For a token narrowed to a prefix: whether a record within it names the asset; and manifests.
    let records: any RecordStore
    let chunks: ChunkStore

    func respond(to request: Request) throws -> Reply {
        let id = request.pathParameter
        let user = request.identity.user
        if ChunkStore.isName(id) { return try manifest(id, request: request) }
        let records = self.records
        guard let facts = store.assetFacts(id, user: user, prefix: request.scopePrefix,
                                           namedWithin: { (try? records.namesAsset(user: user, assetID: id, within: $0)) ?? false }) else {
            throw Problem(.notFound, detail: "no asset \(quoted(id))")
        }
        let range = try Self.range(request, size: facts.size, etag: facts.sha256)
        let fd = open(store.dataPath(id), O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw SystemError("open", errno: errno, path: store.dataPath(id)) }
        return .response(Response(status: range.status, contentType: "application/octet-stream", headers: range.headers,
                                  body: .file(fd: fd, offset: range.first, length: range.length)))
    }

    /// A manifest asset, whole: the chunks in order, never assembled on disk or in memory. Its chunks in
    /// the range asked for must all be held, else `409 chunks-missing` naming them (a chunk removed as
    /// damaged waits for a writer to upload it again).
    private func manifest(_ id: String, request: Request) throws -> Reply {
        let user = request.identity.user
        guard let manifest = try records.manifest(user: user, assetID: id, within: request.scopePrefix) else {
            throw Problem(.notFound, detail: "no asset \(quoted(id))")
        }
        let size = manifest.reduce(Int64(0)) { $0 + $1.size }
        let range = try Self.range(request, size: size, etag: id)
        let held = try chunks.entries(user: user, manifest.map(\.sha256))
        var start: Int64 = 0
        var missing: [String] = []
        var entries: [ChunkIndex.Entry] = []
        entries.reserveCapacity(manifest.count)
        for (chunk, entry) in zip(manifest, held) {
            defer { start += chunk.size }
            // Outside the range, a chunk is never read: any entry holds its place.
            entries.append(entry ?? ChunkIndex.Entry(pack: "", offset: 0, size: chunk.size, stored: 0, touched: 0))
            guard start + chunk.size > range.first, start < range.first + range.length else { continue }
            if entry?.size != chunk.size { missing.append(chunk.sha256) }
        }
        guard missing.isEmpty else {
            throw Problem(.chunksMissing, detail: "asset \(id) names \(missing.count) chunk(s) the server does not hold: "
                          + missing.prefix(16).joined(separator: ", ") + (missing.count > 16 ? ", …" : ""))
        }
        let reader = ManifestReader(chunks: chunks, user: user, manifest: manifest, entries: entries, from: range.first)
        return .response(Response(status: range.status, contentType: "application/octet-stream", headers: range.headers,
                                  body: .stream(reader, length: range.length)))
    }

    /// What to send of `size` bytes whose ETag is `"etag"`: the whole (200), or the one range asked
    /// for (206 with `Content-Range`); a range past the end answers 416. Headers include the ETag.
    static func range(_ request: Request, size: Int64, etag: String) throws(RouteError)
        -> (status: Int, first: Int64, length: Int64, headers: [(String, String)]) {
        var headers = [("Accept-Ranges", "bytes"), ("ETag", "\"\(etag)\"")]
        guard let header = request.header("Range"), Self.rangeApplies(request.header("If-Range"), sha256: etag) else {
            return (200, 0, size, headers)
        }
        switch Self.parseRange(header, size: size) {
        case .ignore:
            return (200, 0, size, headers)
        case .unsatisfiable:
            throw RouteError(Problem(.rangeNotSatisfiable, detail: "\(quoted(header)) lies outside the \(size) bytes"),
                             headers: [("Content-Range", "bytes */\(size)")])
        case let .range(start, end):
            headers.append(("Content-Range", "bytes \(start)-\(end)/\(size)"))
            return (206, start, end - start + 1, headers)
        }
    }

    enum RangeAnswer: Equatable {
        /// Not a single byte range this server serves: the whole asset (RFC 9110 lets a server ignore Range).
        case ignore
        case unsatisfiable
        /// First and last byte, inclusive.
        case range(Int64, Int64)
    }

    /// `bytes=A-B`, `bytes=A-` or `bytes=-N`; several ranges are answered with the whole asset.
    static func parseRange(_ header: String, size: Int64) -> RangeAnswer {
        let parts = header.split(separator: "=", maxSplits: 1)
        guard parts.count == 2, String(parts[0]).trimmingSpaces.lowercased() == "bytes" else { return .ignore }
        let spec = Substring(String(parts[1]).trimmingSpaces)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return .ignore }
        let left = spec[..<dash], right = spec[spec.index(after: dash)...]
        func number(_ text: Substring) -> Int64? {
            guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
            return Int64(text)
        }
        if left.isEmpty {
            guard let suffix = number(right) else { return .ignore }
            guard suffix > 0, size > 0 else { return .unsatisfiable }
            return .range(max(0, size - suffix), size - 1)
        }
        guard let start = number(left) else { return .ignore }
        let end: Int64
        if right.isEmpty {
            end = size - 1
        } else {
            guard let last = number(right), last >= start else { return .ignore }
            end = min(last, size - 1)
        }
        guard start < size else { return .unsatisfiable }
        return .range(start, end)
    }

    /// `If-Range` with another validator than this asset's: the whole asset, not a piece of it.
    static func rangeApplies(_ ifRange: String?, sha256: String) -> Bool {
        guard let ifRange else { return true }
        return ifRange == "\"\(sha256)\""
    }
}
