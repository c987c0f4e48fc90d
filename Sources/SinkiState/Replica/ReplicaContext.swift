import Glibc
import SinkiMerge
import SinkiPlan
import SinkiRecord
import SinkiSupport

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

/// What the replica's parts share: the state database, the roots as opened, the ignore rules and the
/// device's name. One instance per replica, confined to the replica's queue like everything in it.
final class ReplicaContext {
    let store: StateStore
    let roots: [RootSpec]
    var safeRoots: [SafeRoot]
    let rootIndex: [String: Int]
    let device: String
    let logger: Logger
    /// Tells the watcher which events the replica's own writes will cause.
    let watch: (any WatchLink)?
    /// Which paths below each root are not synced.
    var ignores: [IgnoreRules]
    /// Files up to this size travel inline in their record.
    var inlineLimit: Int64 = 256 << 10
    /// Which extended attributes sync from this device (`[transfer] xattrs`).
    var xattrs = XattrPolicy()
    /// The merge type stamped on a file's record, chosen by its path (merge rules, issue 5).
    var typeFor: @Sendable (String) -> String
    /// Which `[merge]` rule settles a conflict on a path (a reload replaces them).
    var rules = MergeRules()
    /// Last shared versions of files whose rule merges three ways; nil until `openMergeState`.
    var bases: BaseCache?
    /// Where `ask` keeps both versions of a conflict aside (`STATE/conflicts`); nil until `openMergeState`.
    var conflictsDirectory: String?
    /// Roots whose ignore rules changed: walked again so that paths no longer ignored are found.
    var rescanNeeded: Set<RootID> = []
    /// Renames the watcher saw as such (a cookie pair), new path to old: an observation the scheduler
    /// takes as the rename's source before looking for one by content.
    var moveHints: [String: String] = [:] {
        didSet { if moveHints.isEmpty { moveSources.removeAll() } }
    }
    /// The same, old path to new.
    var moveSources: [String: String] = [:]
    /// Paths whose local version was just kept aside as a conflict copy: the remote version that
    /// takes the path next is reported as a conflict, not a plain change.
    var keptAside = PathSet()
    /// Paths whose delete was sent from here and found the server holding a tombstone already, with
    /// what was agreed on there before: the user deleted that here, so a peer's rename of it read later
    /// is followed by the delete. In memory only: after a restart nothing says the delete was not this
    /// agent's own.
    var deletedHere: [PathKey: Node] = [:]

    init(store: StateStore, roots: [RootSpec], device: String, logger: Logger, watch: (any WatchLink)?,
         typeFor: @escaping @Sendable (String) -> String) throws {
        self.store = store
        self.roots = roots
        var opened: [SafeRoot] = []
        for root in roots { opened.append(try SafeRoot(path: root.path)) }
        safeRoots = opened
        rootIndex = Dictionary(uniqueKeysWithValues: roots.enumerated().map { ($1.name, $0) })
        self.device = device
        self.logger = logger
        self.watch = watch
        self.typeFor = typeFor
        ignores = zip(roots, opened).map { Self.rules(for: $0.0, in: $0.1) }
    }

    // MARK: Paths

    /// The local path of a record path; nil for roots not synced here.
    func locate(_ path: RecordPath) -> LocalPath? {
        guard let index = rootIndex[path.root] else { return nil }
        return LocalPath(RootID(index), path.relative)
    }

    /// The local path of a record path given as text; nil when it is no valid record path or its root
    /// is not synced here.
    func locate(_ path: String) -> LocalPath? {
        (try? RecordPath(validating: path)).flatMap(locate)
    }

    func recordPath(_ path: LocalPath) -> String { roots[path.root.index].name + "/" + path.relative }
    func diskPath(_ path: LocalPath) -> String { roots[path.root.index].path + "/" + path.relative }

    /// The directory where checked downloads wait (`STATE/downloads`).
    var downloadsDirectory: String {
        let state = store.path.lastIndex(of: "/").map { String(store.path[..<$0]) } ?? "."
        return state + "/downloads"
    }

    /// What is at `path` on disk now (nil: nothing, or a symlink on the way).
    func entry(_ path: LocalPath) -> FileStat? {
        try? safeRoots[path.root.index].stat(path.relative)
    }

    // MARK: Ignore rules

    static func rules(for root: RootSpec, in safeRoot: SafeRoot) -> IgnoreRules {
        var text: String?
        if let file = try? safeRoot.open(IgnoreRules.fileName, flags: O_RDONLY), let bytes = try? file.readAll() {
            text = String(decoding: bytes, as: UTF8.self)
        }
        return IgnoreRules(config: root.ignore, fileText: text)
    }

    /// Reads a root's `.sinkiignore` again; true if the rules changed.
    @discardableResult
    func reloadIgnores(_ root: RootID) -> Bool {
        let rules = Self.rules(for: roots[root], in: safeRoots[root])
        guard rules != ignores[root] else { return false }
        ignores[root] = rules
        return true
    }

    /// Whether a path is ignored (or lies in an ignored directory); with `isDirectory` nil, as a folder
    /// or as a file: either form of a name counts.
    func isIgnored(_ path: LocalPath, isDirectory: Bool? = nil) -> Bool {
        let rules = ignores[path.root]
        if let isDirectory { return rules.isIgnoredWithParents(path.relative, isDirectory: isDirectory) }
        return rules.isIgnoredWithParents(path.relative, isDirectory: false) || rules.isIgnoredWithParents(path.relative, isDirectory: true)
    }

    /// Notes that `path` was written or looked at; a root's `.sinkiignore` reloads its rules.
    func touched(_ path: String) {
        guard path.hasSuffix("/" + IgnoreRules.fileName), let local = locate(path), local.relative == IgnoreRules.fileName else { return }
        if reloadIgnores(local.root) {
            logger.info("\(quoted(roots[local.root].path + "/" + IgnoreRules.fileName)) changed; walking the root again")
            rescanNeeded.insert(local.root)
        }
    }
}

extension ReplicaContext {
    /// Says once, when a path first fails, why it cannot be written or sent: at ERROR when it needs
    /// someone (a full disk, a permission, a symlink in the way, a refusal), else at INFO (it passes on
    /// its own: a file being written, a disk that moved under the write).
    func logFailure(_ path: String, _ failure: ApplyFailure, attempts: Int) {
        guard attempts == 1 else { return }
        switch failure.cause {
        case .busy, .changedHere, .folderGone, .sourceGone, .contentMissing, .conflict:
            logger.info("cannot apply \(quoted(path)) yet: \(failure.message)")
        default:
            logger.error("cannot apply \(quoted(path)): \(failure.message)")
        }
    }
}
