import SinkiRecord

/// A change feed position: `<store id>.<changeTag>`. Opaque to clients.
struct ChangeToken: Equatable {
    var storeID: String
    var tag: Int64

    var text: String { "\(storeID).\(tag)" }

    /// Reads a `since` argument; nil or empty starts from the beginning. A token from another store, or
    /// one that is not a token at all, answers `400 bad-token`.
    static func parse(_ text: String?, storeID: String) throws(Problem) -> ChangeToken {
        guard let text, !text.isEmpty else { return ChangeToken(storeID: storeID, tag: 0) }
        guard let dot = text.lastIndex(of: "."), let tag = Int64(text[text.index(after: dot)...]), tag >= 0,
              !text[..<dot].isEmpty else {
            throw Problem(.badToken, detail: "\(quoted(text)) is not a change token; start over without one")
        }
        guard text[..<dot] == storeID else {
            throw Problem(.badToken, detail: "token \(quoted(text)) was issued by another store (this one is \(storeID)); start over without one")
        }
        return ChangeToken(storeID: storeID, tag: tag)
    }
}
