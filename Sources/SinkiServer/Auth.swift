import Glibc
import SinkiRecord
import SinkiSupport
import Synchronization

/// Maps `Authorization: Bearer TOKEN` to an identity, from the accounts in the store (docs/tokens.md).
/// Without accounts (`--insecure-no-auth`, loopback only) every request is `ServerIdentity.anonymous`.
///
/// Every request reads the token from the store (one indexed read), so a revocation made by another
/// process is in force from its commit on; only the "last used" time is written, at most once a minute.
final class Authenticator: Sendable {
    let accounts: (any AccountStore)?
    private let lastMarked = Mutex<[String: Int64]>([:])

    init(accounts: (any AccountStore)?) { self.accounts = accounts }

    /// The one detail every refused token gets, missing, garbled, unknown, revoked or expired alike: the
    /// answer tells a prober nothing about which.
    static let refusal = "send Authorization: Bearer TOKEN with a live token of this server"

    /// The identity of a request, or nil for no token, a token this server does not know, a revoked
    /// one and an expired one alike. Throws when the store cannot be asked: that is no answer about the
    /// token, and must not read as one (an agent told 401 takes its token for revoked and stops sending).
    func identify(authorization: String?, now: Int64 = Clock.now()) throws(TokenLookupFailed) -> ServerIdentity? {
        guard let accounts else { return .anonymous }
        guard let secret = Self.bearer(authorization) else { return nil }
        let found: DeviceToken?
        do { found = try accounts.token(id: secret.id) } catch { throw TokenLookupFailed(cause: "\(error)") }
        guard let token = found, secret.matches(token.secretHash), token.isLive(at: now) else { return nil }
        noteUse(token.id, now: now)
        return ServerIdentity(user: token.user, device: token.device, tokenID: token.id, chainID: token.chainID, scope: token.scope)
    }

    /// The token of `Authorization: Bearer TOKEN`.
    static func bearer(_ authorization: String?) -> TokenSecret? {
        guard let authorization else { return nil }
        let parts = authorization.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let text = String(parts[1].drop(while: { $0 == " " }))
        return text.isEmpty ? nil : TokenSecret(text: text)
    }

    private func noteUse(_ id: String, now: Int64) {
        let due = lastMarked.withLock { marks -> Bool in
            if let last = marks[id], now - last < 60_000_000_000 { return false }
            marks[id] = now
            return true
        }
        // Last use is a convenience for `token list`; a failed write of it costs nothing else.
        if due { try? accounts?.markUsed(id: id, at: now) }
    }
}

/// The accounts store failed while a token was looked up (its database unreadable, busy past its
/// timeout, or gone): the request is answered 503 with `Retry-After`, not 401.
struct TokenLookupFailed: Error, CustomStringConvertible {
    var cause: String
    var description: String { "cannot look up a token: \(cause)" }
}

/// A tokens file that could not be read or has a bad line: `FILE:LINE: what is wrong`.
public struct TokenFileError: Error, Sendable, Equatable, CustomStringConvertible {
    public var file: String
    /// 0 when the file as a whole is the problem (it cannot be read).
    public var line: Int
    public var message: String

    public var description: String { line > 0 ? "\(file):\(line): \(message)" : "\(file): \(message)" }
}

/// The server's tokens file (`sinkid serve --tokens FILE`): one `TOKEN USER DEVICE` per line, separated
/// by spaces or tabs; blank lines and lines starting with `#` are skipped. A token may appear once.
public enum TokenFile {
    public static func load(path: String) throws(TokenFileError) -> [String: ServerIdentity] {
        let bytes: [UInt8]
        do {
            bytes = try FileDescriptor.open(path, flags: O_RDONLY).readAll()
        } catch {
            throw TokenFileError(file: path, line: 0, message: "cannot read: \(error.message)")
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw TokenFileError(file: path, line: 0, message: "is not valid UTF-8")
        }
        return try parse(text, file: path)
    }

    public static func parse(_ text: String, file: String) throws(TokenFileError) -> [String: ServerIdentity] {
        var tokens: [String: ServerIdentity] = [:]
        var firstLine: [String: Int] = [:]
        // "\r\n" is one Character in Swift, so lines split on either ending.
        let lines = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" })
        for (index, line) in lines.enumerated() {
            let number = index + 1
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" })
            if fields.isEmpty || fields[0].hasPrefix("#") { continue }
            guard fields.count == 3 else {
                throw TokenFileError(file: file, line: number, message: "expected TOKEN USER DEVICE, found \(fields.count) field\(fields.count == 1 ? "" : "s")")
            }
            for field in fields where field.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
                throw TokenFileError(file: file, line: number, message: "control character in \(quoted(String(field)))")
            }
            let token = String(fields[0])
            if let earlier = firstLine[token] {
                throw TokenFileError(file: file, line: number, message: "the token on this line is already given on line \(earlier)")
            }
            firstLine[token] = number
            tokens[token] = ServerIdentity(user: String(fields[1]), device: String(fields[2]))
        }
        return tokens
    }
}
