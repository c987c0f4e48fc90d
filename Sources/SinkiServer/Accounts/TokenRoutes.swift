import Glibc
import SinkiRecord
import SinkiSupport

/// The body of `POST /v1/tokens` (docs/tokens.md): every field optional; an absent one inherits.
struct MintRequest: Equatable {
    var device: String?
    var readOnly: Bool?
    var prefix: String?
    var maxUploadBytes: Int64?
    var maxUploads: Int64?
    var expiresIn: Int64?
    var expiresAt: String?
    var continues: String?

    static func parse(_ bytes: [UInt8]) throws -> MintRequest {
        var request = MintRequest()
        var reader = JSONReader(bytes)
        try reader.readObject { reader, key in
            // `null` reads as absent: a client may send every key.
            if reader.readNull() { return }
            switch key {
            case "device": request.device = try reader.readString()
            case "readOnly": request.readOnly = try reader.readBool()
            case "prefix": request.prefix = try reader.readString()
            case "maxUploadBytes": request.maxUploadBytes = try reader.readInt64()
            case "maxUploads": request.maxUploads = try reader.readInt64()
            case "expiresIn": request.expiresIn = try reader.readInt64()
            case "expiresAt": request.expiresAt = try reader.readString()
            case "continues": request.continues = try reader.readString()
            default: try reader.skipValue()
            }
        }
        try reader.finish()
        return request
    }
}

/// `POST /v1/tokens`: mints a token from the calling one, never wider; with `continues`, refreshes one
/// (docs/tokens.md). The secret is in the answer only.
struct MintTokenRoute: Route {
    let accounts: any AccountStore
    let limits: ServerLimits

    func begin(_ request: Request) throws -> BodyPolicy {
        guard request.identity.tokenID != nil else {
            throw Problem(.badRequest, detail: "this server runs without device tokens; it mints none")
        }
        guard MediaType.essence(of: request.header("Content-Type")) == "application/json" else {
            throw Problem(.unsupportedMediaType, detail: "\(request.path) takes application/json")
        }
        // A mint request is a few fields; nothing legitimate comes near this.
        return .buffer(limit: min(limits.maxBodyBytes, 64 * 1024))
    }

    func respond(to request: Request) throws -> Reply {
        let asked: MintRequest
        do { asked = try MintRequest.parse(request.body) } catch { throw Problem(.badJSON, detail: "\(error)") }
        let now = Clock.now()
        // The caller as the store has it now (its chain's upload count included); revoked meanwhile: 401.
        guard let callerID = request.identity.tokenID, let caller = try accounts.token(id: callerID), caller.isLive(at: now) else {
            throw Problem(.unauthorized, detail: Authenticator.refusal)
        }
        var continued: DeviceToken?
        if let id = asked.continues {
            // Only the caller itself or a token it minted; anything else is no token at all.
            guard let token = try accounts.token(id: id), token.user == caller.user, token.isLive(at: now),
                  token.id == caller.id || token.parentID == caller.id else {
                throw Problem(.notFound, detail: "no live token \(quoted(id)) of yours to continue")
            }
            continued = token
        }
        let base = continued ?? caller
        var scope = base.scope
        if let readOnly = asked.readOnly { scope.readOnly = readOnly }
        if let prefix = asked.prefix { scope.prefix = try Self.prefix(prefix) }
        if let bytes = asked.maxUploadBytes {
            guard bytes > 0 else { throw Problem(.badRequest, detail: "maxUploadBytes must be above 0", field: "maxUploadBytes") }
            scope.maxUploadBytes = bytes
        }
        if let count = asked.maxUploads {
            guard count >= 0 else { throw Problem(.badRequest, detail: "maxUploads must not be negative", field: "maxUploads") }
            scope.maxUploads = count
        }
        switch (asked.expiresIn, asked.expiresAt) {
        case (.some, .some):
            throw Problem(.badRequest, detail: "send expiresIn or expiresAt, not both", field: "expiresAt")
        case let (seconds?, nil):
            guard seconds > 0, seconds < Int64.max / 1_000_000_000 - now / 1_000_000_000 else {
                throw Problem(.badRequest, detail: "expiresIn must be a number of seconds above 0", field: "expiresIn")
            }
            scope.expiresAt = now + seconds * 1_000_000_000
        case let (nil, text?):
            guard let time = RFC3339.parse(text) else {
                throw Problem(.badRequest, detail: "expiresAt must be an RFC 3339 time such as 2030-01-01T00:00:00Z, not \(quoted(text))", field: "expiresAt")
            }
            guard time > now else { throw Problem(.badRequest, detail: "expiresAt \(text) has passed", field: "expiresAt") }
            scope.expiresAt = time
        case (nil, nil):
            break
        }
        if let wider = scope.widerField(than: caller.scope) {
            throw Self.wider(wider, caller: caller)
        }
        if let continued {
            // A refresh keeps the chain's upload count: its limits may not grow past the continued
            // token's (its lifetime may, up to the caller's).
            var limits = continued.scope
            limits.expiresAt = nil
            if let wider = scope.widerField(than: limits) { throw Self.wider(wider, caller: continued) }
        }
        let device = asked.device ?? base.device
        guard !device.isEmpty, device.utf8.count <= 255, !device.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F || $0 == " " }) else {
            throw Problem(.badRequest, detail: "device must be 1–255 characters without spaces or control characters", field: "device")
        }
        let id = TokenSecret.makeID()
        let secret = TokenSecret.make(id: id)
        var token = DeviceToken(id: id, user: caller.user, device: device, scope: scope, parentID: caller.id, chainID: id,
                                secretHash: secret.hash, createdAt: now)
        if let continued {
            token.parentID = continued.parentID
            token.chainID = continued.chainID
            do {
                try accounts.refresh(token, replacing: continued.id, at: now)
            } catch let error as AccountError where error.kind == .unknownToken {
                throw Problem(.notFound, detail: "no live token \(quoted(continued.id)) of yours to continue")
            }
        } else {
            // Minting must not make a user's tokens (and what each may hold open) without end.
            let live = try accounts.tokens(user: caller.user).count { $0.isLive(at: now) }
            guard live < limits.maxLiveTokensPerUser else {
                throw Problem(.tooManyTokens, detail: "\(caller.user) holds \(live) live tokens, the most this server allows; revoke some first")
            }
            // A child's uploads come out of its parent's allowance: the whole allowance it is given is
            // taken from the parent's chain now, so minting never multiplies uploads.
            if let parentLimit = caller.scope.maxUploads {
                let remaining = max(0, parentLimit - caller.uploadsUsed)
                let given = asked.maxUploads ?? remaining
                token.scope.maxUploads = given
                guard try accounts.countUploads(chainID: caller.chainID, count: given, limit: parentLimit) else {
                    throw Problem(.beyondScope, detail: "maxUploads \(given) is more than the \(remaining) uploads token \(caller.id) has left",
                                  field: "maxUploads")
                }
            }
            try accounts.addToken(token)
        }
        return .response(.json(Self.answer(token, secret: secret), status: 201))
    }

    static func wider(_ field: String, caller: DeviceToken) -> Problem {
        Problem(.beyondScope, detail: "the requested \(field) is wider than token \(caller.id) allows (\(caller.scope.summary)); a minted token is never wider",
                field: field)
    }

    /// A record path prefix as a scope keeps it: without trailing slashes, following the path rules.
    static func prefix(_ text: String) throws(Problem) -> String {
        var trimmed = Substring(text)
        while trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        guard !trimmed.isEmpty, (try? RecordPath(validating: String(trimmed) + "/x")) != nil else {
            throw Problem(.badPath, detail: "prefix \(quoted(text)) is not a record path prefix such as SaveGames/ or SaveGames/slot1/", field: "prefix")
        }
        return String(trimmed)
    }

    static func answer(_ token: DeviceToken, secret: TokenSecret) -> [UInt8] {
        var writer = JSONWriter()
        writer.beginObject()
        writer.field("id", token.id)
        writer.field("token", secret.text)
        writer.field("user", token.user)
        writer.field("device", token.device)
        writer.field("readOnly", token.scope.readOnly)
        writer.key("prefix")
        if let prefix = token.scope.prefix { writer.string(prefix) } else { writer.null() }
        writer.key("maxUploadBytes")
        if let bytes = token.scope.maxUploadBytes { writer.int(bytes) } else { writer.null() }
        writer.key("maxUploads")
        if let count = token.scope.maxUploads { writer.int(count) } else { writer.null() }
        writer.key("expiresAt")
        if let time = token.scope.expiresAt { writer.string(Clock.iso8601(time)) } else { writer.null() }
        writer.field("chainID", token.chainID)
        writer.key("parentID")
        if let parent = token.parentID { writer.string(parent) } else { writer.null() }
        writer.endObject()
        return writer.bytes
    }
}

/// `DELETE /v1/tokens/ID`: revokes the caller itself or a token minted from it (at any depth), and
/// with it everything minted from that one. Any other id answers like an unknown one.
struct RevokeTokenRoute: Route {
    let accounts: any AccountStore
    /// Told of what was revoked, so that open long-polls and uploads are cut now rather than at the
    /// watcher's next look.
    let revoked: @Sendable ([String]) -> Void

    func respond(to request: Request) throws -> Reply {
        let id = request.pathParameter
        let notFound = Problem(.notFound, detail: "no token \(quoted(id))")
        guard let callerID = request.identity.tokenID, let target = try accounts.token(id: id), target.user == request.identity.user else {
            throw notFound
        }
        // Walk up from the target: the caller must be it or one of its ancestors.
        var current: DeviceToken? = target
        var steps = 0
        while let step = current, step.id != callerID {
            steps += 1
            guard let parent = step.parentID, steps < 10_000 else { throw notFound }
            current = try accounts.token(id: parent)
        }
        guard current != nil else { throw notFound }
        let ids = try accounts.revoke(id: id, at: Clock.now())
        if !ids.isEmpty { revoked(ids) }
        return .response(Response(status: 204, contentType: nil, body: .bytes([])))
    }
}

/// RFC 3339 times (`2030-01-01T00:00:00Z`, `2030-01-01T01:00:00.5+01:00`) as nanoseconds since the epoch.
enum RFC3339 {
    static func parse(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        var index = 0
        func number(_ width: Int) -> Int? {
            guard index + width <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[index..<index + width] {
                guard byte >= 48 && byte <= 57 else { return nil }
                value = value * 10 + Int(byte - 48)
            }
            index += width
            return value
        }
        func expect(_ characters: String) -> Bool {
            guard index < bytes.count, characters.utf8.contains(bytes[index]) else { return false }
            index += 1
            return true
        }
        guard let year = number(4), expect("-"), let month = number(2), expect("-"), let day = number(2), expect("Tt "),
              let hour = number(2), expect(":"), let minute = number(2), expect(":"), let second = number(2) else { return nil }
        guard (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61 else { return nil }
        var nanoseconds: Int64 = 0
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            var digits = 0
            while index < bytes.count, bytes[index] >= 48, bytes[index] <= 57 {
                if digits < 9 { nanoseconds = nanoseconds * 10 + Int64(bytes[index] - 48) }
                digits += 1
                index += 1
            }
            guard digits > 0 else { return nil }
            for _ in digits..<max(digits, 9) { nanoseconds *= 10 }
        }
        var offset = 0
        if expect("Zz") {
            offset = 0
        } else if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
            let sign = bytes[index] == UInt8(ascii: "-") ? -1 : 1
            index += 1
            guard let hours = number(2), expect(":"), let minutes = number(2), hours < 24, minutes < 60 else { return nil }
            offset = sign * (hours * 3600 + minutes * 60)
        } else {
            return nil
        }
        guard index == bytes.count else { return nil }
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month - 1)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(hour)
        parts.tm_min = Int32(minute)
        parts.tm_sec = Int32(second)
        let seconds = Int64(timegm(&parts)) - Int64(offset)
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return nil }
        return scaled + nanoseconds
    }
}
