import SinkiRecord
import SinkiSupport

/// One builder per section: reads the keys, fills in defaults, checks what spans several keys.
extension SectionReader {
    func noArguments() throws(ConfigError) {
        guard section.arguments.isEmpty else {
            throw parser.fail(.badSection, "section [\(section.name)] takes no name", line: section.line)
        }
    }

    func server() throws(ConfigError) -> ServerSettings {
        try noArguments()
        var server = ServerSettings()
        if let url = try string("url") {
            do { server.url = try Checks.serverURL(url) } catch { throw badValue("url", "bad URL \(quoted(url)) for url: \(error.message)") }
        }
        server.tokenFile = try path("token-file")
        server.caFile = try path("ca-file")
        // Found now, with its line, rather than at the first request (which would retry forever).
        if let caFile = server.caFile, !ProcessEnvironment.isReadableFile(caFile) {
            throw badValue("ca-file", "cannot read \(quoted(caFile)) for ca-file (certificates in PEM): no such readable file")
        }
        if let listen = try string("listen") {
            do { server.listen = try Checks.listenAddress(listen) } catch {
                throw badValue("listen", "bad address \(quoted(listen)) for listen: \(error.message)")
            }
        }
        return server
    }

    func agent() throws(ConfigError) -> AgentSettings {
        try noArguments()
        var agent = AgentSettings()
        if let device = try string("device") {
            do { agent.device = try Checks.deviceName(device) } catch {
                throw badValue("device", "bad device name \(quoted(device)): \(error.message)")
            }
        }
        if let level = try string("log-level") {
            do { agent.logLevel = try Checks.logLevel(level) } catch { throw badValue("log-level", error.message) }
        }
        if let interval = try duration("verify-interval", allowZero: true) { agent.verifyInterval = interval }
        return agent
    }

    func root(after earlier: [RootSettings]) throws(ConfigError) -> RootSettings {
        guard section.arguments.count <= 1 else {
            throw parser.fail(.badSection, "\(section.title): a root has one name; quote a name with spaces, as in [root \"My Games\"]", line: section.line)
        }
        guard let path = try path("path") else {
            throw parser.fail(.missingKey, "\(section.title) has no path", line: section.line)
        }
        let name = section.arguments.first ?? Checks.baseName(path)
        do { try Checks.rootName(name) } catch {
            throw parser.fail(.badSection, "bad root name \(quoted(name)) in \(section.title): \(error.message)", line: section.line)
        }
        var ignore: [String] = []
        for pattern in try list("ignore") ?? [] {
            do { try Checks.ignorePattern(pattern) } catch {
                throw parser.fail(.badGlob, "bad ignore pattern \(quoted(pattern)) in \(section.title): \(error.message)", line: line(of: "ignore"))
            }
            ignore.append(pattern)
        }
        let root = RootSettings(name: name, path: path, ignore: ignore, line: section.line)
        for other in earlier {
            if let clash = Checks.clash(root, other) {
                throw parser.fail(.badRoot, "\(clash) (the other root is at line \(other.line ?? 0))", line: section.line)
            }
        }
        return root
    }

    func transfer() throws(ConfigError) -> TransferSettings {
        try noArguments()
        var transfer = TransferSettings()
        if let value = try size("inline-max") { transfer.inlineMax = value }
        if let value = try size("chunk-size") {
            guard value > 0 else { throw badValue("chunk-size", "chunk-size must be more than 0 bytes") }
            transfer.chunkSize = value
        }
        if let value = try integer("parallel", in: 1...256) { transfer.parallel = value }
        if let value = try integer("attempts", in: 1...1_000_000) { transfer.attempts = value }
        if let text = try string("max-rate"), text != "unlimited" {
            let perSecond = text.hasSuffix("/s") ? String(text.dropLast(2)) : text
            guard let value = ConfigValues.size(perSecond) else {
                throw badValue("max-rate", "bad rate \(quoted(text)) for max-rate: expected unlimited or a size per second (10MiB, 500KB/s)")
            }
            transfer.maxRate = value == 0 ? nil : value
        }
        if let patterns = try list("xattrs") {
            // Only the namespace a file's owner sets syncs: `trusted.`, `security.` and `system.` mean
            // something to this kernel, and a peer's must never be written here.
            for pattern in patterns where !pattern.hasPrefix("user.") || pattern.utf8.count > 255 {
                throw badValue("xattrs", "bad pattern \(quoted(pattern)) for xattrs: a pattern names attributes in the user. namespace, "
                               + "as in user.* or user.mime_type (an empty value turns them off)")
            }
            transfer.xattrs = patterns
        }
        return transfer
    }

    func watch() throws(ConfigError) -> WatchSettings {
        try noArguments()
        var watch = WatchSettings()
        if let value = try duration("delay", allowZero: true) { watch.delay = value }
        if let value = try duration("rescan", allowZero: false) { watch.rescan = value }
        return watch
    }

    func mergeSettings() throws(ConfigError) -> MergeSettings {
        var merge = MergeSettings()
        if let value = try duration("timeout", allowZero: false) { merge.timeout = value }
        if let value = try size("base-cache") { merge.baseCache = value }
        return merge
    }

    func mergeSection() throws(ConfigError) -> MergeSection {
        var patterns: [Glob] = []
        for pattern in section.arguments {
            do { patterns.append(try Glob(pattern)) } catch {
                throw parser.fail(.badGlob, "bad pattern \(quoted(pattern)) in \(section.title): \(error.message)", line: section.line)
            }
        }
        guard let rule = try rule("rule", what: "rule") else {
            throw parser.fail(.missingKey, "\(section.title) has no rule", line: section.line)
        }
        var policy = MergePolicy(rule: rule)
        if let fallback = try self.rule("fallback", what: "fallback rule") {
            guard !fallback.canFail else {
                let safe = MergeRule.allCases.filter { !$0.canFail }.map(\.rawValue).joined(separator: ", ")
                throw badValue("fallback", "fallback \(fallback.rawValue) in \(section.title) can fail itself; use one of \(safe)")
            }
            policy.fallback = fallback
        }
        policy.keepLoser = try bool("keep-loser")
        policy.command = try command("command")
        if rule.needsCommand, policy.command == nil {
            throw parser.fail(.missingKey, "\(section.title) has rule \(rule.rawValue) but no command", line: section.line)
        }
        if !rule.needsCommand, policy.command != nil {
            throw badValue("command", "command in \(section.title) is only run by rules compare and command, not \(rule.rawValue)")
        }
        return MergeSection(patterns: patterns, policy: policy, line: section.line)
    }

    func observer() throws(ConfigError) -> ObserverSettings {
        guard section.arguments.count == 1, let path = section.arguments.first else {
            throw parser.fail(.badSection, "\(section.title) needs one path, as in [observe SaveGames/] or [observe SaveGames/player1.save]", line: section.line)
        }
        do { try Checks.observedPath(path) } catch {
            throw parser.fail(.badSection, "bad observe path \(quoted(path)): \(error.message)", line: section.line)
        }
        guard let exec = try command("exec") else {
            throw parser.fail(.missingKey, "\(section.title) has no exec", line: section.line)
        }
        return ObserverSettings(path: path, exec: exec, line: section.line)
    }
}

/// Checks shared by the config file and the command-line overrides; each throws why a value is wrong.
enum Checks {
    /// An `http://` or `https://` URL with a host; the trailing `/` is dropped.
    static func serverURL(_ text: String) throws(ValueError) -> String {
        guard let scheme = ["http://", "https://"].first(where: { text.hasPrefix($0) }) else {
            throw ValueError("expected http://HOST[:PORT] or https://HOST[:PORT]")
        }
        let rest = text.dropFirst(scheme.count)
        guard let host = rest.split(separator: "/", omittingEmptySubsequences: false).first, !host.isEmpty else {
            throw ValueError("no host")
        }
        guard !text.contains(where: { $0 == " " || $0 == "\t" || $0.isNewline }) else { throw ValueError("spaces in a URL") }
        var url = text
        while url.hasSuffix("/"), url.count > scheme.count + host.count { url.removeLast() }
        return url
    }

    static func listenAddress(_ text: String) throws(ValueError) -> ListenAddress {
        guard let address = ListenAddress(parsing: text) else {
            throw ValueError("expected HOST:PORT with a port from 0 to 65535 (127.0.0.1:7071, [::1]:7071)")
        }
        return address
    }

    /// A device name goes into conflict copies' file names: no `/`, no control characters, ≤ 64 bytes.
    static func deviceName(_ text: String) throws(ValueError) -> String {
        guard !text.isEmpty else { throw ValueError("empty") }
        guard text.utf8.count <= 64 else { throw ValueError("longer than 64 bytes") }
        guard !text.unicodeScalars.contains(where: { $0 == "/" || $0 == "\\" || $0.value < 0x20 || $0.value == 0x7F }) else {
            throw ValueError("it goes into file names, so it cannot hold /, \\ or control characters")
        }
        return text
    }

    static func logLevel(_ text: String) throws(ValueError) -> LogLevel {
        if let level = LogLevel(name: text) { return level }
        let names = LogLevel.allCases.map(\.name)
        var hint = didYouMean(text, among: names)
        if hint.isEmpty { hint = "; use " + names.joined(separator: ", ") }
        throw ValueError("unknown log level \(quoted(text))\(hint)")
    }

    /// A root name is the first component of record paths.
    static func rootName(_ name: String) throws(ValueError) {
        guard !name.isEmpty else { throw ValueError("empty") }
        guard name != ".", name != ".." else { throw ValueError("not a folder name") }
        // The server keeps records every device shares (the conflicts `ask` leaves) under it.
        guard name != SharedConflict.reservedRoot else { throw ValueError("reserved for sinki's own records (a [root NAME] section names the folder otherwise)") }
        guard !name.contains("/"), !name.contains("\\"), !name.contains("\0") else {
            throw ValueError("a name cannot hold /, \\ or NUL")
        }
    }

    static func baseName(_ path: String) -> String {
        path.split(separator: "/").last.map(String.init) ?? ""
    }

    /// Gitignore syntax: an optional `!`, an optional leading `/`, an optional trailing `/`, then a glob.
    static func ignorePattern(_ text: String) throws(ValueError) {
        var body = Substring(text)
        if body.hasPrefix("!") { body = body.dropFirst() }
        if body.hasPrefix("/") { body = body.dropFirst() }
        if body.hasSuffix("/"), !body.hasSuffix("\\/") { body = body.dropLast() }
        guard !body.isEmpty else { throw ValueError("matches nothing") }
        _ = try Glob(String(body))
    }

    /// `[observe PATH]`: `/` (everything), `ROOT/…/` (a folder, recursively) or `ROOT/…/FILE` (one path).
    static func observedPath(_ text: String) throws(ValueError) {
        if text == "/" { return }
        do {
            if text.hasSuffix("/") {
                _ = try RecordPath(validating: text + "x")
            } else {
                _ = try RecordPath(validating: text)
            }
        } catch .noRelativePart(_) {
            throw ValueError("this is a root; write \(quoted(text + "/")) to observe everything in it")
        } catch {
            throw ValueError(error.description)
        }
    }

    /// Why two roots cannot both be synced: one name, one folder, or one folder inside the other.
    static func clash(_ root: RootSettings, _ other: RootSettings) -> String? {
        if root.name == other.name { return "two roots named \(quoted(root.name)): \(other.path) and \(root.path)" }
        if root.path == other.path { return "roots \(quoted(other.name)) and \(quoted(root.name)) are the same folder \(root.path)" }
        func inside(_ inner: RootSettings, _ outer: RootSettings) -> Bool { inner.path.hasPrefix(outer.path == "/" ? "/" : outer.path + "/") }
        if inside(root, other) || inside(other, root) {
            let (inner, outer) = inside(root, other) ? (root, other) : (other, root)
            return "root \(quoted(inner.name)) (\(inner.path)) is inside root \(quoted(outer.name)) (\(outer.path))"
        }
        return nil
    }
}
