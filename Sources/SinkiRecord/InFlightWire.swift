/// `POST /v1/inflight`: a sender tells the server which chunks of a large file it has uploaded so far,
/// before the file's record exists, so that other devices can fetch them while it sends the rest
/// (docs/protocol.md, "Files in flight"). Announcements are hints: the record, when it comes, is what
/// a receiver applies, every chunk checked against its name.
public struct InFlightAnnouncement: Sendable, Equatable {
    /// The most chunks one announcement may carry (a batch is a few MiB of chunks).
    public static let maxChunks = 4_096

    /// The record path the file will be saved at.
    public var path: String
    /// The sender's name for this pass over the file (32 hex digits): a file read again is a new session.
    public var session: String
    /// The file's size, as the sender saw it when it started reading.
    public var size: Int64
    /// The position in the session's chunk list of the first chunk here: the count announced before.
    public var index: Int
    public var chunks: [ChunkRef]
    /// The sending device's name, as its records carry it (several agents may share one token); empty:
    /// the token's device.
    public var device: String
    /// The sender gives the session up (the file changed or went away while it was sent): receivers drop
    /// what they fetched of it. `chunks` is empty then.
    public var end = false

    public init(path: String, session: String, size: Int64, index: Int, chunks: [ChunkRef], device: String = "") {
        self.path = path
        self.session = session
        self.size = size
        self.index = index
        self.chunks = chunks
        self.device = device
    }

    public var jsonBytes: [UInt8] {
        var writer = JSONWriter(capacity: 128 + chunks.count * 80)
        writer.beginObject()
        writer.field("path", path)
        writer.field("session", session)
        writer.field("size", size)
        writer.field("index", index)
        if !device.isEmpty { writer.field("device", device) }
        if end { writer.field("end", true) }
        writer.key("chunks")
        ChunkRef.write(chunks, to: &writer, field: "chunks")
        writer.endObject()
        return writer.bytes
    }

    public static func parse(_ bytes: [UInt8]) throws -> InFlightAnnouncement {
        var reader = JSONReader(bytes)
        var out = InFlightAnnouncement(path: "", session: "", size: -1, index: -1, chunks: [])
        var sawChunks = false
        try reader.readObject { reader, key in
            switch key {
            case "path": out.path = try reader.readString()
            case "session": out.session = try reader.readString()
            case "size": out.size = try reader.readInt64()
            case "index": out.index = Int(try reader.readInt64())
            case "device": out.device = try reader.readString()
            case "end": out.end = try reader.readBool()
            case "chunks":
                out.chunks = try ChunkRef.readList(from: &reader, field: "chunks")
                sawChunks = true
            default: try reader.skipValue()
            }
        }
        try reader.finish()
        for (field, missing) in [("path", out.path.isEmpty), ("session", out.session.isEmpty), ("size", out.size < 0),
                                 ("index", out.index < 0), ("chunks", !sawChunks && !out.end)] where missing {
            throw RecordFieldError(field: field, message: "missing")
        }
        return out
    }

    /// Whether `text` is a session name: 32 lowercase hex digits.
    public static func isSession(_ text: String) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }
}

/// What the change feed tells of files in flight (`inflight=N` on `GET /v1/changes`): the chunks
/// announced since position `N` of the user's in-flight news, and the sessions that ended.
public struct InFlightNews: Sendable, Equatable {
    /// One file's chunks announced since the position asked for, from chunk `index` of its session on.
    public struct File: Sendable, Equatable {
        public var path: String
        public var session: String
        public var device: String
        public var size: Int64
        public var index: Int
        public var chunks: [ChunkRef]

        public init(path: String, session: String, device: String, size: Int64, index: Int, chunks: [ChunkRef]) {
            self.path = path
            self.session = session
            self.device = device
            self.size = size
            self.index = index
            self.chunks = chunks
        }
    }

    /// The position to ask from next time.
    public var position: Int64
    public var files: [File]
    /// Sessions saved as a record since the position asked for: what was fetched of them waits for it.
    public var ended: [String]
    /// Sessions given up (by their sender, replaced by a newer one, idle too long) since the position
    /// asked for: no record follows, and what was fetched of them goes.
    public var abandoned: [String]

    public init(position: Int64, files: [File] = [], ended: [String] = [], abandoned: [String] = []) {
        self.position = position
        self.files = files
        self.ended = ended
        self.abandoned = abandoned
    }

    public var isEmpty: Bool { files.isEmpty && ended.isEmpty && abandoned.isEmpty }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("position", position)
        writer.key("files")
        writer.beginArray()
        for file in files {
            writer.beginObject()
            writer.field("path", file.path)
            writer.field("session", file.session)
            writer.field("device", file.device)
            writer.field("size", file.size)
            writer.field("index", file.index)
            writer.key("chunks")
            ChunkRef.write(file.chunks, to: &writer, field: "chunks")
            writer.endObject()
        }
        writer.endArray()
        for (key, sessions) in [("ended", ended), ("abandoned", abandoned)] {
            writer.key(key)
            writer.beginArray()
            for session in sessions { writer.string(session) }
            writer.endArray()
        }
        writer.endObject()
    }

    public static func read(from reader: inout JSONReader) throws -> InFlightNews {
        var news = InFlightNews(position: 0)
        try reader.readObject { reader, key in
            switch key {
            case "position": news.position = try reader.readInt64()
            case "files":
                try reader.readArray { reader in
                    var file = File(path: "", session: "", device: "", size: 0, index: 0, chunks: [])
                    try reader.readObject { reader, key in
                        switch key {
                        case "path": file.path = try reader.readString()
                        case "session": file.session = try reader.readString()
                        case "device": file.device = try reader.readString()
                        case "size": file.size = try reader.readInt64()
                        case "index": file.index = Int(try reader.readInt64())
                        case "chunks": file.chunks = try ChunkRef.readList(from: &reader, field: "inflight.files.chunks")
                        default: try reader.skipValue()
                        }
                    }
                    news.files.append(file)
                }
            case "ended": try reader.readArray { reader in news.ended.append(try reader.readString()) }
            case "abandoned": try reader.readArray { reader in news.abandoned.append(try reader.readString()) }
            default: try reader.skipValue()
            }
        }
        return news
    }
}

extension ChunkRef {
    /// A chunk list as `[[sha256, size], …]`: pairs, not objects, since a 1 GiB file has thousands.
    public static func write(_ chunks: [ChunkRef], to writer: inout JSONWriter, field: String) {
        writer.beginArray()
        for chunk in chunks {
            writer.beginArray()
            writer.string(chunk.sha256)
            writer.int(chunk.size)
            writer.endArray()
        }
        writer.endArray()
    }

    /// Reads a list written by `write`; `field` names it in errors.
    public static func readList(from reader: inout JSONReader, field: String) throws -> [ChunkRef] {
        var chunks: [ChunkRef] = []
        try reader.readArray { reader in
            var chunk = ChunkRef(sha256: "", size: -1)
            var index = 0
            try reader.readArray { reader in
                switch index {
                case 0: chunk.sha256 = try reader.readString()
                case 1: chunk.size = try reader.readInt64()
                default: throw RecordFieldError(field: field, message: "each chunk is [sha256, size]")
                }
                index += 1
            }
            guard index == 2 else { throw RecordFieldError(field: field, message: "each chunk is [sha256, size]") }
            chunks.append(chunk)
        }
        return chunks
    }
}
