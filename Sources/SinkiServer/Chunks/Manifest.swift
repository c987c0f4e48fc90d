import SinkiRecord
import SinkiSupport

extension Asset {
    /// The manifest as the stores keep it (`ManifestCoding`, 36 bytes a chunk); nil for an upload asset.
    var storedChunks: [UInt8]? { chunks.map { ManifestCoding.encode($0.map { ($0.sha256, $0.size) }) } }

    /// A stored manifest read back; the record's path names it in the error when the bytes are not one.
    static func chunks(stored: [UInt8], path: String) throws(RecordStoreError) -> [ChunkRef] {
        guard let entries = ManifestCoding.decode(stored) else {
            throw RecordStoreError(path: "records", message: "the manifest stored for \(quoted(path)) is \(stored.count) bytes, not whole 36-byte entries")
        }
        return entries.map { ChunkRef(sha256: $0.sha256, size: $0.size) }
    }
}

extension Record {
    /// What the record weighs in a page beyond its fixed fields: its inline data or its manifest, so
    /// that a page of large files' manifests stops growing like one of inline content.
    var pageBytes: Int { (data?.count ?? 0) + (asset?.chunks?.count ?? 0) * ManifestCoding.entryBytes }
}
