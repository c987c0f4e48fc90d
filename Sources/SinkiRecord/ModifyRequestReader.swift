/// A modify batch over one of the reader's limits (the server answers `413`).
public struct BatchLimitError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}

/// Reads a modify batch (`{"records":[…]}`) as its bytes arrive, a record at a time: each record of the
/// `records` array is read once its closing brace is in, and its bytes dropped. The body is never held
/// whole beside what is read from it, so a 250 MB batch costs what its records hold (their content
/// decoded), not that plus the text (issue 24 item 4: a body cost about twice its size while parsed).
///
/// What lies outside the records (the envelope) is kept with each record replaced by `{}` and read by
/// `JSONReader` at the end, so the whole text is held to the same grammar as when read in one piece:
/// every record by `Record.read`, the rest by the envelope's reading (substituting a valid value for a
/// valid value keeps a document valid). The scan itself only follows strings and nesting.
public struct ModifyRequestReader {
    /// Bounds on what is held while reading (the server's; `ModifyRequest.parse` has none).
    public struct Limits: Sendable {
        public var maxRecords: Int
        /// The most bytes of JSON one record may take.
        public var maxRecordBytes: Int
        /// The most bytes of text outside the records.
        public var maxEnvelopeBytes: Int

        public init(maxRecords: Int = .max, maxRecordBytes: Int = .max, maxEnvelopeBytes: Int = .max) {
            self.maxRecords = maxRecords
            self.maxRecordBytes = maxRecordBytes
            self.maxEnvelopeBytes = maxEnvelopeBytes
        }
    }

    private let limits: Limits
    /// Bytes taken so far: the offset of the next one.
    private var offset = 0
    private var depth = 0
    private var inString = false
    private var escaped = false
    /// What the top-level value opened with, once it has.
    private var top: UInt8?
    /// At depth 1 of the top-level object: the next string is a member's name.
    private var expectKey = false
    /// The raw text of the member name being read, quotes included (nil when none is, or it is too long
    /// to be `records`).
    private var keyText: [UInt8]?
    /// The name of the member whose value comes next.
    private var key: String?
    /// Inside the top-level `records` array: each value in it is a record, read on its own.
    private var inRecords = false
    /// The record being received, from its `{`; nil between records.
    private var element: [UInt8]?
    private var elementStart = 0
    private var envelope: [UInt8] = []
    /// From which envelope offset on the text had how many bytes more than the envelope (records
    /// replaced, whitespace runs cut): an envelope offset maps back to the body's.
    private var shifts: [(at: Int, delta: Int)] = []
    private var records: [Record] = []

    public init(limits: Limits = Limits()) { self.limits = limits }

    /// Takes the next bytes of the body.
    public mutating func take(_ bytes: UnsafeRawBufferPointer) throws {
        var index = 0
        let count = bytes.count
        while index < count {
            if element != nil {
                index = try takeRecordBytes(bytes, from: index)
                continue
            }
            let byte = bytes[index]
            index += 1
            try takeEnvelope(byte)
        }
    }

    /// Bytes of the record being received, from `start`: copied up to its end (or the chunk's) in one
    /// piece. Returns where the envelope's bytes resume.
    private mutating func takeRecordBytes(_ bytes: UnsafeRawBufferPointer, from start: Int) throws -> Int {
        var index = start
        var ended = false
        scan: while index < bytes.count {
            let byte = bytes[index]
            index += 1
            // Counted as it is taken; `offset` names the byte at hand in the errors below.
            defer { offset += 1 }
            if inString {
                _ = closesString(byte)
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "{"), UInt8(ascii: "["): try open()
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth -= 1
                if depth == 2 {
                    ended = true
                    break scan
                }
            default: break
            }
        }
        let piece = UnsafeRawBufferPointer(rebasing: bytes[start..<index])
        guard element!.count + piece.count <= limits.maxRecordBytes else {
            throw BatchLimitError(message: "record \(records.count + 1) of the batch is over \(limits.maxRecordBytes) bytes of JSON, more than any record can be")
        }
        element!.append(contentsOf: piece)
        if ended { try readRecord() }
        return index
    }

    /// Takes `byte` inside a string, following its escapes; true when it ends the string.
    private mutating func closesString(_ byte: UInt8) -> Bool {
        if escaped {
            escaped = false
        } else if byte == UInt8(ascii: "\\") {
            escaped = true
        } else if byte == UInt8(ascii: "\"") {
            inString = false
            return true
        }
        return false
    }

    private mutating func open() throws {
        depth += 1
        guard depth <= JSONReader.maxDepth else { throw JSONError(offset: offset, message: "nested deeper than \(JSONReader.maxDepth) levels") }
    }

    /// One byte outside the records.
    private mutating func takeEnvelope(_ byte: UInt8) throws {
        defer { offset += 1 }
        if inString {
            keyText?.append(byte)
            if keyText?.count ?? 0 > 64 { keyText = nil }
            if closesString(byte) {
                if let text = keyText {
                    var reader = JSONReader(text)
                    key = try? reader.readString()
                    keyText = nil
                }
            }
            try keep(byte)
            return
        }
        let isSpace = Self.isSpace(byte)
        if inRecords && depth == 2 && !isSpace && byte != UInt8(ascii: ",") && byte != UInt8(ascii: "]") {
            guard byte == UInt8(ascii: "{") else { throw JSONError(offset: offset, message: "expected '{': each of records is a record") }
            try open()
            // The record's text leaves the envelope; an empty object stands in for it (two of them
            // without a comma between are as wrong as two records).
            element = [byte]
            elementStart = offset
            try keep(UInt8(ascii: "{"))
            try keep(UInt8(ascii: "}"))
            return
        }
        // A run of whitespace is kept as its first byte: it still parts two tokens, and padding costs
        // nothing to hold.
        if isSpace && envelope.last.map(Self.isSpace) == true {
            shift(by: 1)
            return
        }
        switch byte {
        case UInt8(ascii: "\""):
            inString = true
            if depth == 1 && top == UInt8(ascii: "{") && expectKey {
                expectKey = false
                key = nil
                keyText = [byte]
            }
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            if depth == 0 && top == nil { top = byte }
            try open()
            if depth == 1 { expectKey = byte == UInt8(ascii: "{") }
            if depth == 2 { inRecords = byte == UInt8(ascii: "[") && key == "records" }
        case UInt8(ascii: "}"), UInt8(ascii: "]"):
            depth -= 1
            guard depth >= 0 else { throw JSONError(offset: offset, message: "unexpected '\(Character(Unicode.Scalar(byte)))'") }
            if depth == 1 { inRecords = false }
        case UInt8(ascii: ","):
            if depth == 1 {
                expectKey = true
                key = nil
            }
        default:
            break
        }
        try keep(byte)
    }

    private static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 }

    /// `count` more bytes of the text than of the envelope lie before the envelope's end.
    private mutating func shift(by count: Int) {
        let delta = (shifts.last?.delta ?? 0) + count
        if shifts.last?.at == envelope.count {
            shifts[shifts.count - 1].delta = delta
        } else {
            shifts.append((at: envelope.count, delta: delta))
        }
    }

    private mutating func keep(_ byte: UInt8) throws {
        guard envelope.count < limits.maxEnvelopeBytes else {
            throw BatchLimitError(message: "the batch holds more than \(limits.maxEnvelopeBytes) bytes of JSON outside its records")
        }
        envelope.append(byte)
    }

    /// The record just received, read and its text dropped.
    private mutating func readRecord() throws {
        guard let text = element else { return }
        element = nil
        shift(by: text.count - 2)
        guard records.count < limits.maxRecords else {
            throw BatchLimitError(message: "a batch holds at most \(limits.maxRecords) records")
        }
        var reader = JSONReader(text)
        do {
            records.append(try Record.read(from: &reader))
            try reader.finish()
        } catch let error as JSONError {
            throw JSONError(offset: elementStart + error.offset, message: error.message)
        }
    }

    /// The body is all in: the batch, or why it is not one.
    public mutating func finish() throws -> ModifyRequest {
        guard element == nil, !inString, depth == 0 else { throw JSONError(offset: offset, message: "the text ends inside a value") }
        var reader = JSONReader(envelope)
        var next = 0
        var batch: [Record]?
        do {
            try reader.readObject { reader, key in
                guard key == "records" else { return try reader.skipValue() }
                var list: [Record] = []
                try reader.readArray { reader in
                    // Only the records' stand-ins are in this array (anything else was refused as it came).
                    try reader.readObject { _, _ in throw JSONError(offset: 0, message: "bug: a record's stand-in is not empty") }
                    guard next < records.count else { throw JSONError(offset: 0, message: "bug: more stand-ins than records") }
                    list.append(records[next])
                    next += 1
                }
                batch = list
            }
            try reader.finish()
        } catch let error as JSONError {
            let delta = shifts.last(where: { $0.at <= error.offset })?.delta ?? 0
            throw JSONError(offset: error.offset + delta, message: error.message)
        }
        records = []
        guard let batch else { throw RecordFieldError(field: "records", message: "missing") }
        return ModifyRequest(records: batch)
    }
}
