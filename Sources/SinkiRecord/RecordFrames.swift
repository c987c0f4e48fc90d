/// Records in frames (docs/protocol.md, "Records in frames"): a modify batch or a page of records with
/// their inline content as raw bytes beside the JSON, not base64 inside it. Base64 adds a third to every
/// byte of content on the wire, in both links, and costs a pass over it at each end.
///
/// A body is a sequence of frames, each a kind byte, a 4-byte big-endian length and that many bytes:
/// `R` a record (its JSON without `data`), `D` the inline content of the record just before it (the
/// zlib stream as `data` would hold it, decoded), and last `E`, the envelope: a JSON object with what is
/// not a record (`{}` for a batch; `token`, `more`, `floor`, `inflight` for a page). A body without its
/// `E` frame at the end was cut off, and is refused rather than read as a shorter batch.
public enum RecordFrames {
    /// The media type of a body in frames.
    public static let mediaType = "application/vnd.sinki.records"

    static let record = UInt8(ascii: "R")
    static let data = UInt8(ascii: "D")
    static let envelope = UInt8(ascii: "E")
    static let headerBytes = 5

    /// True when a media type (parameters and case aside) is `mediaType`.
    public static func names(_ contentType: String?) -> Bool {
        MediaType.essence(of: contentType) == mediaType
    }

    /// True when an `Accept` header lists `mediaType` (with a quality above 0).
    public static func accepted(by accept: String?) -> Bool {
        guard let accept else { return false }
        for item in accept.split(separator: ",") {
            let parts = item.split(separator: ";").map { String($0).trimmingSpaces.lowercased() }
            guard parts.first == mediaType else { continue }
            let refused = parts.dropFirst().contains { $0.hasPrefix("q=") && (Double($0.dropFirst(2)) ?? 1) == 0 }
            if !refused { return true }
        }
        return false
    }
}

/// Writes records and an envelope as frames.
public struct RecordFramesWriter: Sendable {
    public private(set) var bytes: [UInt8]

    public init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// Capacity for `records` in frames: their content, and a guess at their fields.
    public static func capacity(for records: [Record]) -> Int {
        records.reduce(64) { $0 + 2 * RecordFrames.headerBytes + 320 + ($1.data?.count ?? 0) }
    }

    /// A record, and its inline content in a frame of its own when it has some (and `includeData`).
    public mutating func append(_ record: Record, includeData: Bool = true) {
        var writer = JSONWriter(capacity: 320)
        // The name is the path's hash, which the reader computes: sending it is 47 bytes a record for nothing.
        record.write(to: &writer, includeData: false, includeName: false)
        frame(RecordFrames.record, writer.bytes)
        if includeData, let data = record.data { frame(RecordFrames.data, data) }
    }

    /// The envelope, which ends the body.
    public mutating func end(_ envelope: JSONWriter) {
        frame(RecordFrames.envelope, envelope.bytes)
    }

    private mutating func frame(_ kind: UInt8, _ payload: [UInt8]) {
        let count = UInt32(payload.count)
        bytes.append(kind)
        bytes.append(UInt8(truncatingIfNeeded: count >> 24))
        bytes.append(UInt8(truncatingIfNeeded: count >> 16))
        bytes.append(UInt8(truncatingIfNeeded: count >> 8))
        bytes.append(UInt8(truncatingIfNeeded: count))
        bytes.append(contentsOf: payload)
    }
}

/// A body in frames that breaks the format: where, and how.
public struct RecordFramesError: Error, Sendable, CustomStringConvertible {
    /// The offset in the body of the frame at fault.
    public var offset: Int
    public var message: String
    public var description: String { "frames: \(message) (frame at byte \(offset))" }
}

/// Reads records in frames as their bytes arrive: a record is read once its frame is in, and the frame's
/// bytes dropped, so a batch costs what its records hold.
public struct RecordFramesReader {
    /// Bounds on what one frame may carry (the server's; `parse` has none).
    public struct Limits: Sendable {
        public var maxRecords: Int
        /// The most bytes of JSON one record may take.
        public var maxRecordBytes: Int
        /// The most bytes of inline content one record may carry.
        public var maxDataBytes: Int
        /// The most bytes of the envelope.
        public var maxEnvelopeBytes: Int

        public init(maxRecords: Int = .max, maxRecordBytes: Int = .max, maxDataBytes: Int = .max, maxEnvelopeBytes: Int = .max) {
            self.maxRecords = maxRecords
            self.maxRecordBytes = maxRecordBytes
            self.maxDataBytes = maxDataBytes
            self.maxEnvelopeBytes = maxEnvelopeBytes
        }
    }

    private let limits: Limits
    /// The bytes of the frame being received: its header until that is whole, then its payload.
    private var pending: [UInt8] = []
    private var kind: UInt8 = 0
    /// The payload's length, once the header is in.
    private var length: Int?
    private var frameStart = 0
    private var offset = 0
    public private(set) var records: [Record] = []
    /// Whether the last record read may still take a `D` frame.
    private var dataOpen = false
    private var envelope: [UInt8]?

    public init(limits: Limits = Limits()) { self.limits = limits }

    /// Takes the next bytes of the body.
    public mutating func take(_ bytes: UnsafeRawBufferPointer) throws {
        guard try takeUntilEnvelope(bytes) == bytes.count else {
            throw RecordFramesError(offset: offset, message: "bytes after the envelope, which ends the body")
        }
    }

    /// Takes bytes up to the end of the envelope frame when they hold it; returns how many it took. For
    /// bodies that follow each other (`RecordPageStream`): once `hasEnvelope`, `finish` and go on.
    public mutating func takeUntilEnvelope(_ bytes: UnsafeRawBufferPointer) throws -> Int {
        var index = 0
        while index < bytes.count {
            guard envelope == nil else { return index }
            guard let length else {
                let step = min(RecordFrames.headerBytes - pending.count, bytes.count - index)
                pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[index..<(index + step)]))
                index += step
                offset += step
                if pending.count == RecordFrames.headerBytes { try beginFrame() }
                continue
            }
            let step = min(length - pending.count, bytes.count - index)
            pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[index..<(index + step)]))
            index += step
            offset += step
            if pending.count == length { try endFrame() }
        }
        return index
    }

    /// Whether the envelope frame, which ends a body, is in.
    public var hasEnvelope: Bool { envelope != nil }

    /// Whether no byte of a body has come yet.
    public var isUntouched: Bool { offset == 0 }

    /// A frame's header is in: its kind and length checked against the limits before its payload comes.
    private mutating func beginFrame() throws {
        kind = pending[0]
        let count = Int(pending[1]) << 24 | Int(pending[2]) << 16 | Int(pending[3]) << 8 | Int(pending[4])
        frameStart = offset - RecordFrames.headerBytes
        let most: Int
        switch kind {
        case RecordFrames.record:
            guard records.count < limits.maxRecords else { throw BatchLimitError(message: "a batch holds at most \(limits.maxRecords) records") }
            most = limits.maxRecordBytes
        case RecordFrames.data:
            guard dataOpen else { throw fail("a content frame that does not follow a record (or follows another)") }
            most = limits.maxDataBytes
        case RecordFrames.envelope: most = limits.maxEnvelopeBytes
        default: throw fail("unknown frame kind \(kind) (R, D and E are the kinds)")
        }
        guard count <= most else {
            throw BatchLimitError(message: "record \(records.count + (kind == RecordFrames.record ? 1 : 0)) of the batch: a frame of \(count) bytes, over the \(most) bytes it may carry")
        }
        pending = []
        // What a header declares is not there yet: memory grows with the bytes that come.
        pending.reserveCapacity(min(count, 1 << 20))
        length = count
        if count == 0 { try endFrame() }
    }

    private mutating func endFrame() throws {
        let payload = pending
        pending = []
        length = nil
        switch kind {
        case RecordFrames.record:
            var reader = JSONReader(payload)
            do {
                records.append(try Record.read(from: &reader))
                try reader.finish()
            } catch let error as JSONError {
                throw JSONError(offset: frameStart + RecordFrames.headerBytes + error.offset, message: error.message)
            }
            guard records[records.count - 1].data == nil else { throw fail("a record with data in its JSON (content goes in a D frame)") }
            dataOpen = true
        case RecordFrames.data:
            records[records.count - 1].data = payload
            dataOpen = false
        default:
            envelope = payload
            dataOpen = false
        }
    }

    private func fail(_ message: String) -> RecordFramesError { RecordFramesError(offset: frameStart, message: message) }

    /// The body is all in: its records and its envelope's JSON, or why it is not whole.
    public mutating func finish() throws -> (records: [Record], envelope: [UInt8]) {
        guard let envelope, length == nil, pending.isEmpty else {
            throw RecordFramesError(offset: offset, message: "the body ends without its envelope frame (cut off?)")
        }
        let all = records
        records = []
        return (all, envelope)
    }

    /// A whole body at once.
    public static func parse(_ bytes: [UInt8]) throws -> (records: [Record], envelope: [UInt8]) {
        var reader = RecordFramesReader()
        try bytes.withUnsafeBytes { try reader.take($0) }
        return try reader.finish()
    }
}
