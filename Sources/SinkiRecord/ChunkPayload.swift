/// One chunk of a large file, read and named, ready to send.
public struct ChunkPayload: Sendable {
    public var ref: ChunkRef
    public var bytes: [UInt8]
    /// CRC-32 of `bytes` (big-endian, as tus's `crc32` checksum carries it), computed where the chunk was read.
    public var crc32: [UInt8]

    public init(ref: ChunkRef, bytes: [UInt8], crc32: [UInt8]) {
        self.ref = ref
        self.bytes = bytes
        self.crc32 = crc32
    }
}
