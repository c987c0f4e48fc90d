import SinkiRecord

/// How a merged JSON document is written out. A merge re-writes the whole document, so it keeps the
/// look the two versions share: compact when both are on one line, else indented like them.
struct JSONLayout: Equatable {
    /// One level of indentation; nil writes everything on one line.
    var indent: [UInt8]?
    var trailingNewline: Bool

    static let twoSpaces = Array("  ".utf8)

    /// The layout a text was written with: one line or indented (by the first indented line's
    /// leading white space), and whether it ends with a newline.
    init(of text: [UInt8]) {
        trailingNewline = text.last == UInt8(ascii: "\n")
        var end = text.count
        while end > 0, [0x20, 0x0A, 0x0D, 0x09].contains(text[end - 1]) { end -= 1 }
        var start = 0
        while start < end, [0x20, 0x0A, 0x0D, 0x09].contains(text[start]) { start += 1 }
        let body = text[start..<end]
        guard let newline = body.firstIndex(of: UInt8(ascii: "\n")) else {
            indent = nil
            return
        }
        let next = body[(newline + 1)...]
        let white = next.prefix { $0 == 0x20 || $0 == 0x09 }
        indent = white.isEmpty ? JSONLayout.twoSpaces : Array(white)
    }

    init(indent: [UInt8]?, trailingNewline: Bool) {
        self.indent = indent
        self.trailingNewline = trailingNewline
    }

    /// The layout of a merge of `local` and `remote`: theirs when they agree, the indented one when
    /// only one is, the base's (or two spaces) when they indent differently. Symmetric in the sides.
    static func combining(_ local: JSONLayout, _ remote: JSONLayout, base: JSONLayout) -> JSONLayout {
        let indent: [UInt8]?
        switch (local.indent, remote.indent) {
        case let (l, r) where l == r: indent = l
        case let (l?, nil): indent = l
        case let (nil, r?): indent = r
        default: indent = base.indent ?? twoSpaces
        }
        return JSONLayout(indent: indent, trailingNewline: local.trailingNewline || remote.trailingNewline)
    }

    func render(_ node: JSONNode) -> [UInt8] {
        var out: [UInt8] = []
        write(node, depth: 0, into: &out)
        if trailingNewline { out.append(UInt8(ascii: "\n")) }
        return out
    }

    /// The one-line form, used to order values (the side whose value sorts first goes first).
    static func compact(_ node: JSONNode) -> [UInt8] {
        var out: [UInt8] = []
        JSONLayout(indent: nil, trailingNewline: false).write(node, depth: 0, into: &out)
        return out
    }

    private func newline(_ depth: Int, into out: inout [UInt8]) {
        guard let indent else { return }
        out.append(UInt8(ascii: "\n"))
        for _ in 0..<depth { out += indent }
    }

    private func write(_ node: JSONNode, depth: Int, into out: inout [UInt8]) {
        switch node {
        case .null: out += Array("null".utf8)
        case let .bool(value): out += Array((value ? "true" : "false").utf8)
        case let .number(text): out += Array(text.utf8)
        case let .string(text): Self.quote(text, into: &out)
        case let .array(elements):
            out.append(UInt8(ascii: "["))
            for (position, element) in elements.enumerated() {
                if position > 0 { out.append(UInt8(ascii: ",")) }
                newline(depth + 1, into: &out)
                write(element, depth: depth + 1, into: &out)
            }
            if !elements.isEmpty { newline(depth, into: &out) }
            out.append(UInt8(ascii: "]"))
        case let .object(members):
            out.append(UInt8(ascii: "{"))
            for (position, member) in members.enumerated() {
                if position > 0 { out.append(UInt8(ascii: ",")) }
                newline(depth + 1, into: &out)
                Self.quote(member.key, into: &out)
                out.append(UInt8(ascii: ":"))
                if indent != nil { out.append(UInt8(ascii: " ")) }
                write(member.value, depth: depth + 1, into: &out)
            }
            if !members.isEmpty { newline(depth, into: &out) }
            out.append(UInt8(ascii: "}"))
        }
    }

    private static func quote(_ text: String, into out: inout [UInt8]) {
        var writer = JSONWriter(capacity: text.utf8.count + 2)
        writer.string(text)
        out += writer.bytes
    }
}
