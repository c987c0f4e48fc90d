import Glibc
import SinkiLoop
import SinkiMerge
import SinkiPlan
import SinkiRecord
import SinkiSupport

/// The agent's state and disk, on one serial queue: the three trees (`StateStore`), and the parts that
/// keep them — the local observer (disk into Local), the feed reader (server into Remote), the
/// scheduler and the planner (what differs into operations), the executor (operations onto the disk,
/// outcomes into the trees), the uploader (saves, and the server's answers), the merge desk.
///
/// Everything here blocks (SQLite, hashing, file writes), so the actor runs on its own queue, off the
/// event loop. Being serial is also what keeps a write and the observer's look at the same path from
/// interleaving.
public actor Replica {
    private let executor = QueueExecutor(label: "sinki-replica")
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    /// How long the call running on the replica's queue now has held it (nanoseconds); nil when none runs.
    public nonisolated var busyFor: Int64? { executor.runningFor }

    let context: ReplicaContext
    let observer: LocalObserver
    let feed: FeedReader
    let scheduler: Scheduler
    let uploader: Uploader
    var store: StateStore { context.store }
    var logger: Logger { context.logger }
    var localRound: LocalRound { LocalRound(context: context, observer: observer, scheduler: scheduler, feed: feed) }
    public nonisolated let roots: [RootSpec]
    /// The tus endpoint large files are uploaded to.
    var uploadEndpoint = ""

    public init(statePath: String, roots: [RootSpec], device: String, watch: (any WatchLink)?, logger: Logger,
                typeFor: @escaping @Sendable (String) -> String = { _ in Record.defaultType }) throws {
        let store = try StateStore(path: statePath)
        // Manifests of versions no longer here name chunks nobody can read any more.
        try store.pruneManifests()
        context = try ReplicaContext(store: store, roots: roots, device: device, logger: logger, watch: watch, typeFor: typeFor)
        observer = LocalObserver(context: context)
        feed = FeedReader(context: context)
        scheduler = Scheduler(context: context)
        uploader = Uploader(context: context, observer: observer, feed: feed)
        self.roots = roots
    }

    // MARK: The disk, into Local

    /// Walks `path` (a folder, or the root) and takes what differs into Local.
    public func reconcile(_ path: LocalPath, progress: (@Sendable (Int) -> Void)? = nil) async throws -> ObserveReport {
        defer { forgetSettledFailures() }
        return try await observer.reconcile(under: path, progress: progress)
    }

    /// Looks at each of `paths` (below `root`) alone.
    public func check(root: RootID, paths: [String], progress: (@Sendable (Int) -> Void)? = nil) async throws -> ObserveReport {
        defer { forgetSettledFailures() }
        return try await observer.check(root: root, paths: paths, progress: progress)
    }

    /// A rename the watcher paired: the rows move along, without reading the files again.
    public func move(from: LocalPath, to: LocalPath, isDirectory: Bool, progress: (@Sendable (Int) -> Void)? = nil) async throws -> ObserveReport {
        defer { forgetSettledFailures() }
        return try await observer.move(from: from, to: to, isDirectory: isDirectory, progress: progress)
    }

    /// A failed path that what was seen here settled (the file went away, or is back to what both sides
    /// agree on) has nothing left to retry: no round may come to forget it (nothing differs), and
    /// status would say it failed for its whole backoff, a refusal's being a day.
    private func forgetSettledFailures() {
        try? scheduler.forgetSettledFailures()
    }

    /// Paths that changed while being read since the last call.
    public func takeUnstable() -> [LocalPath] {
        defer { observer.unstable.removeAll() }
        return observer.unstable
    }

    /// Young temporary-looking files a walk skipped, to look at once their grace is over.
    public func takeDeferred() -> [LocalPath] {
        defer { observer.deferred.removeAll() }
        return observer.deferred
    }

    /// Directories left unwatched by the limit, to walk again (each walk retries their watch).
    public func takeUnwatched() -> [LocalPath] {
        var out: [LocalPath] = []
        for index in observer.unwatchedDirectories.indices {
            let root = RootID(index)
            out += observer.unwatchedDirectories[root].map { LocalPath(root, $0) }
            observer.unwatchedDirectories[root].removeAll()
        }
        return out
    }

    /// Roots to walk again because their ignore rules changed.
    public func takeRescans() -> Set<RootID> {
        defer { context.rescanNeeded.removeAll() }
        return context.rescanNeeded
    }

    public var unwatchedCount: Int { observer.unwatchedDirectories.reduce(0) { $0 + $1.count } }

    /// Opens a root again (after it was removed and made again, or remounted).
    public func reopen(root: RootID) throws {
        context.safeRoots[root] = try SafeRoot(path: roots[root].path)
        context.reloadIgnores(root)
    }

    /// The user confirmed (`sinkid resume`) that a stopped root is meant to be as it is: reopen it and
    /// let the next walk record what is gone.
    public func confirmSafetyStop(root: RootID) throws {
        if (try? SafeRoot(path: roots[root.index].path)) == nil {
            // The folder itself is gone: make it again, empty, so the deletes can be recorded.
            var built = ""
            for component in roots[root.index].path.split(separator: "/") {
                built += "/" + component
                mkdir(built, 0o755)
            }
        }
        try reopen(root: root)
        observer.confirmedEmpty.insert(root)
    }

    /// Sets how long a vanished large file stays a rename candidate.
    public func setMoveWindow(nanoseconds: Int64) { observer.moves.window = nanoseconds }

    /// Files up to `limit` bytes travel inline; larger ones as chunks.
    public func setInlineLimit(_ limit: Int64) { context.inlineLimit = limit }

    /// The tus endpoint uploads go to.
    public func useUploadEndpoint(_ endpoint: String) { uploadEndpoint = endpoint }

    /// Makes the next look at `path` read it whatever its stat says (its content was found to be other
    /// than its name: two writes of one size within one tick of the clock leave the stat as it was).
    public func distrustStat(_ path: String) throws {
        guard var local = try store.row(path)?.local, local.kind == .file else { return }
        local.ctime = 0
        try store.setLocal(path, local)
    }

    // MARK: The server, into Remote

    /// Takes in a page of the change feed (or records read otherwise, `token` nil) and its position.
    @discardableResult
    public func ingest(_ records: [Record], token: String?) throws -> Int {
        try feed.ingest(records, token: token).count
    }

    public func feedToken(server: String) throws -> String? {
        guard try store.meta(MetaKey.feedServer) == server else { return nil }
        return try store.meta(MetaKey.feedToken)
    }

    /// The change tag of the feed position read (0: none yet).
    public func feedPosition() throws -> Int64 { FeedToken.tag(of: try store.meta(MetaKey.feedToken)) ?? 0 }

    /// Forgets the feed position (the server no longer knows the token); the next pull starts over.
    /// The Remote tree goes with it: the full comparison that follows lists every record again.
    public func resetFeed() throws {
        try store.transaction {
            try store.setMeta(MetaKey.feedToken, nil)
            try store.clearRemote()
            try store.setMeta(MetaKey.remoteSeeded, "0")
        }
    }

    public func bindServer(_ server: String) throws {
        if try store.meta(MetaKey.feedServer) != server {
            try store.transaction {
                try store.setMeta(MetaKey.feedServer, server)
                try store.setMeta(MetaKey.feedToken, nil)
                // A position in another server's feed is nothing to go back to (bound at start, before any save).
                try store.setMeta(MetaKey.feedBeforeSaves, nil)
                try store.clearRemote()
                try store.setMeta(MetaKey.remoteSeeded, nil)
            }
        }
    }

    /// Notes the feed position before saves about to go (kept if one is noted already): until a check
    /// against the server's digests finds the copy complete, a restart reads the feed again from here.
    public func markFeedBeforeSaves() throws {
        guard try store.meta(MetaKey.feedBeforeSaves) == nil else { return }
        try store.setMeta(MetaKey.feedBeforeSaves, try store.meta(MetaKey.feedToken) ?? "")
    }

    /// Every save is answered and in the Remote tree (a check found the copy the same as the server's).
    public func clearFeedBeforeSaves() throws { try store.setMeta(MetaKey.feedBeforeSaves, nil) }

    /// At start: after a run that ended with saves whose answers it may not have had (the feed it read
    /// passed over them), the feed is read again from before them, where they come as any other
    /// device's saves. True when it was moved back. The note stays until a check finds the copy complete.
    public func rewindFeedBeforeSaves() throws -> Bool {
        guard let noted = try store.meta(MetaKey.feedBeforeSaves) else { return false }
        let position = noted.isEmpty ? nil : noted
        guard try store.meta(MetaKey.feedToken) != position else { return false }
        try store.setMeta(MetaKey.feedToken, position)
        return true
    }

    /// Whether the Remote tree holds everything the feed position moved past.
    public var remoteSeeded: Bool { (try? store.meta(MetaKey.remoteSeeded)) != "0" }

    /// Notes that a full listing of every root filled the Remote tree.
    public func markRemoteSeeded() throws { try store.setMeta(MetaKey.remoteSeeded, nil) }

    /// Sets the feed position to `token` when none is kept (after the server forgot the old one and a
    /// full comparison stood in for the history it no longer has).
    public func adoptFeedPosition(_ token: String) throws {
        if try store.meta(MetaKey.feedToken) == nil { try store.setMeta(MetaKey.feedToken, token) }
    }

    // MARK: Small facts

    /// Whether the trees differ anywhere but at paths waiting for `sinkid resolve`.
    public var isSettled: Bool {
        (try? store.database.scalar("""
            SELECT EXISTS (SELECT 1 FROM tree INDEXED BY tree_local_work WHERE \(StateStore.localDiffers) AND path NOT IN (SELECT path FROM conflicts))
                OR EXISTS (SELECT 1 FROM tree INDEXED BY tree_remote_work WHERE \(StateStore.remoteDiffers) AND path NOT IN (SELECT path FROM conflicts))
            """)) != 1 && scheduler.inFlight.isEmpty
    }

    /// Bytes of inline content read and not written yet.
    public var inlineBytes: Int { feed.inline.bytes }

    /// Local changes to send, in all.
    public var pendingCount: Int { (try? StatusQueries.counts(store.database).local) ?? 0 }

    /// The row of `path`, for tests and status.
    public func row(_ path: String) throws -> TreeRow? { try store.row(path) }

    public func markRunning() throws -> Bool {
        let unclean = try store.meta(MetaKey.running) == "1"
        try store.setMeta(MetaKey.running, "1")
        return unclean
    }

    /// Notes a clean stop.
    public func markStopped() throws { try store.setMeta(MetaKey.running, "0") }

    /// When `sinkid pause` paused this agent, if it is paused: a pause outlives a restart.
    public func pausedSince() throws -> Int64? { try store.meta(MetaKey.pausedSince).flatMap { Int64($0) } }

    public func setPausedSince(_ since: Int64?) throws { try store.setMeta(MetaKey.pausedSince, since.map(String.init)) }

    /// The roots `sinkid pause ROOT` paused, by name, with when: kept by name so that a root taken out
    /// of the config and put back is still paused.
    public func pausedRoots() throws -> [String: Int64] {
        guard let text = try store.meta(MetaKey.pausedRoots), case let .object(members)? = try? JSONValue.parse(Array(text.utf8)) else { return [:] }
        var roots: [String: Int64] = [:]
        for (name, value) in members { if case let .int(since) = value { roots[name] = since } }
        return roots
    }

    public func setPausedRoots(_ roots: [String: Int64]) throws {
        guard !roots.isEmpty else { return try store.setMeta(MetaKey.pausedRoots, nil) }
        var writer = JSONWriter()
        JSONValue.object(roots.sorted { $0.key < $1.key }.map { ($0.key, .int($0.value)) }).write(to: &writer)
        try store.setMeta(MetaKey.pausedRoots, String(decoding: writer.bytes, as: UTF8.self))
    }

    // MARK: Merge state

    /// Opens the base cache (`STATE/bases`) and the folder where `ask` keeps versions aside
    /// (`STATE/conflicts`), and takes the merge rules. Without a base cache the three-way rules go to
    /// their fallbacks.
    public func openMergeState(stateDirectory: String, baseCacheLimit: Int64, rules: MergeRules) throws(BaseCacheError) {
        context.rules = rules
        context.conflictsDirectory = stateDirectory + "/conflicts"
        context.bases = try BaseCache(directory: stateDirectory + "/bases", limit: baseCacheLimit, logger: logger.child("bases"))
    }

    /// A config reload: new rules, new record types, a new base budget.
    public func updateRules(_ rules: MergeRules, typeFor: @escaping @Sendable (String) -> String, baseCacheLimit: Int64) {
        context.rules = rules
        context.typeFor = typeFor
        context.bases?.setLimit(baseCacheLimit)
    }

    /// Versions in the base cache and their bytes, for status and tests.
    public var baseCacheUse: (count: Int, bytes: Int64) { (context.bases?.count ?? 0, context.bases?.totalBytes ?? 0) }
}

extension MetaKey {
    /// "1" while an agent runs on this database; found at start, the last run did not stop cleanly.
    static let running = "agent.running"
}
