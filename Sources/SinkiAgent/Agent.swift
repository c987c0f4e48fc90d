import Glibc
import SinkiConfig
import SinkiLoop
import SinkiRecord
import SinkiServer
import SinkiState
import SinkiSupport
import SinkiTransfer
import SinkiWatch

/// A failure that stops the agent, with the exit code it maps to (design §1).
public struct AgentError: Error, Sendable, CustomStringConvertible {
    public var code: ExitCode
    public var message: String
    public init(_ code: ExitCode, _ message: String) {
        self.code = code
        self.message = message
    }
    public var description: String { message }
}

/// The sync agent: one actor on the event loop that owns the watcher, the HTTP client, timers and
/// signals, and hands blocking work to the replica (design §4).
///
/// A change flows: inotify → `Watcher` batch → `Replica.check` (into the Local tree) → `pumpSync` →
/// `Replica.step` (planned, built) → modify request → `Replica.acknowledge` (Remote and Synced); and
/// back: change feed → `Replica.ingest` (Remote) → `Replica.step` (temp file, rename, syncfs, Local
/// and Synced).
public actor Agent {
    public nonisolated let loop: EventLoop
    public nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }

    let configuration: AgentConfiguration
    let logger: Logger
    var serverURL: String
    /// Which server the stored change token belongs to (the embedded one may change ports).
    var feedKey: String { configuration.serverURL ?? "embedded" }

    var replica: Replica?
    var watcher: Watcher?
    var client: SyncClient?
    var sleeper: LoopSleeper?
    var signals: [LoopSignal] = []
    var server: SyncServer?
    /// The token the embedded server knows this agent by (`STATE/token`).
    var embeddedToken: String?
    /// Whether the server takes our token and how fast it lets us ask (`Agent+Access.swift`).
    var access = ServerAccess()
    var tokenWatchRunning = false
    /// Conflict records being sent (`pumpSharedConflicts`); the agent stops once it ends.
    var sharedConflictsTask: Task<Void, Never>?
    /// Asked for while a run was under way: another follows.
    var sharedConflictsWanted = false
    /// One push may go while the server is thought unreachable (`schedulePushProbe`).
    var pushProbe = false
    var pushProbeScheduled = false
    var accessWakeScheduled = false
    /// Ends a storage refusal's wait (`Agent+Storage.swift`); armed only while one waits.
    var storageTimer: LoopTimer?
    /// "up to date" was said and nothing has waited since (`sayIfUpToDate`).
    var saidUpToDate = false
    /// Failures in a row of each upload (by transfer key), for the delay before it is tried again.
    var failedUploadAttempts: [String: Int] = [:]
    var lock: FileDescriptor?

    var stopping = false
    /// What a stop still waits for, said in the log when it takes long (Agent+Stop.swift).
    var stopWait = StopWait()
    /// The change feed has been read to its end once since start: pushes may begin.
    var caughtUp = false
    /// A feed page was read with more right behind it: rounds wait until the read ends (Agent+Pull).
    var feedMidRead = false
    /// nil until the first contact; false while the server cannot be reached.
    var reachable: Bool?
    /// While the server cannot be reached: since when, why (the last failure's cause) and how many
    /// requests failed; what status says in one line.
    var outage: Outage?
    var backoff = Backoff()
    /// The change feed's request: parked or not, and when to ask without waiting (Agent+Reach.swift).
    var feed = FeedState()
    var pullTask: Task<Void, Never>?
    var pushTasks: [Int: Task<Void, Never>] = [:]
    var nextPushID = 0
    /// A batch built while every modify request was in flight: sent the moment one is answered, so
    /// that the link does not wait out the next batch's planning and reading (40 ms an answer, a
    /// quarter of the sender's link at 20 ms / 100 Mbit/s).
    var stagedPush: [Outgoing]?
    /// The current run of sending (nil once nothing waits): what status says of a long push.
    var pushRun: PushProgress?
    /// The current run of applying remote changes (nil once nothing waits): a first download's totals.
    var pullRun: PullProgress?
    /// When systemd last heard of the run's progress (monotonic nanoseconds).
    var pushRunToldAt: Int64 = 0
    /// The pace modify requests go at, which bounds how much the next batch carries.
    var pushPace = PushPace()
    var finished: CheckedContinuation<ExitCode, Never>?
    /// Watcher batches waiting for the replica; one look at the disk runs at a time, and batches
    /// that arrive meanwhile are merged into the next.
    var pendingWatch = WatchBatch()
    var lookingAtDisk = false
    var diskTask: Task<Void, Never>?
    var lastTrim: Int64 = 0
    /// A trim waits for `trimSpacing` to pass since the last.
    var trimScheduled = false
    var startTask: Task<Void, Never>?
    var watchLimitWarned = false
    var unwatchedCount = 0
    var exitCode = ExitCode.success
    /// The last run on this state folder did not stop cleanly: once caught up, everything is compared
    /// with the server (what it was doing may have been cut off anywhere).
    var uncleanStart = false
    /// The control socket, systemd, SIGHUP and pause (Agent+Control.swift).
    var control = AgentControl()
    /// Large files moving through tus (Agent+Transfers.swift).
    var transfers = TransferBook()
    /// Files in flight elsewhere, fetched ahead of their records (`Agent+Prefetch`).
    var prefetch = PrefetchBook()
    /// Merge rules, the engine and observers (Agent+Merge.swift).
    var merge: AgentMerge
    /// When paths whose operation failed are planned again (Agent+Retry.swift).
    var retries = RetrySchedule()
    /// The rounds of planning and carrying out (Agent+Sync.swift).
    var rounds = SyncRounds()
    /// Full comparisons with the server (Agent+Verify.swift).
    var verify = VerifyState()
    /// Checks of the Remote tree against the server's digests (Agent+Digests.swift).
    var digests = DigestCheckState()

    public init(configuration: AgentConfiguration, loop: EventLoop, logger: Logger) {
        self.configuration = configuration
        self.loop = loop
        self.logger = logger
        serverURL = configuration.effectiveServerURL
        merge = AgentMerge(configuration, logger: logger)
    }

    /// Runs until a signal or `stop()`; returns the process exit code.
    public func run() async -> ExitCode {
        Self.limitMallocArenas()
        do {
            try setUp()
        } catch let error as AgentError {
            logger.error(error.message)
            tearDown()
            return error.code
        } catch {
            logger.error("\(error)")
            tearDown()
            return .software
        }
        startTask = Task { await self.start() }
        let code = await withCheckedContinuation { finished = $0 }
        // Every piece of work that touches the disk or the database ends before the process does:
        // a worker still hashing when exit handlers run would crash a clean stop.
        stopWait.awaiting = "the start"
        await startTask?.value
        stopWait.awaiting = "the change feed"
        await pullTask?.value
        stopWait.awaiting = "a look at the disk"
        while let look = diskTask {
            await look.value
            if diskTask == look { diskTask = nil }
        }
        stopWait.awaiting = "the state database"
        if code == .success { try? await replica?.markStopped() }
        tearDown()
        return code
    }

    private func setUp() throws {
        try makeStateDirectory()
        if configuration.serverURL == nil { try startEmbeddedServer() }
        let inotify: Inotify
        do { inotify = try Inotify() } catch { throw AgentError(.software, "cannot start inotify: \(error)") }
        let echoes = EchoFilter()
        do {
            replica = try Replica(statePath: configuration.stateDirectory + "/state.db", roots: configuration.roots,
                                  device: configuration.device, watch: InotifyLink(inotify: inotify, echoes: echoes), logger: logger.child("replica"),
                                  typeFor: configuration.typeFor)
        } catch let error as SystemError {
            throw AgentError(.usage, "cannot open root \(error.path.map(quoted) ?? ""): \(error.message)")
        } catch {
            throw AgentError(.ioError, "cannot open the state database in \(configuration.stateDirectory): \(error)")
        }
        let http = HTTPClient(loop: loop, logger: logger.child("http"))
        http.caFile = configuration.caFile
        // `[transfer] max-rate` holds for everything the agent sends, and everything it receives:
        // records with inline content, chunks and assets, every file at once.
        http.maxSendRate = configuration.transfer.maxRate
        http.maxReceiveRate = configuration.transfer.maxRate
        // A new origin each run: the answers of a run before may have been lost, and its saves must come back.
        client = SyncClient(http: http, base: serverURL, token: configuration.token ?? embeddedToken, device: configuration.device,
                            origin: SaveOrigin(validating: RandomID.hex())!)
        sleeper = LoopSleeper(loop: loop)
        let watcher = Watcher(loop: loop, inotify: inotify, echoes: echoes, delayMilliseconds: configuration.watchDelayMilliseconds,
                              logger: logger.child("watch"))
        self.watcher = watcher
        do {
            try watcher.start { [unowned self] batch in
                self.assumeIsolated { $0.handleWatch(batch) }
            }
        } catch {
            throw AgentError(.software, "cannot poll inotify: \(error)")
        }
        for number in [SIGTERM, SIGINT] {
            signals.append(LoopSignal(loop: loop, signal: number) { [unowned self] in
                self.assumeIsolated { $0.stop() }
            })
        }
        startControl()
    }

    private func makeStateDirectory() throws {
        let path = configuration.stateDirectory
        var built = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            built += "/" + component
            if mkdir(built, 0o700) != 0 && errno != EEXIST {
                throw AgentError(.ioError, "cannot create the state folder \(quoted(path)): \(SystemError("mkdir", errno: errno).message)")
            }
        }
        // One agent per state folder: a second would corrupt the first one's view of the disk.
        let lockPath = path + "/agent.lock"
        let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw AgentError(.ioError, "cannot open \(quoted(lockPath)): \(SystemError("open", errno: errno).message)") }
        lock = FileDescriptor(raw: fd, path: lockPath)
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            throw AgentError(.temporaryFailure, "another sinkid is already running with the state folder \(quoted(path))")
        }
        if configuration.deviceIsNew {
            do { try DefaultDevice.keep(configuration.device, stateDirectory: path) } catch {
                throw AgentError(.ioError, "cannot keep the device name in \(quoted(path)): \(error)")
            }
            logger.info("this agent's device name is \(configuration.device) (kept in \(path)/\(DefaultDevice.fileName); --device or [agent] device sets another)")
        }
    }

    private func startEmbeddedServer() throws {
        let configuration = ServerConfiguration(listen: self.configuration.listen,
                                                dataDirectory: self.configuration.stateDirectory + "/server")
        do {
            let server = try SyncServer(configuration: configuration, logger: logger.child("server"))
            embeddedToken = try EmbeddedAccount.token(in: server.store, stateDirectory: self.configuration.stateDirectory,
                                                      device: self.configuration.device)
            try server.start()
            self.server = server
            // With port 0 the kernel picked one: talk to that.
            let host = self.configuration.listen.hasPrefix("0.0.0.0:") ? "127.0.0.1"
                : String(self.configuration.listen[..<(self.configuration.listen.lastIndex(of: ":") ?? self.configuration.listen.endIndex)])
            serverURL = "http://\(host):\(server.boundPort)"
            logger.info("embedded server listening on \(host):\(server.boundPort)")
        } catch {
            throw AgentError(.unavailable, "cannot run the embedded server on \(self.configuration.listen): \(error) "
                + "(is another sinkid using it? then pass --server http://\(self.configuration.listen))")
        }
    }

    private func tearDown() {
        retries.timer?.stop()
        retries.timer = nil
        storageTimer?.stop()
        storageTimer = nil
        verify.timer?.stop()
        verify.timer = nil
        stopWait.timer?.stop()
        stopWait.timer = nil
        stopControl()
        watcher?.stop()
        watcher = nil
        signals.removeAll()
        server?.stop()
        server = nil
    }

    private func start() async {
        guard let replica else { return }
        await openMergeState()
        PrefetchFile.clear(prefetchDirectory)
        do {
            try await replica.bindServer(feedKey)
            uncleanStart = try await replica.markRunning()
            if try await replica.rewindFeedBeforeSaves() {
                logger.info("the last run ended before every save it made was answered: reading the feed again from before them")
            }
            if let since = try await replica.pausedSince() {
                control.paused = true
                control.pausedSince = since
                logger.info("paused since \(Clock.iso8601(since)) (sinkid pause before this start): nothing is sent or applied until sinkid resume")
            }
            control.pausedRoots = try await replica.pausedRoots()
            for root in configuration.roots {
                guard let since = control.pausedRoots[root.name] else { continue }
                logger.info("root \(root.name) paused since \(Clock.iso8601(since)) (sinkid pause \(root.name) before this start): its changes wait for sinkid resume \(root.name)")
            }
            verify.last = try await replica.lastVerify()
            await loadDigestCounts()
            await replica.useUploadEndpoint(serverURL + Routes.uploads)
            await replica.setInlineLimit(configuration.transfer.inlineMax)
            try await replica.setXattrPolicy(XattrPolicy(patterns: configuration.transfer.xattrs))
            let started = Clock.monotonic()
            var queued = 0
            for index in configuration.roots.indices {
                let root = RootID(index)
                let report = try await replica.reconcile(LocalPath(root, ""), progress: pushProgress)
                queued += report.queued
                note(report, root: root)
            }
            let elapsed = Double(Clock.monotonic() - started) / 1e9
            logger.info("scanned \(configuration.roots.count) root(s) in \(String(format: "%.2f", elapsed)) s; \(queued) local change(s) to send")
            scanFinished()
        } catch {
            logger.error("initial scan failed: \(error)")
            exitCode = .ioError
            stop()
            return
        }
        pullTask = Task { await self.pullLoop() }
        schedulePeriodicRescan()
        scheduleVerify()
        // After the feed's first request is out: a trim after a big scan takes a while.
        Task { self.trimMemory() }
    }

    /// Called from the replica as a walk commits each chunk: pushing starts before the walk ends.
    nonisolated var pushProgress: @Sendable (Int) -> Void {
        { [weak self] _ in
            guard let self else { return }
            Task { await self.pumpSync() }
        }
    }

    // MARK: server reachability

    /// A request got an answer: the server is reachable. After an outage, what waited goes now: the
    /// feed's backoff sleep ends and queued changes are sent, not left for the next long-poll.
    func connected() {
        let wasLost = reachable == false
        if wasLost { logger.info("server \(serverURL) reachable again") }
        reachable = true
        outage = nil
        backoff.reset()
        contactMade()
        if wasLost {
            endRetryWaits()
            pumpSync()
            pumpSharedConflicts()
        }
    }

    /// A request could not reach the server. The parked long-poll may be on a connection as dead, so
    /// the feed asks again at once (`wakeFeed`), then with backoff.
    func disconnected(_ error: any Error) {
        let cause = (error as? SyncError)?.cause ?? (error as? TransferError)?.cause ?? (error as? TusError).map(Outage.cause) ?? "\(error)"
        if reachable != false {
            logger.warning("server \(serverURL) unreachable: \(cause); retrying with backoff")
        }
        reachable = false
        outage = Outage(since: outage?.since ?? Clock.now(), cause: cause, failures: (outage?.failures ?? 0) + 1)
        // A server that went away may come back as another (restored, or having lost records): the
        // first page read after the reconnect is checked against its digests before "up to date".
        digests.matched = false
        contactLost()
        wakeFeed("a request to the server failed")
    }
}
