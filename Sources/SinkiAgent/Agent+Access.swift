import Glibc
import SinkiLoop
import SinkiRecord
import SinkiSupport
import SinkiTransfer

extension Agent {
    /// Takes a refusal of the token or a rate limit: true when `error` was one (the caller stops and
    /// waits as `waitForAccess()` says), false for any other error.
    func noteAccess(_ error: SyncError) -> Bool {
        switch error {
        case let .rateLimited(problem, seconds):
            let wait = min(seconds ?? ServerAccess.defaultRetryAfterSeconds, ServerAccess.maxRetryAfterSeconds)
            let now = Clock.now()
            access.retryAt = now + Int64(wait) * 1_000_000_000
            let line = "the server asks to slow down: waiting \(wait) s (429\(problem.map { ": \($0.detail)" } ?? ""))"
            if let warned = access.limitWarnedAt, now - warned < 60_000_000_000 { logger.debug(line) } else {
                access.limitWarnedAt = now
                logger.warning(line)
            }
            scheduleAccessWake(after: wait)
            return true
        case let .problem(problem) where error.refusesToken:
            var words = "\(problem.status) \(problem.code): \(problem.detail)"
            if client?.bearerToken?.isEmpty ?? true {
                // No token at all: the fix is a setting, and which one is the news.
                words = "the server wants a device token and this agent has none: give it one with --token-file FILE or [server] token-file "
                    + "(sinkid serve token add USER --device NAME --output FILE makes one on the server)"
            }
            if access.refused == nil {
                logger.error("token refused by the server (\(words)); nothing is sent until the token changes, local changes are kept"
                             + (configuration.tokenFile.map { " (write a new token to \($0); it is read again when it changes or on SIGHUP)" } ?? ""))
            }
            access.refused = words
            access.refusedToken = client?.bearerToken
            watchTokenFile()
            return true
        default:
            return false
        }
    }

    /// Waits while the token is refused or a rate limit holds; returns at once otherwise.
    func waitForAccess() async {
        while !stopping, let sleeper {
            if access.refused != nil {
                _ = await sleeper.sleep(milliseconds: 3_600_000)
                continue
            }
            guard let retryAt = access.retryAt, retryAt > Clock.now() else {
                access.retryAt = nil
                return
            }
            _ = await sleeper.sleep(milliseconds: UInt64((retryAt - Clock.now()) / 1_000_000) + 2)
        }
    }

    /// The embedded server's token file, when this agent runs its own server.
    var embeddedTokenPath: String? {
        configuration.serverURL == nil ? configuration.stateDirectory + "/" + EmbeddedAccount.fileName : nil
    }

    /// Whether requests may go out now.
    var accessOpen: Bool { access.refused == nil && access.rateLimitRemaining(now: Clock.now()) == nil }

    /// When a rate limit ends, what waited goes on.
    private func scheduleAccessWake(after seconds: Int) {
        guard !accessWakeScheduled else { return }
        accessWakeScheduled = true
        Task {
            defer { accessWakeScheduled = false }
            // Until the latest limit has passed (a timer may fire a little early; a later 429 moves it).
            while !stopping, let sleeper, let retryAt = access.retryAt, retryAt > Clock.now() {
                _ = await sleeper.sleep(milliseconds: UInt64((retryAt - Clock.now()) / 1_000_000) + 2)
            }
            if stopping { return }
            access.retryAt = nil
            pumpSync()
        }
    }

    /// Reads the token file again (a change of it, or SIGHUP): a new token is taken at once and
    /// everything that waited on the refused one goes on.
    func rereadToken() async {
        guard let path = configuration.tokenFile ?? embeddedTokenPath else { return }
        let read = try? await Blocking.run { () throws -> String in
            let bytes = try FileDescriptor.open(path, flags: O_RDONLY).readAll()
            return String(decoding: bytes, as: UTF8.self).filter { !$0.isWhitespace }
        }
        guard let token = read, !token.isEmpty, token != client?.bearerToken || access.refused != nil else { return }
        if token == access.refusedToken { return }
        let wasRefused = access.refused != nil
        client?.bearerToken = token
        // The tus client carries the token it was made with: the next upload makes a new one.
        transfers.client = nil
        access.refused = nil
        access.refusedToken = nil
        if wasRefused { logger.info("the token file changed: trying the new token") }
        sleeper?.wakeAll()
        pumpSync()
    }

    /// While the token is refused, the token file is looked at every two seconds (a rename over it, an
    /// editor's write and a new mount all show as a change of its contents); nothing runs otherwise.
    private func watchTokenFile() {
        guard !tokenWatchRunning else { return }
        tokenWatchRunning = true
        Task {
            defer { tokenWatchRunning = false }
            while !stopping, access.refused != nil, let sleeper {
                _ = await sleeper.sleep(milliseconds: 2000)
                await rereadToken()
            }
        }
    }
}
