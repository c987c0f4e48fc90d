/// `POST /v1/records/modify`: a batch of saves and deletes (a delete is a record with `deleted`).
public struct ModifyRequest: Sendable, Equatable {
    public var records: [Record]
    public init(records: [Record]) { self.records = records }

    public var jsonBytes: [UInt8] {
        var writer = JSONWriter(capacity: records.reduce(64) { $0 + 256 + ($1.data?.count ?? 0) * 4 / 3 })
        writer.beginObject()
        writer.key("records")
        writer.beginArray()
        for record in records { record.write(to: &writer) }
        writer.endArray()
        writer.endObject()
        return writer.bytes
    }

    /// The batch in frames (`RecordFrames`): content as raw bytes.
    public var framesBytes: [UInt8] {
        var writer = RecordFramesWriter(capacity: RecordFramesWriter.capacity(for: records))
        for record in records { writer.append(record) }
        var envelope = JSONWriter(capacity: 2)
        envelope.beginObject()
        envelope.endObject()
        writer.end(envelope)
        return writer.bytes
    }

    /// A batch in frames, read at once (the server reads one as it arrives: `RecordFramesReader`).
    public static func parse(frames bytes: [UInt8]) throws -> ModifyRequest {
        try ModifyRequest(frames: RecordFramesReader.parse(bytes))
    }

    /// The batch of a frames body read whole: its envelope must be an object (whose members are for later
    /// versions).
    public init(frames body: (records: [Record], envelope: [UInt8])) throws {
        var reader = JSONReader(body.envelope)
        try reader.readObject { reader, _ in try reader.skipValue() }
        try reader.finish()
        self.init(records: body.records)
    }

    /// Reads a whole batch at once (the server reads one as it arrives: `ModifyRequestReader`).
    public static func parse(_ bytes: [UInt8]) throws -> ModifyRequest {
        var reader = ModifyRequestReader()
        try bytes.withUnsafeBytes { try reader.take($0) }
        return try reader.finish()
    }
}

/// The server's answer for one item of a modify batch.
public struct ModifyResult: Sendable, Equatable {
    /// What happened to one item.
    public enum Status: String, Sendable {
        /// Saved; `record` carries the new changeTag (without inline data).
        case saved
        /// `baseTag` was stale; `record` is the server's current record, data included.
        case conflict
        /// The item broke a rule; `problem` says which. The rest of the batch is unaffected.
        case refused
    }

    public var path: String
    public var status: Status
    public var record: Record?
    public var problem: Problem?

    public init(path: String, status: Status, record: Record? = nil, problem: Problem? = nil) {
        self.path = path
        self.status = status
        self.record = record
        self.problem = problem
    }
}

/// The answer to a modify batch: one result per item, in request order.
public struct ModifyResponse: Sendable, Equatable {
    public var results: [ModifyResult]
    public init(results: [ModifyResult]) { self.results = results }

    public var jsonBytes: [UInt8] {
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("results")
        writer.beginArray()
        for result in results {
            writer.beginObject()
            writer.field("path", result.path)
            writer.field("status", result.status.rawValue)
            if let record = result.record {
                writer.key("record")
                record.write(to: &writer)
            }
            if let problem = result.problem {
                writer.key("problem")
                problem.write(to: &writer)
            }
            writer.endObject()
        }
        writer.endArray()
        writer.endObject()
        return writer.bytes
    }

    public static func parse(_ bytes: [UInt8]) throws -> ModifyResponse {
        var reader = JSONReader(bytes)
        var results: [ModifyResult] = []
        try reader.readObject { reader, key in
            guard key == "results" else { try reader.skipValue(); return }
            try reader.readArray { reader in
                var result = ModifyResult(path: "", status: .refused)
                var sawStatus = false
                try reader.readObject { reader, key in
                    switch key {
                    case "path": result.path = try reader.readString()
                    case "status":
                        let text = try reader.readString()
                        guard let status = ModifyResult.Status(rawValue: text) else {
                            throw RecordFieldError(field: "status", message: "unknown status \(quoted(text))")
                        }
                        result.status = status
                        sawStatus = true
                    case "record": result.record = try Record.read(from: &reader)
                    case "problem": result.problem = try Problem.read(from: &reader)
                    default: try reader.skipValue()
                    }
                }
                guard sawStatus else { throw RecordFieldError(field: "status", message: "missing") }
                results.append(result)
            }
        }
        try reader.finish()
        return ModifyResponse(results: results)
    }
}

/// A page of records: the change feed (`token`, `more`) or a look-up (`more`, `cursor`).
public struct RecordPage: Sendable, Equatable {
    public var records: [Record]
    /// Resumes the change feed exactly after this page.
    public var token: String
    /// More records are ready now; ask again without waiting.
    public var more: Bool
    /// On a look-up: the oldest change token the feed still takes (tombstones below it may have been
    /// purged); nil on the change feed.
    public var floor: Int64?
    /// On the change feed asked with `inflight=N`: files other devices are sending now.
    public var inflight: InFlightNews?
    /// On the change feed asked with `omitOrigin`: how many of the reader's own saves the page passed
    /// over (its token is past them).
    public var omitted: Int

    public init(records: [Record], token: String, more: Bool, floor: Int64? = nil, inflight: InFlightNews? = nil, omitted: Int = 0) {
        self.records = records
        self.token = token
        self.more = more
        self.floor = floor
        self.inflight = inflight
        self.omitted = omitted
    }

    public var jsonBytes: [UInt8] {
        var writer = JSONWriter(capacity: records.reduce(64) { $0 + 256 + ($1.data?.count ?? 0) * 4 / 3 })
        writer.beginObject()
        writer.key("records")
        writer.beginArray()
        for record in records { record.write(to: &writer) }
        writer.endArray()
        writeEnvelopeFields(to: &writer)
        writer.endObject()
        return writer.bytes
    }

    /// The page in frames (`RecordFrames`): content as raw bytes, the rest in the envelope.
    public var framesBytes: [UInt8] {
        var writer = RecordFramesWriter(capacity: RecordFramesWriter.capacity(for: records))
        for record in records { writer.append(record) }
        var envelope = JSONWriter(capacity: 64)
        writeEnvelope(to: &envelope)
        writer.end(envelope)
        return writer.bytes
    }

    private func writeEnvelope(to writer: inout JSONWriter) {
        writer.beginObject()
        writeEnvelopeFields(to: &writer)
        writer.endObject()
    }

    /// What a page says besides its records, as members of the object being written.
    private func writeEnvelopeFields(to writer: inout JSONWriter) {
        writer.field("token", token)
        writer.field("more", more)
        if let floor { writer.field("floor", floor) }
        if omitted > 0 { writer.field("omitted", omitted) }
        if let inflight {
            writer.key("inflight")
            inflight.write(to: &writer)
        }
    }

    /// A page as the server sent it: in frames when its `Content-Type` says so, JSON otherwise.
    public static func parse(_ bytes: [UInt8], contentType: String?) throws -> RecordPage {
        guard RecordFrames.names(contentType) else { return try parse(bytes) }
        return try parse(frames: RecordFramesReader.parse(bytes))
    }

    /// A page from its body's records and envelope in frames.
    static func parse(frames body: (records: [Record], envelope: [UInt8])) throws -> RecordPage {
        var page = try parse(body.envelope)
        page.records = body.records
        return page
    }

    public static func parse(_ bytes: [UInt8]) throws -> RecordPage {
        var reader = JSONReader(bytes)
        var page = RecordPage(records: [], token: "", more: false)
        try reader.readObject { reader, key in
            switch key {
            case "records": try reader.readArray { reader in page.records.append(try Record.read(from: &reader)) }
            case "token": page.token = try reader.readString()
            case "more": page.more = try reader.readBool()
            case "floor": page.floor = try reader.readInt64()
            case "omitted":
                let count = try reader.readInt64()
                guard count >= 0, count <= Int64(Int32.max) else { throw RecordFieldError(field: "omitted", message: "must be a count, not \(count)") }
                page.omitted = Int(count)
            case "inflight": page.inflight = try InFlightNews.read(from: &reader)
            default: try reader.skipValue()
            }
        }
        try reader.finish()
        return page
    }
}

/// The body of `POST /v1/chunks/missing` (which of these chunks the server does not hold for the user,
/// so that the sender uploads only those) and of `POST /v1/chunks/fetch` (the chunks wanted, in the
/// order their frames should come): names of chunks, SHA-256 in 64 lowercase hex digits each
/// (docs/protocol.md, "Chunks").
public struct ChunkNamesRequest: Sendable, Equatable {
    /// The most names one `missing` request may carry.
    public static let mostToCheck = 4_096
    /// The most names one `fetch` request may carry: the server opens each chunk before its answer starts.
    public static let mostToFetch = 256

    public var chunks: [String]
    public init(chunks: [String]) { self.chunks = chunks }

    public var jsonBytes: [UInt8] { writeNames(chunks, key: "chunks") }

    public static func parse(_ bytes: [UInt8]) throws -> ChunkNamesRequest {
        var reader = JSONReader(bytes)
        return ChunkNamesRequest(chunks: try readNames(&reader, key: "chunks"))
    }
}

/// The answer to `POST /v1/chunks/missing`: the names asked for that the server lacks, in the order
/// asked, each once.
public struct MissingChunksResponse: Sendable, Equatable {
    public var missing: [String]
    public init(missing: [String]) { self.missing = missing }

    public var jsonBytes: [UInt8] { writeNames(missing, key: "missing") }

    public static func parse(_ bytes: [UInt8]) throws -> MissingChunksResponse {
        var reader = JSONReader(bytes)
        return MissingChunksResponse(missing: try readNames(&reader, key: "missing"))
    }
}

/// The answer to `POST /v1/chunks`: how many frames became (or already were) the user's chunks, and
/// the names of those refused (a narrowed token's bytes that do not hash to their name).
public struct ChunkBatchResponse: Sendable, Equatable {
    public var stored: Int
    public var refused: [String]

    public init(stored: Int, refused: [String]) {
        self.stored = stored
        self.refused = refused
    }

    public var jsonBytes: [UInt8] {
        var writer = JSONWriter(capacity: 32 + refused.count * 67)
        writer.beginObject()
        writer.field("stored", stored)
        writer.key("refused")
        writer.beginArray()
        for name in refused { writer.string(name) }
        writer.endArray()
        writer.endObject()
        return writer.bytes
    }

    public static func parse(_ bytes: [UInt8]) throws -> ChunkBatchResponse {
        var reader = JSONReader(bytes)
        var stored: Int?
        var refused: [String] = []
        try reader.readObject { reader, key in
            switch key {
            case "stored": stored = try reader.readInt()
            case "refused": try reader.readArray { reader in refused.append(try reader.readString()) }
            default: try reader.skipValue()
            }
        }
        try reader.finish()
        guard let stored else { throw RecordFieldError(field: "stored", message: "missing") }
        return ChunkBatchResponse(stored: stored, refused: refused)
    }
}

/// `{"KEY": ["NAME", …]}`.
private func writeNames(_ names: [String], key: String) -> [UInt8] {
    var writer = JSONWriter(capacity: 16 + names.count * 67)
    writer.beginObject()
    writer.key(key)
    writer.beginArray()
    for name in names { writer.string(name) }
    writer.endArray()
    writer.endObject()
    return writer.bytes
}

/// An object whose member `key` is an array of strings (the others skipped); the whole input is read.
private func readNames(_ reader: inout JSONReader, key wanted: String) throws -> [String] {
    var names: [String]?
    try reader.readObject { reader, key in
        guard key == wanted else { try reader.skipValue(); return }
        var list: [String] = []
        try reader.readArray { reader in list.append(try reader.readString()) }
        names = list
    }
    try reader.finish()
    guard let names else { throw RecordFieldError(field: wanted, message: "missing") }
    return names
}

/// A change-feed token as clients see it (`STORE.TAG`, opaque but for its tag).
public enum FeedToken {
    /// The change tag a token stands at; nil for none, or for text that is not a token.
    public static func tag(of token: String?) -> Int64? {
        guard let token, let dot = token.utf8.lastIndex(of: UInt8(ascii: ".")) else { return nil }
        return Int64(String(Substring(token.utf8[token.utf8.index(after: dot)...])))
    }

    /// `token` moved up to `floor` when it stands below it: a listing's position is the newest record
    /// left, which may be older than the history floor once newer tombstones were purged, and the
    /// server refuses a token below its floor (410) for ever.
    public static func atLeast(_ token: String, floor: Int64) -> String {
        guard let tag = tag(of: token), tag < floor, let dot = token.utf8.lastIndex(of: UInt8(ascii: ".")) else { return token }
        return String(decoding: token.utf8[..<dot], as: UTF8.self) + ".\(floor)"
    }
}

/// The pages of a streamed feed answer (docs/protocol.md, "A feed that streams") read as its bytes
/// arrive: each page is whole at its envelope frame.
public struct RecordPageStream {
    private var reader = RecordFramesReader()
    /// Bytes taken of the page not yet whole.
    public private(set) var partialBytes = 0

    public init() {}

    /// Takes the next bytes of the answer; returns the pages they complete, in order.
    public mutating func take(_ bytes: UnsafeRawBufferPointer) throws -> [RecordPage] {
        var pages: [RecordPage] = []
        var index = 0
        while index < bytes.count {
            let taken = try reader.takeUntilEnvelope(UnsafeRawBufferPointer(rebasing: bytes[index...]))
            index += taken
            partialBytes += taken
            if reader.hasEnvelope {
                pages.append(try RecordPage.parse(frames: reader.finish()))
                reader = RecordFramesReader()
                partialBytes = 0
            }
        }
        return pages
    }

    /// The answer is all in: it must end where a page ended (a cut one ends mid-page).
    public func finish() throws {
        guard reader.isUntouched else {
            throw RecordFramesError(offset: 0, message: "the answer ends inside a page, before its envelope frame (cut off?)")
        }
    }
}
