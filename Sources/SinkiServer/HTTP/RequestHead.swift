import SinkiRecord

/// What is checked of a request before anything else, authentication included: a length that two
/// parsers could read two ways (request smuggling, RFC 9112 §6.1 and §6.3), a transfer coding the
/// server does not implement, and a target that would route one way and decode another (an encoded
/// slash or NUL in the path, a dot segment). Each is answered 400 or 501 and its connection closed.
enum RequestHead {
    /// The problem with the method and the target as they arrived (before any decoding), if any.
    static func targetProblem(method: String, rawTarget: String) -> Problem? {
        guard !method.isEmpty, method.utf8.allSatisfy({ $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }) else {
            return Problem(.badTarget, detail: "the method is not a word of capital letters")
        }
        let bytes = Array(rawTarget.utf8)
        guard bytes.first == UInt8(ascii: "/") else { return Problem(.badTarget, detail: "the target does not start with /") }
        if bytes.contains(where: { $0 <= 0x20 || $0 == 0x7F }) { return Problem(.badTarget, detail: "the target holds a control byte") }
        // Query arguments are decoded with their lengths, NULs kept: a record path holding one is refused
        // by the path rules (`bad-path`), like any other bad path.
        let path = rawTarget.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        if path.range(of: "%00") != nil { return Problem(.badTarget, detail: "the path holds an encoded NUL") }
        let lower = path.lowercased()
        for encoded in ["%2f", "%5c", "%2e"] where lower.contains(encoded) {
            return Problem(.badTarget, detail: "the path holds an encoded \(encoded == "%2f" ? "slash" : encoded == "%5c" ? "backslash" : "dot")")
        }
        if path.contains("\\") { return Problem(.badTarget, detail: "the path holds a backslash") }
        for segment in path.split(separator: "/", omittingEmptySubsequences: false).dropFirst() where segment == "." || segment == ".." {
            return Problem(.badTarget, detail: "the path holds a dot segment")
        }
        return nil
    }

    /// The problem with the body's framing given every `Content-Length` and `Transfer-Encoding` field
    /// value the request carries, if any.
    static func framingProblem(contentLengths: [String], transferEncodings: [String]) -> Problem? {
        if !transferEncodings.isEmpty {
            if !contentLengths.isEmpty {
                return Problem(.badFraming, detail: "Content-Length and Transfer-Encoding together")
            }
            let codings = transferEncodings.flatMap { $0.split(separator: ",") }.map { trimmed($0).lowercased() }
            guard codings == ["chunked"] else {
                return Problem(.notImplemented, detail: "Transfer-Encoding \(codings.joined(separator: ", ")): only chunked is taken")
            }
            return nil
        }
        let lengths = contentLengths.flatMap { $0.split(separator: ",", omittingEmptySubsequences: false) }.map { trimmed($0) }
        guard let first = lengths.first else { return nil }
        guard lengths.allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }) else {
            return Problem(.badFraming, detail: "Content-Length is not a number")
        }
        guard lengths.allSatisfy({ $0 == first }) else {
            return Problem(.badFraming, detail: "Content-Length given as \(lengths.joined(separator: " and "))")
        }
        return nil
    }

    private static func trimmed(_ text: Substring) -> String {
        String(text.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}
