/// An `application/problem+json` error (RFC 9457) as the server sends it.
public struct Problem: Error, Sendable, Equatable, CustomStringConvertible {
    public var status: Int
    public var code: String
    public var title: String
    public var detail: String
    public var requestId: String
    /// An extension member (RFC 9457 §3.2): the request field or token scope field the problem is
    /// about (`prefix`, `maxUploads`, `path`), so a client can act on it without parsing `detail`.
    public var field: String?
    /// An extension member of `storage-full`: the user's usage and quota, and what the save needed.
    public var storage: StorageFigures?

    public init(status: Int, code: String, title: String, detail: String, requestId: String = "", field: String? = nil) {
        self.status = status
        self.code = code
        self.title = title
        self.detail = detail
        self.requestId = requestId
        self.field = field
    }

    public init(_ kind: ProblemKind, detail: String, requestId: String = "", field: String? = nil) {
        self.init(status: kind.status, code: kind.code, title: kind.title, detail: detail, requestId: requestId, field: field)
    }

    public var type: String { "https://sinki.dev/problems/\(code)" }

    public var description: String {
        var text = "\(status) \(code): \(detail)"
        if !requestId.isEmpty { text += " (request \(requestId))" }
        return text
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("type", type)
        writer.field("title", title)
        writer.field("status", status)
        writer.field("detail", detail)
        writer.field("code", code)
        writer.field("requestId", requestId)
        if let field { writer.field("field", field) }
        if let storage {
            writer.key("storage")
            storage.write(to: &writer)
        }
        writer.endObject()
    }

    public var jsonBytes: [UInt8] {
        var writer = JSONWriter()
        write(to: &writer)
        return writer.bytes
    }

    public static func read(from reader: inout JSONReader) throws -> Problem {
        var problem = Problem(status: 0, code: "", title: "", detail: "")
        try reader.readObject { reader, key in
            switch key {
            case "status": problem.status = try reader.readInt()
            case "code": problem.code = try reader.readString()
            case "title": problem.title = try reader.readString()
            case "detail": problem.detail = try reader.readString()
            case "requestId": problem.requestId = try reader.readString()
            case "field": problem.field = try reader.readString()
            case "storage": problem.storage = try StorageFigures.read(from: &reader)
            default: try reader.skipValue()
            }
        }
        return problem
    }

    /// Parses a problem document; nil when the bytes are not one.
    public static func parse(_ bytes: [UInt8]) -> Problem? {
        var reader = JSONReader(bytes)
        guard let problem = try? read(from: &reader), problem.status != 0 else { return nil }
        return problem
    }
}

/// A user's storage on the server, in bytes (docs/server.md, "Quotas"): what their current records hold,
/// what the versions kept only for history hold besides, their quota, and what a refused save needed.
public struct StorageFigures: Sendable, Equatable {
    public var liveBytes: Int64
    public var historyBytes: Int64
    /// nil: no quota.
    public var quotaBytes: Int64?
    /// The growth the refused save would have made; nil outside a refusal.
    public var neededBytes: Int64?

    public init(liveBytes: Int64, historyBytes: Int64, quotaBytes: Int64?, neededBytes: Int64? = nil) {
        self.liveBytes = liveBytes
        self.historyBytes = historyBytes
        self.quotaBytes = quotaBytes
        self.neededBytes = neededBytes
    }

    public var usedBytes: Int64 { liveBytes + historyBytes }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("liveBytes", liveBytes)
        writer.field("historyBytes", historyBytes)
        if let quotaBytes { writer.field("quotaBytes", quotaBytes) }
        if let neededBytes { writer.field("neededBytes", neededBytes) }
        writer.endObject()
    }

    public static func read(from reader: inout JSONReader) throws -> StorageFigures {
        var figures = StorageFigures(liveBytes: 0, historyBytes: 0, quotaBytes: nil)
        try reader.readObject { reader, key in
            switch key {
            case "liveBytes": figures.liveBytes = try reader.readInt64()
            case "historyBytes": figures.historyBytes = try reader.readInt64()
            case "quotaBytes": figures.quotaBytes = reader.readNull() ? nil : try reader.readInt64()
            case "neededBytes": figures.neededBytes = reader.readNull() ? nil : try reader.readInt64()
            default: try reader.skipValue()
            }
        }
        return figures
    }
}

/// Every error the server answers with, declared once: code, title and HTTP status.
public struct ProblemKind: Sendable, Equatable {
    public let code: String
    public let title: String
    public let status: Int

    public static let badRequest = ProblemKind(code: "bad-request", title: "The request is malformed", status: 400)
    public static let badJSON = ProblemKind(code: "bad-json", title: "The body is not the JSON this route takes", status: 400)
    public static let badPath = ProblemKind(code: "bad-path", title: "A record path breaks the path rules", status: 400)
    public static let badFraming = ProblemKind(code: "bad-framing", title: "The request's length is given twice or ambiguously (RFC 9112 §6)", status: 400)
    public static let badTarget = ProblemKind(code: "bad-target", title: "The request target holds an encoded slash, a NUL, a dot segment or a control byte", status: 400)
    public static let badToken = ProblemKind(code: "bad-token", title: "The change token is not one this server issued", status: 400)
    public static let unauthorized = ProblemKind(code: "unauthorized", title: "A valid bearer token is required", status: 401)
    public static let notFound = ProblemKind(code: "not-found", title: "No such resource", status: 404)
    public static let methodNotAllowed = ProblemKind(code: "method-not-allowed", title: "The route does not take this method", status: 405)
    public static let tokenExpired = ProblemKind(code: "token-expired", title: "The change token predates the retained history; resync", status: 410)
    public static let tooLarge = ProblemKind(code: "too-large", title: "The request body is too large", status: 413)
    public static let unsupportedMediaType = ProblemKind(code: "unsupported-media-type", title: "The content type is not accepted here", status: 415)
    public static let moveSourceGone = ProblemKind(code: "move-source-gone", title: "A move's source record is gone or holds other content; send the content", status: 409)
    public static let chunksMissing = ProblemKind(code: "chunks-missing", title: "The manifest names chunks the server does not hold; upload them", status: 409)
    public static let chunkIntact = ProblemKind(code: "chunk-intact", title: "The chunk's bytes match its name; it was kept", status: 409)
    public static let inflightGap = ProblemKind(code: "inflight-gap", title: "The announcement does not follow the session's chunks; announce from index 0", status: 409)
    // tus (docs/protocol.md, "Uploads"):
    public static let uploadFinal = ProblemKind(code: "upload-final", title: "A final (concatenated) upload takes no PATCH", status: 403)
    public static let offsetMismatch = ProblemKind(code: "offset-mismatch", title: "Upload-Offset is not where the upload stands", status: 409)
    public static let uploadExpired = ProblemKind(code: "upload-expired", title: "The upload expired unfinished", status: 410)
    public static let tusVersion = ProblemKind(code: "tus-version", title: "Tus-Resumable is missing or names a version this server does not speak", status: 412)
    public static let rangeNotSatisfiable = ProblemKind(code: "range-not-satisfiable", title: "The range lies outside the asset", status: 416)
    public static let uploadLocked = ProblemKind(code: "upload-locked", title: "Another request is writing this upload", status: 423)
    public static let checksumMismatch = ProblemKind(code: "checksum-mismatch", title: "The chunk does not match its Upload-Checksum", status: 460)
    // Device tokens (docs/tokens.md):
    public static let readOnlyToken = ProblemKind(code: "read-only-token", title: "The token is read-only", status: 403)
    public static let tooManyTokens = ProblemKind(code: "too-many-tokens", title: "The user has as many live tokens as the server allows; revoke some first", status: 403)
    public static let beyondScope = ProblemKind(code: "beyond-scope", title: "The request goes beyond the token's scope", status: 403)
    public static let rateLimited = ProblemKind(code: "rate-limited", title: "Too many requests for this token; retry after the time given", status: 429)
    public static let headersTooLarge = ProblemKind(code: "headers-too-large", title: "The request's header fields are too large", status: 431)
    public static let internalError = ProblemKind(code: "internal", title: "The server failed", status: 500)
    public static let notImplemented = ProblemKind(code: "not-implemented", title: "The transfer coding is not one this server implements", status: 501)
    // History and storage (docs/protocol.md, "History"; docs/server.md, "Quotas"):
    public static let historyGone = ProblemKind(code: "history-gone", title: "The moment asked for is older than the history the server keeps", status: 410)
    public static let deletedVersion = ProblemKind(code: "deleted-version", title: "The version is a delete: it has no content to copy", status: 409)
    public static let storageFull = ProblemKind(code: "storage-full", title: "The save would take the user past their storage quota", status: 507)
    public static let diskFull = ProblemKind(code: "disk-full", title: "The server's disk is full", status: 507)
    public static let unavailable = ProblemKind(code: "unavailable", title: "The server is shutting down or overloaded", status: 503)
}
