import Glibc
import SinkiRecord
import SinkiSupport

extension ChunkStore {
    /// A request's chunk names, each once in the order first named: `413` past `most` of them, `400`
    /// naming the first that is not a SHA-256 in 64 lowercase hex digits.
    static func checkedNames(_ names: [String], most: Int) throws(Problem) -> [String] {
        guard names.count <= most else {
            throw Problem(.tooLarge, detail: "ask for at most \(most) chunks at a time; this asks for \(names.count)", field: "chunks")
        }
        if let bad = names.firstIndex(where: { !isName($0) }) {
            throw Problem(.badRequest, detail: "chunks[\(bad)] is \(quoted(String(names[bad].prefix(80)))), not a SHA-256 in 64 lowercase hex digits",
                          field: "chunks")
        }
        var seen = Set<String>()
        return names.filter { seen.insert($0).inserted }
    }
}

/// `POST /v1/chunks/missing`: which of the chunks named the user lacks, so that a sender uploads only
/// those. Chunks found present are touched: garbage collection keeps them another grace, time enough
/// for the record that names them. A token narrowed to a prefix is told every chunk is missing: it
/// cannot learn whether the user holds some content elsewhere, uploads what it sends, and the server
/// still keeps one copy (`ChunkStore.adopt`).
struct MissingChunksRoute: Route {
    let chunks: ChunkStore
    /// The body: at most `ChunkNamesRequest.mostToCheck` names of 64 hex digits, with room to spare.
    static let bodyLimit = 1 << 20

    func begin(_ request: Request) throws -> BodyPolicy { try request.writableJSON(limit: Self.bodyLimit) }

    func respond(to request: Request) throws -> Reply {
        let names = try ChunkStore.checkedNames(request.decodeBody(ChunkNamesRequest.parse).chunks, most: ChunkNamesRequest.mostToCheck)
        let user = request.identity.user
        guard request.scopePrefix == nil, let lock = try chunks.lock(user, exclusive: false) else {
            return .response(.json(MissingChunksResponse(missing: names).jsonBytes))
        }
        // Touched under the shared lock: garbage collection, which deletes under the exclusive one, then
        // sees the new time and keeps the chunk.
        let held = try chunks.touch(user: user, names)
        withExtendedLifetime(lock) {}
        let missing = zip(names, held).filter { !$0.1 }.map(\.0)
        return .response(.json(MissingChunksResponse(missing: missing).jsonBytes))
    }
}

/// `GET /v1/chunks/HASH`: a chunk's bytes, with a single `Range` as for assets. `404` when the user
/// holds no such chunk (or, for a token narrowed to a prefix, did not upload it through that token's
/// prefix: such a token reads other content through `GET /v1/assets/ID` of a record within it).
struct ChunkGetRoute: Route {
    let chunks: ChunkStore

    func respond(to request: Request) throws -> Reply {
        let name = request.pathParameter
        let user = request.identity.user
        // Removed (garbage, damage) since it was looked up: as unknown.
        guard ChunkStore.isName(name), let held = try chunks.visible(user: user, prefix: request.scopePrefix, chunk: name),
              let opened = try chunks.open(user: user, chunk: name, entry: held) else {
            throw Problem(.notFound, detail: "no chunk \(quoted(name))")
        }
        let range = try AssetRoute.range(request, size: opened.entry.size, etag: name)
        // libmicrohttpd owns the descriptor from here (it sends from it, then closes it).
        let fd = dup(opened.file.raw)
        guard fd >= 0 else { throw SystemError("dup", errno: errno, path: opened.file.path) }
        return .response(Response(status: range.status, contentType: "application/octet-stream", headers: range.headers,
                                  body: .file(fd: fd, offset: opened.entry.offset + range.first, length: range.length)))
    }
}

/// `DELETE /v1/chunks/HASH`: a receiver found the chunk's bytes do not hash to its name. The server
/// hashes that one chunk and removes it only if they do not (`204`); else `409 chunk-intact`. A removed
/// chunk leaves the user's records naming it incomplete (`DamagedChunks`): each is saved once more, as
/// it is, so that the feed brings it, flagged, to every device; one that holds the content sends it
/// again, which brings the chunk back.
struct ChunkDeleteRoute: Route {
    let chunks: ChunkStore
    let store: any RecordStore
    let hub: WaiterHub
    let logger: Logger

    func begin(_ request: Request) throws -> BodyPolicy {
        try request.requireWritable()
        return .none
    }

    func respond(to request: Request) throws -> Reply {
        let name = request.pathParameter
        let user = request.identity.user
        guard ChunkStore.isName(name), try chunks.visible(user: user, prefix: request.scopePrefix, chunk: name) != nil else {
            throw Problem(.notFound, detail: "no chunk \(quoted(name))")
        }
        switch try chunks.removeIfDamaged(user: user, chunk: name) {
        case .notHeld: throw Problem(.notFound, detail: "no chunk \(quoted(name))")
        case .intact: throw Problem(.chunkIntact, detail: "chunk \(name) hashes to its name here; it was kept (the damage was on the way)")
        case .removed:
            do {
                let count = try republish(user: user, naming: name)
                logger.info("chunk \(name) removed as damaged; \(count) record(s) naming it published again as incomplete")
            } catch {
                // The chunk is gone and noted: the records read as incomplete from now on, wherever they
                // are read; only devices that read them before learn it later (their next full look).
                logger.warning("chunk \(name) removed as damaged; its records could not be published again: \(error)")
            }
            return .response(Response(status: 204, contentType: nil, body: .bytes([])))
        }
    }

    /// Saves every live record of `user` whose manifest names `chunk` again, unchanged but for a new
    /// change tag (a record changed meanwhile is left: its new version passed the modify's chunk check,
    /// or names other chunks). Every record is looked at: a report of real damage is rare.
    private func republish(user: String, naming chunk: String) throws -> Int {
        var items: [CheckedRecord] = []
        var after: String?
        repeat {
            let page = try store.records(user: user, prefix: nil, after: after, limit: PageLimit(records: 1_000, dataBytes: 1 << 20), includeData: false)
            for record in page.records where !record.deleted && record.asset?.chunks?.contains(where: { $0.sha256 == chunk }) == true {
                guard let path = try? RecordPath(validating: record.path) else { continue }
                var again = record
                again.baseTag = record.changeTag
                again.changeTag = 0
                again.movedFrom = nil
                items.append(CheckedRecord(again, path: path))
            }
            after = page.more ? page.records.last?.path : nil
        } while after != nil
        guard !items.isEmpty else { return 0 }
        let saved = try store.modify(user: user, items: items).filter { if case .saved = $0 { return true } else { return false } }.count
        if saved > 0 { hub.notify(user: user) }
        return saved
    }
}
