import SinkiRecord
import SinkiSupport

/// A file record with its content compressed inline, as an agent sends it.
func fileRecord(_ path: String, _ content: [UInt8], baseTag: Int64 = 0, device: String = "laptop") -> Record {
    Record(path: path, type: "keep-both", data: Deflate.compress(content), baseTag: baseTag, size: Int64(content.count),
           sha256: Digest.sha256Hex(content), mode: 0o644, modifiedAt: 1_764_422_400_123_456_789, device: device)
}

func fileRecord(_ path: String, _ text: String, baseTag: Int64 = 0, device: String = "laptop") -> Record {
    fileRecord(path, Array(text.utf8), baseTag: baseTag, device: device)
}

func tombstone(_ path: String, baseTag: Int64) -> Record {
    Record(path: path, deleted: true, baseTag: baseTag, device: "laptop")
}

func randomBytes(_ count: Int) -> [UInt8] {
    var generator = SystemRandomNumberGenerator()
    var bytes = [UInt8](repeating: 0, count: count)
    var index = 0
    while index < count {
        var word = generator.next()
        for _ in 0..<min(8, count - index) {
            bytes[index] = UInt8(truncatingIfNeeded: word)
            word >>= 8
            index += 1
        }
    }
    return bytes
}

/// Inflates a record's inline data back to its content.
func content(of record: Record) throws -> [UInt8] {
    try Deflate.decompress(record.data ?? [], expectedSize: Int(record.size))
}
