/// A record field that is missing or of the wrong shape.
public struct RecordFieldError: Error, Sendable, CustomStringConvertible {
    public var field: String
    public var message: String
    public var description: String { "field \(field): \(message)" }
}

extension Record {
    /// Writes the record as a JSON object (design §2 field names).
    /// `includeName: false` leaves out `recordName`, which a reader computes from the path.
    public func write(to writer: inout JSONWriter, includeData: Bool = true, includeName: Bool = true) {
        writer.beginObject()
        if includeName { writer.field("recordName", recordName) }
        writer.field("path", path)
        writer.field("type", type)
        if includeData, let data {
            writer.key("data")
            writer.base64(data)
        }
        if let asset {
            writer.key("asset")
            writer.beginObject()
            writer.field("id", asset.id)
            writer.field("size", asset.size)
            writer.field("sha256", asset.sha256)
            if let chunks = asset.chunks {
                writer.key("chunks")
                ChunkRef.write(chunks, to: &writer, field: "asset.chunks")
            }
            writer.endObject()
        }
        writer.field("deleted", deleted ? 1 : 0)
        if incomplete { writer.field("incomplete", 1) }
        writer.field("changeTag", changeTag)
        writer.field("baseTag", baseTag)
        writer.field("size", size)
        writer.field("sha256", sha256)
        writer.field("mode", Int64(mode))
        writer.field("modifiedAt", modifiedAt)
        writer.field("device", device)
        if let movedFrom { writer.field("movedFrom", movedFrom) }
        if !xattrs.isEmpty {
            writer.key("xattrs")
            xattrs.write(to: &writer)
        }
        writer.endObject()
    }

    /// Reads a record object; unknown fields are skipped so that newer peers can add some.
    public static func read(from reader: inout JSONReader) throws -> Record {
        var record = Record(path: "")
        var sawPath = false
        try reader.readObject { reader, key in
            switch key {
            case "path": record.path = try reader.readString(); sawPath = true
            case "type": record.type = try reader.readString()
            case "data": record.data = reader.readNull() ? nil : try reader.readBase64()
            case "asset":
                if reader.readNull() { record.asset = nil; return }
                var asset = Asset(id: "", size: 0, sha256: "")
                try reader.readObject { reader, key in
                    switch key {
                    case "id": asset.id = try reader.readString()
                    case "size": asset.size = try reader.readInt64()
                    case "sha256": asset.sha256 = try reader.readString()
                    case "chunks":
                        if reader.readNull() { asset.chunks = nil; return }
                        asset.chunks = try ChunkRef.readList(from: &reader, field: "asset.chunks")
                    default: try reader.skipValue()
                    }
                }
                record.asset = asset
            case "deleted":
                let value = try reader.readInt64()
                guard value == 0 || value == 1 else { throw RecordFieldError(field: "deleted", message: "must be 0 or 1") }
                record.deleted = value == 1
            case "incomplete":
                let value = try reader.readInt64()
                guard value == 0 || value == 1 else { throw RecordFieldError(field: "incomplete", message: "must be 0 or 1") }
                record.incomplete = value == 1
            case "changeTag": record.changeTag = try reader.readInt64()
            case "baseTag": record.baseTag = reader.readNull() ? 0 : try reader.readInt64()
            case "size": record.size = try reader.readInt64()
            case "sha256": record.sha256 = try reader.readString()
            case "mode":
                let mode = try reader.readInt64()
                guard (0...0o7777).contains(mode) else { throw RecordFieldError(field: "mode", message: "out of range") }
                record.mode = UInt32(mode)
            case "modifiedAt": record.modifiedAt = try reader.readInt64()
            case "device": record.device = try reader.readString()
            case "movedFrom": record.movedFrom = reader.readNull() ? nil : try reader.readString()
            case "xattrs": record.xattrs = try ExtendedAttributes.read(from: &reader)
            default: try reader.skipValue()
            }
        }
        guard sawPath else { throw RecordFieldError(field: "path", message: "missing") }
        return record
    }

    public func jsonBytes(includeData: Bool = true) -> [UInt8] {
        var writer = JSONWriter()
        write(to: &writer, includeData: includeData)
        return writer.bytes
    }
}
