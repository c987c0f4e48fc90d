import SinkiRecord
import SinkiSupport

/// How the routes hold a request to its token's scope (docs/tokens.md). Routes check; these say how.
extension Request {
    /// A save, delete or upload by a read-only token answers `403 read-only-token`.
    func requireWritable() throws(Problem) {
        let scope = identity.scope
        guard scope.readOnly else { return }
        throw Problem(.readOnlyToken, detail: "token \(identity.tokenID ?? "-") is read-only (\(scope.summary)); \(method) \(path) writes",
                      field: "readOnly")
    }

    /// The token's prefix, nil when it has none.
    var scopePrefix: String? { identity.scope.prefix }
}

/// What a look-up (or feed) asked for, narrowed to what a token's prefix covers.
enum ScopedPrefix: Equatable {
    /// Ask the store for this prefix (nil: everything).
    case within(String?)
    /// The two do not meet: the answer is an empty page, as for a prefix that holds nothing.
    case disjoint

    /// `asked` within `scope`: the narrower of the two when one holds the other.
    static func narrow(asked: String?, scope: String?) -> ScopedPrefix {
        guard let scope else { return .within(asked) }
        guard let asked else { return .within(scope) }
        if PathText.isWithin(asked, scope) { return .within(asked) }
        if PathText.isWithin(scope, asked) { return .within(scope) }
        return .disjoint
    }
}

extension TokenScope {
    /// The per-item refusal of a modify item outside the prefix: nothing is saved for it.
    func refusal(forPath path: String, movedFrom: String?) -> Problem? {
        guard let prefix else { return nil }
        if !covers(path) {
            return Problem(.beyondScope, detail: "\(quoted(path)) is outside the token's prefix \(prefix)/", field: "path")
        }
        if let movedFrom, !covers(movedFrom) {
            return Problem(.beyondScope, detail: "the move's source \(quoted(movedFrom)) is outside the token's prefix \(prefix)/",
                           field: "movedFrom")
        }
        return nil
    }
}
