import SinkiRecord
import SinkiSupport

/// `POST /v1/records/modify`: a batch of saves and deletes, one transaction, one result per item.
struct ModifyRoute: Route {
    let store: any RecordStore
    let hub: WaiterHub
    let limits: ServerLimits
    let uploads: UploadStore
    let chunks: ChunkStore
    /// Files in flight: a save at a path ends the session sending it.
    let inflight: InFlightBoard
    /// Whose saves these are, for the feed each writer reads.
    let origins: OriginBook

    func begin(_ request: Request) throws -> BodyPolicy {
        try request.requireWritable()
        _ = try request.saveOrigin()
        if RecordFrames.names(request.header("Content-Type")) {
            return .parse(limit: limits.maxBodyBytes, ModifyFramesBody(limits: RecordFramesReader.Limits(
                maxRecords: limits.maxBatchRecords, maxRecordBytes: Self.maxRecordBytes(limits, contentInJSON: false),
                maxDataBytes: Self.maxContentBytes(limits), maxEnvelopeBytes: 1 << 20)))
        }
        try request.requireJSON(orFrames: true)
        return .parse(limit: limits.maxBodyBytes, ModifyJSONBody(limits: ModifyRequestReader.Limits(
            maxRecords: limits.maxBatchRecords, maxRecordBytes: Self.maxRecordBytes(limits), maxEnvelopeBytes: 1 << 20)))
    }

    /// The most inline content one record can carry and still be saved: a zlib stream of the largest size.
    static func maxContentBytes(_ limits: ServerLimits) -> Int {
        Int(ModifyValidator.compressedBound(Int64(limits.maxInlineBytes)))
    }

    /// The most JSON one record of a batch can take and still be saved: a manifest of the most chunks
    /// (each `["<64 hex>",SIZE]`), or with `contentInJSON` inline content of the largest size in base64,
    /// and its fields. In frames the content is a frame of its own.
    static func maxRecordBytes(_ limits: ServerLimits, contentInJSON: Bool = true) -> Int {
        let data = contentInJSON ? maxContentBytes(limits) / 3 * 4 + 4 : 0
        return max(data, limits.maxManifestChunks * 96) + (1 << 20)
    }

    func respond(to request: Request) throws -> Reply {
        guard let body = request.parser as? any ModifyBody else { throw Problem(.internalError, detail: "bug: a modify request without its body") }
        let batch = try body.finish()
        guard batch.records.count <= limits.maxBatchRecords else {
            throw Problem(.tooLarge, detail: "a batch holds at most \(limits.maxBatchRecords) records; this one has \(batch.records.count)")
        }
        let user = request.identity.user
        let scope = request.identity.scope
        let uploads = self.uploads
        let store = self.store
        let validator = ModifyValidator(
            maxInlineBytes: limits.maxInlineBytes, maxManifestChunks: limits.maxManifestChunks, maxManifestBytes: uploads.settings.maxSize,
            tokenMaxBytes: scope.maxUploadBytes,
            assetFacts: { id in
                // A narrowed token may name an asset made within its prefix or already named there: never
                // copy in content it could not read.
                uploads.assetFacts(id, user: user, prefix: scope.prefix,
                                   namedWithin: { (try? store.namesAsset(user: user, assetID: id, within: $0)) ?? false })
            })
        var results = [ModifyResult?](repeating: nil, count: batch.records.count)
        var checked: [CheckedRecord] = []
        var positions: [Int] = []
        checked.reserveCapacity(batch.records.count)
        positions.reserveCapacity(batch.records.count)
        for (index, record) in batch.records.enumerated() {
            switch validator.check(record) {
            case .success where scope.refusal(forPath: record.path, movedFrom: record.movedFrom) != nil:
                var problem = scope.refusal(forPath: record.path, movedFrom: record.movedFrom)!
                problem.requestId = request.requestID
                results[index] = ModifyResult(path: record.path, status: .refused, problem: problem)
            case let .success(item):
                checked.append(item)
                positions.append(index)
            case var .failure(problem):
                problem.requestId = request.requestID
                results[index] = ModifyResult(path: record.path, status: .refused, problem: problem)
            }
        }
        let outcomes: [StoreOutcome]
        do {
            outcomes = try commit(checked, positions: &positions, results: &results, request: request)
        } catch let full as StorageFull {
            // The whole batch: nothing of it was saved.
            throw full.problem
        }
        var saved: [Int64] = []
        for (index, outcome) in zip(positions, outcomes) {
            switch outcome {
            case let .saved(record):
                results[index] = ModifyResult(path: record.path, status: .saved, record: record)
                saved.append(record.changeTag)
                inflight.end(user: user, path: record.path)
            case var .conflict(record):
                var flagged = [record]
                chunks.flagIncomplete(&flagged, user: user)
                record = flagged[0]
                results[index] = ModifyResult(path: record.path, status: .conflict, record: record)
            case var .refused(problem):
                problem.requestId = request.requestID
                results[index] = ModifyResult(path: batch.records[index].path, status: .refused, problem: problem)
            }
        }
        // Noted before the feed is woken, so the writer's own long-poll already passes over them.
        if let origin = try request.saveOrigin() { origins.note(user: user, tags: saved, origin: origin) }
        if !saved.isEmpty { hub.notify(user: user) }
        return .response(.json(ModifyResponse(results: results.map { $0! }).jsonBytes))
    }

    /// Hands the checked items to the store. Items with a manifest are checked against the user's chunks
    /// first, under the user's shared chunk lock held until the commit: garbage collection deletes only
    /// under the exclusive one, so a chunk found here is still there when the record naming it commits.
    /// An item naming chunks the user lacks is `refused` (`409 chunks-missing`) and left out; the
    /// chunks of the rest are made durable before the commit.
    private func commit(_ checked: [CheckedRecord], positions: inout [Int], results: inout [ModifyResult?],
                        request: Request) throws -> [StoreOutcome] {
        let user = request.identity.user
        let manifests = checked.indices.filter { checked[$0].record.asset?.isManifest == true && !checked[$0].record.deleted }
        guard !manifests.isEmpty else { return try store.modify(user: user, items: checked) }
        // Nil when the user has no chunks at all: then every chunk is missing, and nothing to guard.
        let lock = try chunks.lock(user, exclusive: false)
        defer { withExtendedLifetime(lock) {} }
        var refused = Set<Int>()
        var newestChange: Int64 = 0
        for index in manifests {
            let record = checked[index].record
            let (missing, newest) = try chunks.absent(record.asset?.chunks ?? [], user: user, prefix: request.scopePrefix)
            guard !missing.isEmpty else {
                newestChange = max(newestChange, newest)
                continue
            }
            let shown = missing.prefix(16).joined(separator: ", ")
            var problem = Problem(.chunksMissing, detail: "the manifest of \(quoted(record.path)) names \(missing.count) chunk(s) the server does not "
                                  + "hold for you: \(shown)\(missing.count > 16 ? ", …" : ""); upload them and send the record again",
                                  field: "asset.chunks")
            problem.requestId = request.requestID
            results[positions[index]] = ModifyResult(path: record.path, status: .refused, problem: problem)
            refused.insert(index)
        }
        let kept = checked.indices.filter { !refused.contains($0) }
        positions = kept.map { positions[$0] }
        if manifests.count > refused.count { try chunks.makeDurable(newestChange: newestChange) }
        return try store.modify(user: user, items: kept.map { checked[$0] })
    }
}

/// `GET /v1/changes?since=TOKEN&wait=SECONDS&limit=N&omitDataFrom=DEVICE&omitOrigin=ORIGIN&inflight=N&stream=1`:
/// the change feed, long-polling when nothing is new. With `omitOrigin`, the saves that origin made
/// are passed over (the page says how many). With `inflight`, the answer also carries the files
/// other devices are sending now, announced after that position (and a long-poll answers as soon as
/// there are some). With `stream=1`, a long-poll answered in frames goes on after its first page with
/// each page that commits until its `wait` is up (docs/protocol.md, "A feed that streams").
struct ChangesRoute: Route {
    let store: any RecordStore
    let limits: ServerLimits
    let inflight: InFlightBoard
    /// Which chunks went as damaged: records naming them are answered incomplete.
    let chunks: ChunkStore
    let origins: OriginBook

    func respond(to request: Request) throws -> Reply {
        let since = try ChangeToken.parse(try request.query("since"), storeID: store.storeID)
        let wait = try request.integerQuery("wait", in: 0...limits.maxWaitSeconds, default: 0)
        let count = try request.integerQuery("limit", in: 1...limits.maxPageRecords, default: limits.defaultPageRecords)
        if since.tag > 0 {
            let floor = try store.historyFloor()
            guard since.tag >= floor else {
                throw Problem(.tokenExpired, detail: "token \(since.text) is older than the retained history (from \(floor)); start over without one")
            }
        }
        // A writer already has the content of its own records: the feed it reads leaves it out.
        let omitDataFrom = try request.query("omitDataFrom").flatMap { $0.isEmpty ? nil : $0 }
        // And it learnt of its own saves from their answers: the feed passes over them.
        let omitOrigin = try SaveOrigin.fromWire(try request.query(SaveOrigin.query), named: SaveOrigin.query)
        let inflightAfter = try request.query("inflight").map { text throws(Problem) -> Int64 in
            guard let value = Int64(text), value >= 0 else {
                throw Problem(.badRequest, detail: "inflight must be a position of 0 or more, not \(quoted(text))", field: "inflight")
            }
            return value
        }
        let frames = request.acceptsFrames
        // Only frames stream: a page's envelope closes it, so a reader knows where each ends.
        let streams = try request.flagQuery("stream") && frames && wait > 0
        let feed = FeedReader(
            store: store, chunks: chunks, board: inflight, origins: origins, user: request.identity.user, storeID: since.storeID,
            limit: PageLimit(records: count, dataBytes: limits.maxPageDataBytes),
            // A token narrowed to a prefix reads a feed of that prefix only: the store filters, so the token
            // moves past nothing it did not send.
            prefix: request.scopePrefix, omitDataFrom: omitDataFrom, omitOrigin: omitOrigin,
            // Its own files are no news to a device: named as its records name it (agents may share a token).
            device: omitDataFrom ?? request.identity.device)
        guard wait > 0 else {
            return .response(try feed.page(after: since.tag, inflightAfter: inflightAfter).page.response(frames: frames))
        }
        let deadline = Clock.monotonic() + Int64(wait) * 1_000_000_000
        let user = request.identity.user, token = request.identity.tokenID, maxStreamBytes = limits.maxStreamBytes
        return .longPoll(LongPoll(
            user: user, token: token, deadline: deadline,
            poll: {
                let read = try feed.page(after: since.tag, inflightAfter: inflightAfter)
                guard !read.isEmpty else { return nil }
                guard streams else { return read.page.response(frames: frames) }
                let bytes = read.page.framesBytes
                let rest = FeedStream(feed: feed, user: user, token: token, deadline: deadline, after: read.lastTag,
                                      inflightAfter: read.page.inflight?.position ?? inflightAfter, sent: bytes.count, maxBytes: maxStreamBytes)
                // A proxy that buffers answers (nginx does) would hold each page until the stream ends.
                return Response(status: 200, contentType: RecordFrames.mediaType, headers: [("Vary", "Accept"), ("X-Accel-Buffering", "no")],
                                body: .live(first: bytes, rest))
            },
            expire: {
                let empty = RecordPage(records: [], token: ChangeToken(storeID: since.storeID, tag: since.tag).text, more: false,
                                       inflight: feed.news(after: inflightAfter))
                return empty.response(frames: frames)
            }))
    }
}

/// `GET /v1/records?path=PREFIX&limit=N&after=PATH&data=1`: look-up by path prefix.
struct LookupRoute: Route {
    let store: any RecordStore
    let limits: ServerLimits
    let chunks: ChunkStore

    func respond(to request: Request) throws -> Reply {
        var prefix = try request.query("path")
        if prefix?.isEmpty == true { prefix = nil }
        if let prefix { try Self.checkPrefix(prefix) }
        var after = try request.query("after")
        if after?.isEmpty == true { after = nil }
        let count = try request.integerQuery("limit", in: 1...limits.maxPageRecords, default: limits.defaultPageRecords)
        let includeData = try request.flagQuery("data")
        // The feed position before the listing is read: a reader that lists everything and then follows
        // the feed from here misses nothing (a change made meanwhile comes through the feed as well).
        let user = request.identity.user
        let head = ChangeToken(storeID: store.storeID, tag: try store.headTag(user: user))
        let floor = try store.historyFloor()
        // A prefix outside the token's answers like one that holds nothing; a wider one is narrowed.
        var listing: RecordListing
        switch ScopedPrefix.narrow(asked: prefix, scope: request.scopePrefix) {
        case .disjoint:
            listing = RecordListing(records: [], more: false)
        case let .within(narrowed):
            listing = try store.records(user: user, prefix: narrowed, after: after,
                                        limit: PageLimit(records: count, dataBytes: limits.maxPageDataBytes),
                                        includeData: includeData)
        }
        chunks.flagIncomplete(&listing.records, user: user)
        return .response(RecordPage(records: listing.records, token: head.text, more: listing.more, floor: floor).response(frames: request.acceptsFrames))
    }

    /// A prefix follows the path rules, except that a root name alone (`SaveGames`) is fine.
    static func checkPrefix(_ prefix: String) throws(Problem) {
        do {
            _ = try RecordPath(validating: prefix)
        } catch .noRelativePart {
            return
        } catch {
            throw Problem(.badPath, detail: error.description)
        }
    }
}

extension Request {
    /// How a route that writes takes a small JSON body: a token that may write, `application/json`, and
    /// at most `limit` bytes buffered.
    func writableJSON(limit: Int) throws(Problem) -> BodyPolicy {
        try requireWritable()
        try requireJSON()
        return .buffer(limit: limit)
    }

    /// The buffered body read by `parse`; what it cannot read answers `400 bad-json` with why.
    func decodeBody<T>(_ parse: ([UInt8]) throws -> T) throws(Problem) -> T {
        do {
            return try parse(body)
        } catch {
            throw Problem(.badJSON, detail: "\(error)")
        }
    }

    /// A JSON route's body must be `application/json` (parameters such as `charset` allowed): 415 otherwise.
    /// `orFrames`: the route takes records in frames too, and says so.
    func requireJSON(orFrames: Bool = false) throws(Problem) {
        let type = header("Content-Type")
        guard MediaType.essence(of: type) == "application/json" else {
            let takes = orFrames ? "application/json or \(RecordFrames.mediaType)" : "application/json"
            throw Problem(.unsupportedMediaType, detail: type.map { "\(path) takes \(takes), not \(quoted($0))" }
                          ?? "\(path) takes \(takes); the request has no Content-Type")
        }
    }

    /// The client reads records in frames (`Accept` names them).
    var acceptsFrames: Bool { RecordFrames.accepted(by: header("Accept")) }
}

extension RecordPage {
    /// The page as JSON, or in frames for a client that accepts them (its content as raw bytes).
    func response(frames: Bool) -> Response {
        guard frames else { return .json(jsonBytes) }
        return Response(status: 200, contentType: RecordFrames.mediaType, headers: [("Vary", "Accept")], body: .bytes(framesBytes))
    }
}

/// A modify batch read as it arrives: what is wrong with it is a `Problem`.
protocol ModifyBody: BodyParser {
    func finish() throws -> ModifyRequest
}

/// A batch in JSON (`ModifyRequestReader`).
final class ModifyJSONBody: ModifyBody {
    private var reader: ModifyRequestReader

    init(limits: ModifyRequestReader.Limits) { reader = ModifyRequestReader(limits: limits) }

    func take(_ chunk: UnsafeRawBufferPointer) throws {
        do { try reader.take(chunk) } catch { throw modifyProblem(error) }
    }

    func finish() throws -> ModifyRequest {
        do { return try reader.finish() } catch { throw modifyProblem(error) }
    }
}

/// A batch in frames (`RecordFramesReader`).
final class ModifyFramesBody: ModifyBody {
    private var reader: RecordFramesReader

    init(limits: RecordFramesReader.Limits) { reader = RecordFramesReader(limits: limits) }

    func take(_ chunk: UnsafeRawBufferPointer) throws {
        do { try reader.take(chunk) } catch { throw modifyProblem(error) }
    }

    func finish() throws -> ModifyRequest {
        do { return try ModifyRequest(frames: reader.finish()) } catch { throw modifyProblem(error) }
    }
}

private func modifyProblem(_ error: any Error) -> Problem {
    if let limit = error as? BatchLimitError { return Problem(.tooLarge, detail: limit.message) }
    return Problem(.badJSON, detail: "\(error)")
}
