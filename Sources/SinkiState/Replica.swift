import Glibc
import SinkiConfig
import SinkiLoop
import SinkiMerge
import SinkiRecord
import SinkiSupport
import SinkiWatch

/// A synced folder: its name (the first component of its record paths) and where it is on disk.
public struct RootSpec: Sendable, Equatable {
    public var name: String
    public var path: String
    /// `ignore =` patterns from the config (the root's `.sinkiignore` adds to them).
    public var ignore: [String]
    public init(name: String, path: String, ignore: [String] = []) {
        self.name = name
        self.path = path
        self.ignore = ignore
    }
}

/// A small file's content as hashed, compressed, with the stat it was read at.
struct CachedContent {
    var stat: FileStat
    var sha256: String
    var data: [UInt8]

    /// What the entry costs the cache's budget: its data, and what keeping it costs beside that (its
    /// key, hash and array headers). For files of a few bytes the overhead is most of it: counting data
    /// alone let 16 MiB of budget hold some 70 MiB at a million small files.
    var cost: Int { data.count + 256 }
}

/// A path changed on this machine since the last version both sides shared, while another version
/// came from the server.
public struct Conflict: Sendable, Equatable {
    public var local: KnownFile
    public var remote: Record

    public init(local: KnownFile, remote: Record) {
        self.local = local
        self.remote = remote
    }
}

/// The local copy of every synced root: the disk and the state database, kept in step.
///
/// Everything here blocks (SQLite, hashing, file writes), so the actor runs on its own serial
/// queue, off the event loop. Being serial is also what keeps a remote write and the local check
/// of the same path from interleaving: the watcher's look at a file the replica just wrote runs
/// after the write is recorded, so the agent's own writes never echo back as changes.
public actor Replica {
    private let executor = QueueExecutor(label: "sinki-replica")
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    let store: StateStore
    public nonisolated let roots: [RootSpec]
    var safeRoots: [SafeRoot]
    let rootIndex: [String: Int]
    let device: String
    let inotify: Inotify?
    /// Tells the watcher which events the replica's own writes will cause.
    let echoes: EchoFilter?
    let logger: Logger
    /// The merge type stamped on a file's record, chosen by its path (merge rules, issue 5).
    var typeFor: @Sendable (String) -> String
    /// Which `[merge]` rule settles a conflict on a path (a reload replaces them).
    var rules = MergeRules()
    /// Last shared versions of files whose rule merges three ways; nil until `openMergeState`.
    var bases: BaseCache?
    /// Where `ask` keeps both versions of a conflict aside (`STATE/conflicts`); nil until `openMergeState`.
    var conflictsDirectory: String?
    /// Paths that changed while being read; the agent looks at them again after a delay.
    var unstable: [(root: Int, relative: String)] = []
    /// New files with temporary-looking names a walk skipped; looked at after their grace period.
    var deferred: [(root: Int, relative: String)] = []
    /// Content read and compressed while hashing, kept for the push that follows so a new file is
    /// read once; bounded by `pushCacheLimit` bytes.
    /// Local changes the server has taken since this replica opened: with the outbox's count, read in
    /// one turn of the actor, it tells how far a run of sending is.
    public internal(set) var savedTotal = 0
    var pushCache: [String: CachedContent] = [:]
    var pushCacheBytes = 0
    /// Directories per root left without a watch (the limit was reached): walked periodically.
    public internal(set) var unwatchedDirectories: [Set<String>]
    /// Paths whose synced content vanished lately, by hash: rename sources without a cookie pair.
    var recentlyGone: [String: [RecentlyGone]] = [:]
    /// How long an entry of `recentlyGone` is a rename candidate (`Replica+Move.swift`).
    var moveWindow = Replica.defaultMoveWindow
    /// Which paths below each root are not synced.
    public internal(set) var ignores: [IgnoreRules]
    /// Files up to this size travel inline in their record.
    public internal(set) var inlineLimit: Int64 = 256 << 10
    /// The tus endpoint larger files are uploaded to (`Replica+Uploads.swift`).
    var uploadEndpoint = ""
    /// Enough for the batches a push pipeline holds; more only keeps memory busy on a big scan.
    static let pushCacheLimit = 16 << 20
    /// Local names that cannot be record paths (invalid UTF-8, a backslash), and special files.
    public internal(set) var skipped: Set<String> = []
    /// Per root, the entries its last whole walk left out by ignore rules.
    var ignoredCounts: [Int: Int] = [:]
    /// What the last warning about changes held back behind unsendable ones named, so it is said once.
    var heldWarning: String?

    public init(statePath: String, roots: [RootSpec], device: String, inotify: Inotify?, echoes: EchoFilter? = nil, logger: Logger,
                typeFor: @escaping @Sendable (String) -> String = { _ in Record.defaultType }) throws {
        store = try StateStore(path: statePath)
        // Manifests of versions no longer here name chunks nobody can read any more.
        try store.pruneManifests()
        self.roots = roots
        var opened: [SafeRoot] = []
        for root in roots { opened.append(try SafeRoot(path: root.path)) }
        safeRoots = opened
        rootIndex = Dictionary(uniqueKeysWithValues: roots.enumerated().map { ($1.name, $0) })
        self.device = device
        self.inotify = inotify
        self.echoes = echoes
        self.logger = logger
        self.typeFor = typeFor
        ignores = zip(roots, opened).map { Self.rules(for: $0.0, in: $0.1) }
        unwatchedDirectories = roots.map { _ in [] }
        cleanTemporaries = Set(roots.indices)
    }

    /// Roots the user confirmed may be empty: their next walk records deletes.
    var confirmedEmpty: Set<Int> = []
    /// Roots whose first whole walk since the start has not run yet: it removes leftover temporaries.
    var cleanTemporaries: Set<Int> = []
    /// Roots whose ignore rules changed (their `.sinkiignore` was edited here or arrived): walk them
    /// again so that paths no longer ignored are found.
    var rescanNeeded: Set<Int> = []

    /// Reads a root's `.sinkiignore` and combines it with the config's patterns; true if the rules
    /// changed.
    @discardableResult
    public func reloadIgnores(root: Int) -> Bool {
        let rules = Self.rules(for: roots[root], in: safeRoots[root])
        guard rules != ignores[root] else { return false }
        ignores[root] = rules
        return true
    }

    static func rules(for root: RootSpec, in safeRoot: SafeRoot) -> IgnoreRules {
        var text: String?
        if let file = try? safeRoot.open(IgnoreRules.fileName, flags: O_RDONLY), let bytes = try? file.readAll() {
            text = String(decoding: bytes, as: UTF8.self)
        }
        return IgnoreRules(config: root.ignore, fileText: text)
    }

    /// Notes that `path` was written or looked at; a root's `.sinkiignore` reloads its rules.
    func touched(_ path: String) {
        guard path.hasSuffix("/" + IgnoreRules.fileName), let local = (try? RecordPath(validating: path)).flatMap(locate),
              local.relative == IgnoreRules.fileName else { return }
        let root = local.root.index
        if reloadIgnores(root: root) {
            logger.info("\(quoted(roots[root].path + "/" + IgnoreRules.fileName)) changed; walking the root again")
            rescanNeeded.insert(root)
        }
    }

    /// Directories left unwatched by the limit, to walk again (each walk retries their watch).
    public func takeUnwatched() -> [(root: Int, relative: String)] {
        var out: [(root: Int, relative: String)] = []
        for (root, paths) in unwatchedDirectories.enumerated() {
            out += paths.map { (root, $0) }
            unwatchedDirectories[root].removeAll()
        }
        return out
    }

    /// Roots to walk again because their ignore rules changed.
    public func takeRescans() -> Set<Int> {
        defer { rescanNeeded.removeAll() }
        return rescanNeeded
    }

    /// Opens a root again (after it was removed and made again, or remounted).
    public func reopen(root: Int) throws {
        safeRoots[root] = try SafeRoot(path: roots[root].path)
        reloadIgnores(root: root)
    }

    /// Whether a path below a root is ignored (or lies in an ignored directory).
    func isIgnored(root: Int, relative: String, isDirectory: Bool) -> Bool {
        ignores[root].isIgnoredWithParents(relative, isDirectory: isDirectory)
    }

    // MARK: small facts

    public func feedToken(server: String) throws -> String? {
        guard try store.meta(MetaKey.feedServer) == server else { return nil }
        return try store.meta(MetaKey.feedToken)
    }

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
                try store.clearRemote()
                try store.setMeta(MetaKey.remoteSeeded, nil)
            }
        }
    }

    /// Whether the Remote tree holds everything the feed position moved past (false on a database
    /// upgraded from before it existed, or after the feed started over, until a full listing ran).
    public var remoteSeeded: Bool { (try? store.meta(MetaKey.remoteSeeded)) != "0" }

    /// Notes that a full listing of every root filled the Remote tree.
    public func markRemoteSeeded() throws { try store.setMeta(MetaKey.remoteSeeded, nil) }

    public var pendingCount: Int { store.outboxCount }

    /// Nothing local to send and nothing remote to apply (cheap: it looks at one row of each).
    public var isSettled: Bool { !store.hasEntriesToSend && !store.hasUnapplied }

    /// `isSettled`, but for local changes held by a conflict waiting for `sinkid resolve`: those are no
    /// work under way (they go only once it is resolved).
    public var isSettledBesideConflicts: Bool {
        let sending = (try? store.database.scalar("""
            SELECT EXISTS (SELECT 1 FROM outbox o WHERE o.last_error IS NULL
                           AND NOT EXISTS (SELECT 1 FROM conflicts c WHERE c.path = o.path))
            """)) == 1
        return !sending && !store.hasUnapplied
    }

    public func knownFile(_ path: String) throws -> KnownFile? { try store.file(path) }

    /// Makes the next look at `path` read and hash it whatever its stat says: its content was found to
    /// be other than the hash recorded for it (an upload's bytes hashed to something else). Two writes
    /// of the same size within one tick of the file system's clock leave size, mtime, ctime and inode
    /// as they were, so the stat alone would keep the wrong hash forever.
    public func distrustStat(_ path: String) throws {
        guard var row = try store.file(path), row.present, row.kind == .file else { return }
        row.ctime = 0
        try store.saveFile(row)
    }

    public func outboxEntry(_ path: String) throws -> OutboxEntry? { try store.outboxEntry(path) }

    /// Paths that changed while being read since the last call.
    public func takeUnstable() -> [(root: Int, relative: String)] {
        defer { unstable.removeAll() }
        return unstable
    }

    /// Young temporary-looking files a walk skipped, to look at once their grace is over.
    public func takeDeferred() -> [(root: Int, relative: String)] {
        defer { deferred.removeAll() }
        return deferred
    }

    func recordPath(root: Int, relative: String) -> String { roots[root].name + "/" + relative }

    /// The local path of a record path; nil for roots not synced here.
    func locate(_ path: RecordPath) -> LocalPath? {
        guard let index = rootIndex[path.root] else { return nil }
        return LocalPath(RootID(index), path.relative)
    }
}
