import SinkiRecord

/// What the server knows of one tus upload, as kept in its `ID.info` file (see `UploadStore`).
struct UploadInfo: Sendable, Equatable {
    enum Concat: String, Sendable {
        case none
        /// A part of a later final upload; swept like an unfinished upload, and never an asset.
        case partial
        /// The concatenation of `parts`, complete from its creation; takes no PATCH.
        case final
    }

    var id: String
    var user: String
    /// nil while the client deferred it (creation-defer-length).
    var length: Int64?
    /// Bytes received and kept; the data file holds exactly this many.
    var offset: Int64 = 0
    var metadata = TusMetadata()
    /// Nanoseconds since the epoch (server clock).
    var createdAt: Int64
    /// The last creation or PATCH; an unfinished upload expires `expiry` after it.
    var touchedAt: Int64
    var concat = Concat.none
    /// For a final upload: the ids of its parts, in order.
    var parts: [String] = []
    /// Lowercase hex SHA-256 of the whole content; set when the upload finishes.
    var sha256 = ""
    /// The sweep removed its bytes; the info stays a while so that the id answers 410, not 404.
    var expired = false
    /// The path prefix of the token that created it (nil: a token without one). A token narrowed to a
    /// prefix sees only uploads made within it (docs/tokens.md).
    var scope: String?
    /// For a chunk upload (`Upload-Metadata` key `chunk`): the chunk's name, under which the finished
    /// bytes go to the user's chunks (`ChunkStore`). Such an upload gets no SHA-256 of its own.
    var chunk: String?

    var isFinished: Bool { length.map { offset == $0 } ?? false }

    /// Whether the sweep takes it once `expiry` has passed since `touchedAt`.
    var canExpire: Bool { !isFinished || concat == .partial }

    var jsonBytes: [UInt8] {
        var writer = JSONWriter()
        writer.beginObject()
        writer.field("id", id)
        writer.field("user", user)
        writer.field("length", length ?? -1)
        writer.field("offset", offset)
        writer.field("metadata", metadata.header)
        writer.field("createdAt", createdAt)
        writer.field("touchedAt", touchedAt)
        writer.field("concat", concat.rawValue)
        writer.key("parts")
        writer.beginArray()
        for part in parts { writer.string(part) }
        writer.endArray()
        writer.field("sha256", sha256)
        writer.field("expired", expired)
        if let scope { writer.field("scope", scope) }
        if let chunk { writer.field("chunk", chunk) }
        writer.endObject()
        return writer.bytes
    }

    static func parse(_ bytes: [UInt8]) throws -> UploadInfo {
        var info = UploadInfo(id: "", user: "", createdAt: 0, touchedAt: 0)
        var reader = JSONReader(bytes)
        try reader.readObject { reader, key in
            switch key {
            case "id": info.id = try reader.readString()
            case "user": info.user = try reader.readString()
            case "length":
                let length = try reader.readInt64()
                info.length = length < 0 ? nil : length
            case "offset": info.offset = try reader.readInt64()
            case "metadata": info.metadata = try TusMetadata.parse(try reader.readString())
            case "createdAt": info.createdAt = try reader.readInt64()
            case "touchedAt": info.touchedAt = try reader.readInt64()
            case "concat": info.concat = Concat(rawValue: try reader.readString()) ?? .none
            case "parts": try reader.readArray { reader in info.parts.append(try reader.readString()) }
            case "sha256": info.sha256 = try reader.readString()
            case "expired": info.expired = try reader.readBool()
            case "scope": info.scope = try reader.readString()
            case "chunk": info.chunk = try reader.readString()
            default: try reader.skipValue()
            }
        }
        return info
    }
}
