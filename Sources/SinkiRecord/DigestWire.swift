/// One folder's digests as `GET /v1/digests` answers them (docs/protocol.md, "Digests"). Digests are 64
/// lowercase hex digits: the XOR of one SHA-256 per live record (`TreeDigest` in SinkiSupport).
public struct FolderDigest: Sendable, Equatable {
    /// The folder's record path, or a root name alone.
    public var path: String
    /// Over every live record below the folder, at any depth.
    public var digest: String
    /// Over the live records directly in the folder.
    public var direct: String
    /// The highest change tag ever saved below the folder, tombstones included (0: none).
    public var head: Int64

    public init(path: String, digest: String, direct: String, head: Int64) {
        self.path = path
        self.digest = digest
        self.direct = direct
        self.head = head
    }

    func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("path", path)
        writer.field("digest", digest)
        writer.field("direct", direct)
        writer.field("head", head)
        writer.endObject()
    }

    static func read(from reader: inout JSONReader) throws -> FolderDigest {
        var out = FolderDigest(path: "", digest: "", direct: "", head: 0)
        var seen = Set<String>()
        try reader.readObject { reader, key in
            switch key {
            case "path": out.path = try reader.readString()
            case "digest": out.digest = try reader.readString()
            case "direct": out.direct = try reader.readString()
            case "head": out.head = try reader.readInt64()
            default: try reader.skipValue(); return
            }
            seen.insert(key)
        }
        for field in ["path", "digest", "direct", "head"] where !seen.contains(field) {
            throw RecordFieldError(field: field, message: "missing")
        }
        return out
    }
}

/// The answer to `GET /v1/digests?path=FOLDER[&children=1]`: the folder's digests and, when asked for,
/// those of every folder directly in it that ever held a record (bytewise path order).
public struct DigestReply: Sendable, Equatable {
    public var folder: FolderDigest
    public var children: [FolderDigest]?

    public init(folder: FolderDigest, children: [FolderDigest]? = nil) {
        self.folder = folder
        self.children = children
    }

    public var jsonBytes: [UInt8] {
        var writer = JSONWriter(capacity: 256 + (children?.count ?? 0) * 220)
        writer.beginObject()
        writer.key("folder")
        folder.write(to: &writer)
        if let children {
            writer.key("children")
            writer.beginArray()
            for child in children { child.write(to: &writer) }
            writer.endArray()
        }
        writer.endObject()
        return writer.bytes
    }

    public static func parse(_ bytes: [UInt8]) throws -> DigestReply {
        var reader = JSONReader(bytes)
        var folder: FolderDigest?
        var children: [FolderDigest]?
        try reader.readObject { reader, key in
            switch key {
            case "folder": folder = try FolderDigest.read(from: &reader)
            case "children":
                var list: [FolderDigest] = []
                try reader.readArray { reader in list.append(try FolderDigest.read(from: &reader)) }
                children = list
            default: try reader.skipValue()
            }
        }
        try reader.finish()
        guard let folder else { throw RecordFieldError(field: "folder", message: "missing") }
        return DigestReply(folder: folder, children: children)
    }
}
