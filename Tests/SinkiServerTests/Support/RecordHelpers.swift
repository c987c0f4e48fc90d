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

/// Incompressible test content: xorshift64* seeded from the system generator (a system call per byte
/// would dominate the tests that make megabytes of it).
func randomBytes(_ count: Int) -> [UInt8] {
    var state = UInt64.random(in: 1...UInt64.max)
    return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
        var index = 0
        while index < count {
            state ^= state >> 12
            state ^= state << 25
            state ^= state >> 27
            var word = state &* 0x2545_F491_4F6C_DD1D
            for _ in 0..<min(8, count - index) {
                buffer[index] = UInt8(truncatingIfNeeded: word)
                word >>= 8
                index += 1
            }
        }
        initialized = count
    }
}

/// Inflates a record's inline data back to its content.
func content(of record: Record) throws -> [UInt8] {
    try Deflate.decompress(record.data ?? [], expectedSize: Int(record.size))
}
