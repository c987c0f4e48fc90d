/// Splits a byte stream into lines, refusing a line longer than `limit` (a peer that never sends a
/// newline must not grow the agent's memory).
struct LineBuffer {
    let limit: Int
    private var pending: [UInt8] = []

    init(limit: Int) { self.limit = limit }

    /// The lines completed by `bytes`, without their newlines (a `\r` before one is dropped too).
    mutating func append(_ bytes: [UInt8]) throws(ControlError) -> [[UInt8]] {
        pending.append(contentsOf: bytes)
        var lines: [[UInt8]] = []
        var start = 0
        while let newline = pending[start...].firstIndex(of: UInt8(ascii: "\n")) {
            var line = Array(pending[start..<newline])
            if line.last == UInt8(ascii: "\r") { line.removeLast() }
            if !line.isEmpty { lines.append(line) }
            start = newline + 1
        }
        pending.removeFirst(start)
        guard pending.count <= limit else { throw ControlError(.badRequest, "a request line is longer than \(limit) bytes") }
        return lines
    }
}
