import Glibc
import SinkiRecord
import SinkiSupport
import Synchronization

/// Limits of the wire protocol (docs/protocol.md). Not meant to be changed, but changeable for tests.
public struct ServerLimits: Sendable, Equatable {
    /// Largest JSON request body (`413 too-large` beyond).
    public var maxBodyBytes = 256 << 20
    /// Most records in one modify batch.
    public var maxBatchRecords = 10_000
    /// Records per feed or look-up page: the default, and the most a client may ask for.
    public var defaultPageRecords = 1_000
    public var maxPageRecords = 10_000
    /// A page stops growing once its inline data passes this.
    public var maxPageDataBytes = 32 << 20
    /// Longest long-poll a client may ask for, in seconds.
    public var maxWaitSeconds = 300
    /// Largest inflated size of one record's inline content.
    public var maxInlineBytes = 64 << 20

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
    /// Bearer tokens and whom they stand for; nil serves everyone as user `default` without a token.
    public var tokens: [String: ServerIdentity]?
    public var limits: ServerLimits
    /// An idle keep-alive connection is closed after this many seconds (a parked long-poll is not idle).
    public var connectionTimeoutSeconds: Int
    /// How long `stop()` waits for parked long-polls to be answered before it closes them.
    public var stopGraceSeconds: Double
    /// tus uploads (`uploads/` in the data folder): the largest size and the expiry of unfinished ones.
    public var uploads: UploadSettings

    public init(listen: String = "127.0.0.1:7071", dataDirectory: String, threads: Int = 4,
                tokens: [String: ServerIdentity]? = nil) {
        self.listen = listen
        self.dataDirectory = dataDirectory
        self.threads = threads
        self.tokens = tokens
        limits = ServerLimits()
        connectionTimeoutSeconds = 120
        stopGraceSeconds = 5
        uploads = UploadSettings()
    }
}

/// The sync server of design §3: records over HTTP/1.1 (`docs/protocol.md`), kept in a `RecordStore`.
///
/// `init` opens the store, `start()` binds and serves on libmicrohttpd's threads, `stop()` answers
/// waiting long-polls, stops serving and closes the store. Safe to call from any thread.
public final class SyncServer: Sendable {
    public let configuration: ServerConfiguration
    public let store: any RecordStore
    private let logger: Logger
    private let phase = Mutex(Phase.ready)

    private enum Phase {
        case ready
        case running(HTTPServer, UploadStore, port: Int)
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
            store = try SQLiteRecordStore(path: directory + "/records.db", readers: max(1, configuration.threads))
        } catch {
            throw ServerError(.store, "cannot open the record store in \(directory): \(error)")
        }
        self.init(configuration: configuration, store: store, logger: logger)
    }

    /// Serves from a store opened elsewhere (another implementation of `RecordStore`); `stop()` closes it.
    public init(configuration: ServerConfiguration, store: any RecordStore, logger: Logger) {
        self.configuration = configuration
        self.store = store
        self.logger = logger
    }

    /// Binds the listen address and serves. Errors name the address.
    public func start() throws(ServerError) {
        try phase.withLock { (phase: inout Phase) throws(ServerError) in
            guard case .ready = phase else { throw ServerError(.wrongState, "the server was already started") }
            let listener = try Listener.bind(configuration.listen)
            // libmicrohttpd serves on a duplicate; this one is always ours to close.
            defer { close(listener.socket) }
            let uploads = try UploadStore(directory: configuration.dataDirectory + "/uploads", settings: configuration.uploads,
                                          logger: logger)
            let hub: WaiterHub
            do {
                hub = try WaiterHub(logger: logger)
            } catch {
                throw ServerError(.cannotStart, "cannot serve on \(configuration.listen): \(error)")
            }
            var router = Router()
            let limits = configuration.limits
            router.add("POST", "/v1/records/modify", ModifyRoute(store: store, hub: hub, limits: limits, uploads: uploads))
            router.add("GET", "/v1/changes", ChangesRoute(store: store, limits: limits))
            router.add("GET", "/v1/records", LookupRoute(store: store, limits: limits))
            let options = TusOptionsRoute(settings: configuration.uploads)
            for path in [TusEndpoint.path, String(TusEndpoint.path.dropLast())] {
                router.add("OPTIONS", path, options)
                router.add("POST", path, TusCreateRoute(store: uploads))
            }
            router.addPrefix("HEAD", TusEndpoint.path, TusHeadRoute(store: uploads))
            router.addPrefix("PATCH", TusEndpoint.path, TusPatchRoute(store: uploads))
            router.addPrefix("DELETE", TusEndpoint.path, TusDeleteRoute(store: uploads))
            router.addPrefix("OPTIONS", TusEndpoint.path, options)
            router.addPrefix("GET", "/v1/assets/", AssetRoute(store: uploads))
            let http = HTTPServer(router: router, authenticator: Authenticator(tokens: configuration.tokens), hub: hub, logger: logger,
                                  methodOverridePrefixes: [String(TusEndpoint.path.dropLast())])
            do throws(ServerError) {
                try http.start(listenSocket: listener.socket, threads: configuration.threads,
                               connectionTimeout: configuration.connectionTimeoutSeconds, address: configuration.listen)
            } catch {
                hub.shutdown()
                throw error
            }
            uploads.startSweeping()
            phase = .running(http, uploads, port: listener.port)
            logger.info("serving on \(configuration.listen) (port \(listener.port)), store \(store.storeID), "
                        + "\(configuration.threads) threads, \(configuration.tokens == nil ? "no tokens" : "\(configuration.tokens!.count) tokens")")
        }
    }

    /// The port the server listens on; 0 before `start()`.
    public var boundPort: Int {
        phase.withLock { phase in
            if case let .running(_, _, port) = phase { return port }
            return 0
        }
    }

    /// Answers every waiting long-poll, stops serving (requests in hand finish first) and closes the
    /// store. Idempotent.
    public func stop() {
        let running = phase.withLock { phase -> (HTTPServer, UploadStore)? in
            defer { phase = .stopped }
            switch phase {
            case let .running(http, uploads, _): return (http, uploads)
            case .ready: store.close(); return nil
            case .stopped: return nil
            }
        }
        guard let (http, uploads) = running else { return }
        uploads.stopSweeping()
        http.stop(grace: configuration.stopGraceSeconds)
        store.close()
        logger.info("stopped serving on \(configuration.listen)")
    }

    /// For tests: the upload store while running.
    var uploadStore: UploadStore? {
        phase.withLock { phase in
            if case let .running(_, uploads, _) = phase { return uploads }
            return nil
        }
    }

    // For tests: what the server holds right now.
    var waitingLongPolls: Int { running?.hub.waitingCount ?? 0 }
    var liveRequests: Int { running?.liveRequestCount ?? 0 }

    private var running: HTTPServer? {
        phase.withLock { phase in
            if case let .running(http, _, _) = phase { return http }
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
