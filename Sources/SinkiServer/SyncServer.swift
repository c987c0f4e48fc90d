import Glibc
import SinkiRecord
import SinkiSupport
import Synchronization

/// Limits of the wire protocol (docs/protocol.md). Not meant to be changed, but changeable for tests.
public struct ServerLimits: Sendable, Equatable {
    /// Largest JSON request body (`413 too-large` beyond).
    public var maxBodyBytes = 256 << 20
    /// Bytes of buffered request bodies held at once by the whole server (`503` with `Retry-After`
    /// beyond; one body alone always fits): twice the largest body.
    public var maxBufferedBodyBytes = 512 << 20
    /// Connections one client address may hold open at once (0: no cap). Behind a proxy
    /// (`--behind-proxy`) every connection comes from the proxy: there the cap is the proxy's to set.
    public var maxConnectionsPerAddress = 128
    /// Seconds a connection has to send a whole request head (request line and headers) from its
    /// accept, or from the end of its previous request when kept alive; a late one is closed before
    /// its token is read (0: no deadline, only libmicrohttpd's idle timeout).
    public var headDeadlineSeconds = 10.0
    /// Most records in one modify batch.
    public var maxBatchRecords = 10_000
    /// Records per feed or look-up page: the default, and the most a client may ask for.
    public var defaultPageRecords = 1_000
    public var maxPageRecords = 10_000
    /// A page stops growing once its inline data passes this.
    public var maxPageDataBytes = 32 << 20
    /// Longest long-poll a client may ask for, in seconds.
    public var maxWaitSeconds = 300
    /// A streamed feed answer ends after the page that takes it past this many bytes (the client asks
    /// again): what a reader that applies slower than it receives may hold unread.
    public var maxStreamBytes = 8 << 20
    /// Largest declared size of one record's inline content.
    public var maxInlineBytes = 64 << 20
    /// Most chunks one manifest may name: 9 MiB stored, 19 MB of JSON; a file of 256 GiB at the mean
    /// chunk size of about 1 MiB, of 64 GiB (the default `Tus-Max-Size`) even at the smallest chunks
    /// the large profile cuts.
    public var maxManifestChunks = 262_144
    /// Requests a second each device token may send on average (a token bucket; 0: no limit), and how
    /// many at once beyond that; more answer `429 rate-limited` with `Retry-After`. Each MiB a request
    /// sends or receives counts as one more (`RateLimiter`).
    public var requestsPerSecond: Double = 200
    public var requestBurst = 1_000
    /// Long-polls one token may hold open at once (`429` beyond).
    public var maxLongPollsPerToken = 4
    /// Long-polls all of one user's tokens may hold open at once (`429` beyond): tokens minted from
    /// one another share it. Each agent holds one per server.
    public var maxLongPollsPerUser = 32
    /// Live tokens one user may hold (minting beyond answers `403 too-many-tokens`; a refresh, which
    /// replaces one, always may).
    public var maxLiveTokensPerUser = 1_000
    /// How often the server looks for revocations made by another process (seconds).
    public var revocationPollSeconds = 0.2
    /// With a store shared by several servers: how often waiting users' newest changes are looked at,
    /// in case a notification of another server's commit was lost (seconds).
    public var crossServerPollSeconds = 1.0

    public init() {}
}

/// How the server runs.
public struct ServerConfiguration: Sendable {
    /// `HOST:PORT` or `[IPV6]:PORT`; port 0 picks a free port (see `SyncServer.boundPort`).
    public var listen: String
    /// Created if missing; holds `records.db`.
    public var dataDirectory: String
    /// libmicrohttpd worker threads; also the number of read connections to the store.
    public var threads: Int
    /// Whether requests need a device token (docs/tokens.md). Without, only on a loopback address.
    public var authentication: ServerAuthentication
    /// Tokens to import into the accounts at start (`--tokens FILE`): users made as needed, each token
    /// kept by its hash with full scope.
    public var tokens: [String: ServerIdentity]?
    public var limits: ServerLimits
    /// A connection idle this many seconds in the middle of a request (a body, an answer) is closed (a
    /// parked long-poll is not idle); between requests `ServerLimits.headDeadlineSeconds` holds.
    public var connectionTimeoutSeconds: Int
    /// How long `stop()` waits for parked long-polls to be answered before it closes them.
    public var stopGraceSeconds: Double
    /// tus uploads (`uploads/` in the data folder): the largest size and the expiry of unfinished ones.
    public var uploads: UploadSettings
    /// Tombstone retention, history and blob removal.
    public var retention: RetentionSettings
    /// The quota of a user who has none of their own (`--quota`), in bytes; nil: none.
    public var defaultQuota: Int64?
    /// What the store is told of history and quotas.
    public var storePolicy: StorePolicy { StorePolicy(keepsHistory: retention.historyDays > 0, defaultQuota: defaultQuota) }
    /// A proxy in front sets `X-Forwarded-Proto`/`X-Forwarded-Host`: absolute URLs are built from them
    /// (`--behind-proxy`). Off, they are ignored: a client could name any host.
    public var behindProxy = false
    /// Where clients reach the server (`--public-url`, `scheme://host[:port]`): absolute URLs are built
    /// from it, whatever a request says. nil: from the forwarded headers or the local address.
    public var publicURL: String?
    /// How absolute URLs get their origin (docs/server.md).
    var publicOrigin: PublicOrigin {
        if let publicURL, let origin = PublicOrigin.parse(publicURL: publicURL) { return .configured(origin) }
        return behindProxy ? .forwarded : .local
    }
    /// Where tus uploads and assets live; nil: `uploads/` in the data folder. Servers that share one
    /// (on one PostgreSQL) coordinate through locks on its files (docs/server.md, "Several servers").
    public var uploadsDirectory: String?
    /// Where users' chunks live; nil: `chunks/` in the data folder. Shared like the uploads folder by
    /// servers on one store.
    public var chunksDirectory: String?

    public init(listen: String = "127.0.0.1:7071", dataDirectory: String, threads: Int = 4,
                tokens: [String: ServerIdentity]? = nil) {
        self.listen = listen
        self.dataDirectory = dataDirectory
        self.threads = threads
        self.tokens = tokens
        authentication = .tokens
        limits = ServerLimits()
        connectionTimeoutSeconds = 120
        stopGraceSeconds = 5
        uploads = UploadSettings()
        retention = RetentionSettings()
    }
}

/// Whether the server checks device tokens.
public enum ServerAuthentication: Sendable, Equatable {
    /// Every request needs a live token of the store's accounts.
    case tokens
    /// Everyone is user `default` (`--insecure-no-auth`): refused on any address but loopback.
    case none
}

/// The sync server of design §3: records over HTTP/1.1 (`docs/protocol.md`), kept in a `RecordStore`.
///
/// `init` opens the store, `start()` binds and serves on libmicrohttpd's threads, `stop()` answers
/// waiting long-polls, stops serving and closes the store. Safe to call from any thread.
public final class SyncServer: Sendable {
    public let configuration: ServerConfiguration
    public let store: any ServerStore
    private let logger: Logger
    private let phase = Mutex(Phase.ready)

    /// What a running server holds, each part started in `start()` and stopped in `stop()`.
    private struct Running: Sendable {
        var http: HTTPServer
        var uploads: UploadStore
        var chunks: ChunkStore
        var retention: Retention
        var watcher: RevocationWatcher?
        var crossServer: CrossServerWake?
        var port: Int
    }

    private enum Phase {
        case ready
        case running(Running)
        case stopped
    }

    /// Opens (creating if needed) the SQLite store `records.db` in the data folder.
    public convenience init(configuration: ServerConfiguration, logger: Logger) throws(ServerError) {
        let directory = configuration.dataDirectory
        do {
            try makeDirectories(directory)
        } catch {
            throw ServerError(.store, "cannot create the data folder \(directory): \(error)")
        }
        let store: SQLiteRecordStore
        do {
            store = try SQLiteRecordStore(path: directory + "/records.db", readers: max(1, configuration.threads), policy: configuration.storePolicy)
        } catch {
            throw ServerError(.store, "cannot open the record store in \(directory): \(error)")
        }
        self.init(configuration: configuration, store: store, logger: logger)
    }

    /// Serves from a store opened elsewhere (another implementation of `RecordStore`); `stop()` closes it.
    public init(configuration: ServerConfiguration, store: any ServerStore, logger: Logger) {
        self.configuration = configuration
        self.store = store
        self.logger = logger
    }

    /// Binds the listen address and serves. Errors name the address.
    public func start() throws(ServerError) {
        try phase.withLock { (phase: inout Phase) throws(ServerError) in
            guard case .ready = phase else { throw ServerError(.wrongState, "the server was already started") }
            try importTokens()
            let listener = try Listener.bind(configuration.listen)
            if configuration.authentication == .none && !listener.isLoopback {
                close(listener.socket)
                throw ServerError(.cannotStart, "refusing to serve \(configuration.listen) without authentication: "
                    + "--insecure-no-auth is for loopback addresses (127.0.0.0/8, ::1) only; give devices tokens instead (sinkid serve token add)")
            }
            // libmicrohttpd serves on a duplicate; this one is always ours to close.
            defer { close(listener.socket) }
            let chunks = try ChunkStore(directory: configuration.chunksDirectory ?? configuration.dataDirectory + "/chunks", logger: logger)
            let uploads = try UploadStore(directory: configuration.uploadsDirectory ?? configuration.dataDirectory + "/uploads", settings: configuration.uploads,
                                          chunks: chunks, logger: logger)
            let hub: WaiterHub
            do {
                hub = try WaiterHub(logger: logger)
            } catch {
                throw ServerError(.cannotStart, "cannot serve on \(configuration.listen): \(error)")
            }
            var router = Router()
            var limits = configuration.limits
            // Behind a proxy every connection comes from it: a cap per address would cap everyone.
            if configuration.behindProxy { limits.maxConnectionsPerAddress = 0 }
            let inflight = InFlightBoard()
            let origins = OriginBook()
            router.add("POST", Routes.modify, ModifyRoute(store: store, hub: hub, limits: limits, uploads: uploads, chunks: chunks, inflight: inflight,
                                                          origins: origins))
            router.add("GET", Routes.changes, ChangesRoute(store: store, limits: limits, inflight: inflight, chunks: chunks, origins: origins))
            router.add("POST", Routes.inflight, InFlightRoute(board: inflight, hub: hub))
            router.add("GET", Routes.records, LookupRoute(store: store, limits: limits, chunks: chunks))
            router.add("GET", Routes.digests, DigestRoute(store: store))
            let history = HistoryRoutes(store: store, limits: limits, retention: configuration.retention)
            router.add("GET", Routes.history, HistoryRoute(history: history))
            router.add("GET", Routes.historyVersion, VersionRoute(history: history))
            router.add("GET", Routes.historyFolder, FolderAtRoute(history: history))
            router.add("POST", Routes.restore, RestoreRoute(history: history, hub: hub))
            let revocations = Revocations(hub: hub)
            router.add("POST", Routes.tokens, MintTokenRoute(accounts: store, limits: limits))
            router.addPrefix("DELETE", Routes.tokens + "/", RevokeTokenRoute(accounts: store, revoked: { revocations.revoke($0) }))
            let options = TusOptionsRoute(settings: configuration.uploads)
            for path in [TusEndpoint.path, String(TusEndpoint.path.dropLast())] {
                router.add("OPTIONS", path, options)
                router.add("POST", path, TusCreateRoute(store: uploads, origin: configuration.publicOrigin,
                                                          accounts: configuration.authentication == .tokens ? store : nil))
            }
            router.addPrefix("HEAD", TusEndpoint.path, TusHeadRoute(store: uploads))
            router.addPrefix("PATCH", TusEndpoint.path, TusPatchRoute(store: uploads))
            router.addPrefix("DELETE", TusEndpoint.path, TusDeleteRoute(store: uploads))
            router.addPrefix("OPTIONS", TusEndpoint.path, options)
            router.addPrefix("GET", Routes.assets, AssetRoute(store: uploads, records: store, chunks: chunks))
            router.add("POST", Routes.missingChunks, MissingChunksRoute(chunks: chunks))
            router.add("POST", Routes.chunkBatch, ChunkBatchRoute(chunks: chunks))
            router.add("POST", Routes.fetchChunks, ChunkFetchRoute(chunks: chunks))
            router.addPrefix("GET", Routes.chunks, ChunkGetRoute(chunks: chunks))
            router.addPrefix("DELETE", Routes.chunks, ChunkDeleteRoute(chunks: chunks, store: store, hub: hub, logger: logger))
            let authenticator = Authenticator(accounts: configuration.authentication == .tokens ? store : nil)
            let http = HTTPServer(router: router, authenticator: authenticator, hub: hub, logger: logger,
                                  methodOverridePrefixes: [String(TusEndpoint.path.dropLast())], revocations: revocations, limits: limits)
            do throws(ServerError) {
                try http.start(listenSocket: listener.socket, threads: configuration.threads,
                               connectionTimeout: configuration.connectionTimeoutSeconds, address: configuration.listen)
            } catch {
                hub.shutdown()
                throw error
            }
            uploads.startSweeping()
            let retention = Retention(store: store, uploads: uploads, chunks: chunks, settings: configuration.retention, logger: logger)
            retention.start()
            let watcher = configuration.authentication == .tokens
                ? RevocationWatcher(accounts: store, revocations: revocations, interval: limits.revocationPollSeconds, logger: logger) : nil
            let crossServer = store.changeSignal(logger: logger).map {
                CrossServerWake(store: store, hub: hub, signal: $0, fallbackSeconds: limits.crossServerPollSeconds, logger: logger)
            }
            crossServer?.start()
            phase = .running(Running(http: http, uploads: uploads, chunks: chunks, retention: retention, watcher: watcher,
                                     crossServer: crossServer, port: listener.port))
            logger.info("serving on \(configuration.listen) (port \(listener.port)), store \(store.storeID), "
                        + "\(configuration.threads) threads, " + (configuration.authentication == .tokens ? "device tokens checked" : "NO AUTHENTICATION"))
        }
    }

    /// Imports `configuration.tokens` into the accounts (users made as needed).
    private func importTokens() throws(ServerError) {
        guard let tokens = configuration.tokens, !tokens.isEmpty else { return }
        do {
            let now = Clock.now()
            for (text, identity) in tokens.sorted(by: { $0.key < $1.key }) {
                let secret = TokenSecret(text: text)
                try store.addUser(identity.user, at: now)
                if let known = try store.token(id: secret.id), known.secretHash == secret.hash { continue }
                try store.addToken(DeviceToken(id: secret.id, user: identity.user, device: identity.device, scope: .full, parentID: nil,
                                               chainID: secret.id, secretHash: secret.hash, createdAt: now))
            }
        } catch {
            throw ServerError(.store, "cannot import the tokens: \(error)")
        }
    }

    /// The port the server listens on; 0 before `start()`.
    public var boundPort: Int {
        phase.withLock { phase in
            if case let .running(running) = phase { return running.port }
            return 0
        }
    }

    /// Answers every waiting long-poll, stops serving (requests in hand finish first) and closes the
    /// store. Idempotent.
    public func stop() {
        let running = phase.withLock { phase -> Running? in
            defer { phase = .stopped }
            switch phase {
            case let .running(running): return running
            case .ready: store.close(); return nil
            case .stopped: return nil
            }
        }
        guard let running else { return }
        let (http, uploads, watcher) = (running.http, running.uploads, running.watcher)
        running.crossServer?.stop()
        running.retention.stop()
        uploads.stopSweeping()
        watcher?.stop()
        http.stop(grace: configuration.stopGraceSeconds)
        store.close()
        logger.info("stopped serving on \(configuration.listen)")
    }

    /// For tests: the upload store while running.
    var uploadStore: UploadStore? {
        phase.withLock { phase in
            if case let .running(running) = phase { return running.uploads }
            return nil
        }
    }

    /// For tests: the chunk store while running.
    var chunkStore: ChunkStore? {
        phase.withLock { phase in
            if case let .running(running) = phase { return running.chunks }
            return nil
        }
    }

    /// For tests: one retention pass now.
    func purgeNow(at now: Int64 = Clock.now()) -> RetentionPass? {
        let retention = phase.withLock { phase -> Retention? in
            if case let .running(running) = phase { return running.retention }
            return nil
        }
        return retention?.pass(now: now)
    }

    /// For tests: retention passes completed (the first runs at start).
    var retentionPasses: Int {
        phase.withLock { phase in
            if case let .running(running) = phase { return running.retention.passes }
            return 0
        }
    }

    // For tests: what the server holds right now.
    var waitingLongPolls: Int { running?.hub.waitingCount ?? 0 }
    var liveRequests: Int { running?.liveRequestCount ?? 0 }
    /// Bytes of buffered request bodies held now (`ServerLimits.maxBufferedBodyBytes`).
    var bufferedBodyBytes: Int { running?.bufferedBodyBytes ?? 0 }

    /// Connections cut for a late request head, and connections open now.
    var lateHeadsCut: Int { running?.heads.cut ?? 0 }
    var openConnections: Int { running?.heads.followed ?? 0 }

    private var running: HTTPServer? {
        phase.withLock { phase in
            if case let .running(running) = phase { return running.http }
            return nil
        }
    }
}

/// `mkdir -p`, mode 0700 for folders it creates.
func makeDirectories(_ path: String) throws(SystemError) {
    var current = path.hasPrefix("/") ? "" : "."
    for component in path.split(separator: "/") {
        current += "/" + component
        if mkdir(current, 0o700) != 0 && errno != EEXIST { throw SystemError("mkdir", errno: errno, path: current) }
    }
}
