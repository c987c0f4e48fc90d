import Foundation
import SinkiConfig
import SinkiRecord
import SinkiServer
import SinkiSupport

/// `sinkid serve token …` and `sinkid serve user …`: the server's accounts, on its data folder, beside a
/// running server or without one (docs/tokens.md). A revocation made here is in force for the running
/// server from its commit on.
enum ServeAccounts {
    /// The arguments of `serve NOUN ACTION OPERANDS...`; nil when `--help` was asked for (and printed).
    private static func command(_ words: [String], noun: String) throws(UsageError)
        -> (arguments: Arguments, action: String, operands: [String])? {
        guard let arguments = try Arguments.orHelp(words, CommandCatalog.serve) else { return nil }
        let actions = CommandCatalog.serve.subcommands.first { $0.noun == noun }?.actions ?? []
        guard let action = arguments.positional.first else {
            throw UsageError("serve \(noun) needs \(CommandCatalog.serve.actionList(noun)) (see sinkid help serve)")
        }
        guard actions.contains(action) else {
            var message = "serve \(noun) takes \(CommandCatalog.serve.actionList(noun)), not \(action)"
            if let guess = nearest(action, in: actions) { message += "; did you mean \(guess)?" }
            throw UsageError(message)
        }
        return (arguments, action, Array(arguments.positional.dropFirst()))
    }

    static func token(_ words: [String]) throws(UsageError) -> ExitCode {
        guard let (arguments, action, operands) = try command(words, noun: "token") else { return .success }
        let store = try open(arguments)
        defer { store.close() }
        switch action {
        case "add":
            guard operands.count == 1, let user = operands.first else { throw UsageError("serve token add needs one USER") }
            guard let device = arguments.value("device") else { throw UsageError("serve token add needs --device NAME") }
            try checkName(user, what: "user")
            try checkName(device, what: "device")
            let scope = try scope(arguments)
            let made = try perform { try issue(store, user: user, device: device, scope: scope) }
            if let output = arguments.value("output") {
                try SecretFile.write(made.secret.text + "\n", to: output)
                Output.line("token \(made.token.id) for \(user) on \(device) (\(scope.summary)) written to \(output) (mode 0600)")
            } else if arguments.has("json") {
                Output.json(.object([("id", .string(made.token.id)), ("user", .string(user)), ("device", .string(device)),
                                     ("scope", .string(scope.summary)), ("token", .string(made.secret.text))]))
            } else {
                Output.line("token \(made.token.id) for \(user) on \(device) (\(scope.summary)); it is shown only now:")
                Output.line(made.secret.text)
            }
            return .success
        case "list":
            guard operands.count <= 1 else { throw UsageError("serve token list takes at most one USER") }
            let tokens = try perform { try store.tokens(user: operands.first) }
            if arguments.has("json") {
                Output.json(.object([("tokens", .array(tokens.map(json)))]))
            } else if tokens.isEmpty {
                Output.line(operands.first.map { "no tokens for \($0)" } ?? "no tokens")
            } else {
                for token in tokens { Output.line(describe(token)) }
            }
            return .success
        case "revoke":
            guard operands.count == 1, let id = operands.first else { throw UsageError("serve token revoke needs one token ID (see serve token list)") }
            let revoked = try perform { try store.revoke(id: id, at: Clock.now()) }
            if revoked.isEmpty {
                guard (try? store.token(id: id)) != nil else { throw UsageError("no token \(id) on this server (see serve token list)", code: .dataError) }
                Output.line("token \(id) was revoked already")
            } else {
                Output.line("revoked \(revoked.joined(separator: ", "))" + (revoked.count > 1 ? " (and every token minted from \(id))" : ""))
            }
            return .success
        default:
            throw UsageError("bug: serve token \(action) is in the command table but not here", code: .software)
        }
    }

    static func user(_ words: [String]) throws(UsageError) -> ExitCode {
        guard let (arguments, action, operands) = try command(words, noun: "user") else { return .success }
        let store = try open(arguments)
        defer { store.close() }
        switch action {
        case "list":
            let users = try perform { try store.users() }
            let usage = try perform { try users.map { try store.usage(user: $0.name) } }
            if arguments.has("json") {
                Output.json(.object([("users", .array(zip(users, usage).map { user, usage in
                    .object([("name", .string(user.name)), ("createdAt", .string(Self.time(user.createdAt))),
                             ("liveBytes", .int(usage.liveBytes)), ("historyBytes", .int(usage.historyBytes)),
                             ("quotaBytes", user.quota.map { .int($0) } ?? .null)])
                }))]))
            } else {
                for (user, usage) in zip(users, usage) {
                    Output.line("\(user.name)  since \(time(user.createdAt))  live \(HumanUnits.bytes(usage.liveBytes))  history "
                                + "\(HumanUnits.bytes(usage.historyBytes))  quota " + (user.quota.map { HumanUnits.bytes($0) } ?? "none"))
                }
                if users.isEmpty { Output.line("no users") }
            }
            return .success
        case "quota":
            guard operands.count == 2 else { throw UsageError("serve user quota needs a USER and a SIZE (e.g. 10GiB, or none)") }
            let (name, text) = (operands[0], operands[1])
            var bytes: Int64?
            if text != "none" {
                guard let size = ConfigValues.size(text), size > 0 else { throw UsageError("serve user quota: \(text) is not a size such as 10GiB, or none") }
                bytes = size
            }
            try perform { try store.setQuota(user: name, bytes: bytes) }
            let usage = try perform { try store.usage(user: name) }
            Output.line("quota of \(name): " + (bytes.map { HumanUnits.bytes($0) } ?? "none (the server's --quota, if any)")
                        + "; uses \(HumanUnits.bytes(usage.liveBytes)) live and \(HumanUnits.bytes(usage.historyBytes)) history")
            return .success
        case "remove":
            guard operands.count == 1, let name = operands.first else { throw UsageError("serve user remove needs one USER") }
            guard arguments.has("yes") else {
                throw UsageError("serve user remove deletes \(name)'s records, tokens and uploads for good; add --yes to do it")
            }
            try perform { try store.removeUser(name) }
            let blobs = try perform { try UploadStore.removeAll(user: name, directory: dataDirectory(arguments) + "/uploads") }
            let chunks = try perform { try ChunkStore.removeAll(user: name, directory: dataDirectory(arguments) + "/chunks") }
            Output.line("removed user \(name): tokens revoked, records, \(blobs) upload(s)\(chunks ? " and their chunks" : "") deleted")
            return .success
        default:
            throw UsageError("bug: serve user \(action) is in the command table but not here", code: .software)
        }
    }

    /// A new token for `user` on `device` (the user made if new), its secret known only to the caller.
    static func issue(_ store: any ServerStore, user: String, device: String, scope: TokenScope,
                      parent: DeviceToken? = nil) throws -> (token: DeviceToken, secret: TokenSecret) {
        let now = Clock.now()
        try store.addUser(user, at: now)
        let id = TokenSecret.makeID()
        let secret = TokenSecret.make(id: id)
        let token = DeviceToken(id: id, user: user, device: device, scope: scope, parentID: parent?.id, chainID: id,
                                secretHash: secret.hash, createdAt: now)
        try store.addToken(token)
        return (token, secret)
    }

    /// The scope the flags ask for.
    static func scope(_ arguments: Arguments) throws(UsageError) -> TokenScope {
        var scope = TokenScope(readOnly: arguments.has("read-only"))
        if let prefix = arguments.value("prefix") {
            var trimmed = Substring(prefix)
            while trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
            guard !trimmed.isEmpty, (try? RecordPath(validating: String(trimmed) + "/x")) != nil else {
                throw UsageError("--prefix \(prefix) is not a record path prefix such as SaveGames/ or SaveGames/slot1/")
            }
            scope.prefix = String(trimmed)
        }
        if let text = arguments.value("max-upload") {
            guard let size = ConfigValues.size(text), size > 0 else { throw UsageError("--max-upload \(text) is not a size such as 100MB") }
            scope.maxUploadBytes = size
        }
        if let text = arguments.value("max-uploads") {
            guard let count = Int64(text), count >= 0 else { throw UsageError("--max-uploads \(text) is not a count") }
            scope.maxUploads = count
        }
        if let text = arguments.value("expires") {
            guard let duration = ConfigValues.duration(text), duration > .zero else { throw UsageError("--expires \(text) is not a duration such as 7d") }
            let (seconds, attoseconds) = duration.components
            scope.expiresAt = Clock.now() + seconds * 1_000_000_000 + attoseconds / 1_000_000_000
        }
        return scope
    }

    static func dataDirectory(_ arguments: Arguments) throws(UsageError) -> String {
        guard let data = arguments.value("data") else { throw UsageError("needs --data DIR, the server's data folder") }
        return RunCommand.absolute(data)
    }

    /// The server's store: the PostgreSQL database of `--database`, else SQLite in `--data`.
    private static func open(_ arguments: Arguments) throws(UsageError) -> any ServerStore {
        if let url = arguments.value("database") {
            do { return try PostgresStore(url: url, connections: 1) } catch {
                throw UsageError("cannot open the server's database \(redactedPostgresURL(url)): \(error)", code: .unavailable)
            }
        }
        let directory = try dataDirectory(arguments)
        guard FileManager.default.fileExists(atPath: directory + "/records.db") || FileManager.default.fileExists(atPath: directory) else {
            throw UsageError("\(directory) is not a server's data folder (no records.db)", code: .config)
        }
        do { return try SQLiteRecordStore(path: directory + "/records.db", readers: 1) } catch {
            throw UsageError("cannot open the server's database in \(directory): \(error)", code: .unavailable)
        }
    }

    private static func perform<T>(_ body: () throws -> T) throws(UsageError) -> T {
        do { return try body() } catch let error as AccountError {
            throw UsageError(error.message, code: .dataError)
        } catch {
            throw UsageError("\(error)", code: .unavailable)
        }
    }

    /// Users and devices are names in records and logs: printable, no `/`, at most 64 bytes.
    static func checkName(_ name: String, what: String) throws(UsageError) {
        guard !name.isEmpty, name.utf8.count <= 64, !name.contains("/"), !name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F || $0 == " " }) else {
            throw UsageError("bad \(what) name \(quoted(name)): 1 to 64 bytes, no spaces, slashes or control characters")
        }
    }

    static func describe(_ token: DeviceToken) -> String {
        var line = "\(token.id)  \(token.user)  \(token.device)  \(token.scope.summary)  created \(time(token.createdAt))"
        line += "  last used " + (token.lastUsedAt.map(time) ?? "never")
        if let expires = token.scope.expiresAt { line += "  expires \(time(expires))" }
        if let parent = token.parentID { line += "  minted from \(parent)" }
        if let revoked = token.revokedAt { line += "  REVOKED \(time(revoked))" }
        return line
    }

    static func json(_ token: DeviceToken) -> JSONValue {
        .object([("id", .string(token.id)), ("user", .string(token.user)), ("device", .string(token.device)),
                 ("scope", .string(token.scope.summary)), ("createdAt", .string(time(token.createdAt))),
                 ("lastUsedAt", token.lastUsedAt.map { .string(time($0)) } ?? .null),
                 ("expiresAt", token.scope.expiresAt.map { .string(time($0)) } ?? .null),
                 ("parent", token.parentID.map { .string($0) } ?? .null),
                 ("revokedAt", token.revokedAt.map { .string(time($0)) } ?? .null)])
    }

    static func time(_ nanoseconds: Int64) -> String {
        let formatter = ISO8601DateFormatter()
        return formatter.string(from: Date(timeIntervalSince1970: Double(nanoseconds) / 1e9))
    }
}
