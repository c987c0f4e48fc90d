import Foundation
import Glibc
import SinkiSupport

/// What one random operation did to a root, as the fault suite's op log keeps it. Paths are below
/// the root (the same on every agent), `/`-separated.
public struct FileOperation: Sendable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        case create, overwrite, append, truncate, delete, rename, mkdir, rmdir
        case removeTree = "rm-tree", renameFolder = "rename-dir", bulk, final
    }

    /// One version of a file the harness wrote, read back through the descriptor it wrote with.
    public struct Version: Sendable {
        public var path: String
        public var size: Int
        public var sha256: String
        /// The inode had no name any more when the harness closed it: something (the agent) put
        /// another file at the path while the harness was writing this one.
        public var orphaned: Bool
        /// The inode still had a name when the harness closed it, but not at the path: the agent moved
        /// the file (applying another device's rename) while the harness held it open, so the bytes went
        /// with it, as an editor's would. Kept if they are anywhere in the root, unless a later operation
        /// did away with them (`OperationLog.destroyed`).
        public var movedAway: Bool
        /// The SHA-256 of what the file held when the harness opened it; nil for a file it created.
        public var before: String?

        public init(path: String, size: Int, sha256: String, orphaned: Bool, movedAway: Bool = false, before: String? = nil) {
            (self.path, self.size, self.sha256, self.orphaned, self.movedAway, self.before) = (path, size, sha256, orphaned, movedAway, before)
        }
    }

    public var index: Int
    /// When it was carried out, in the agents' log format (UTC), to find it in their logs.
    public var time = Clock.iso8601(Clock.now())
    public var agent: String
    public var kind: Kind
    public var path: String
    public var destination: String?
    /// The operation did what it says (a failed one may still have touched paths; see `touched`).
    public var done = false
    /// The operation may have changed something on disk (a tree removal that failed half-way did).
    public var touched = false
    public var error: String?
    public var written: [Version] = []
    /// The SHA-256 of each file this operation did away with: deleted, removed with its folder, or
    /// replaced by a rename onto it (a write's old bytes are its version's `before`).
    public var destroyed: [String] = []
    /// A write that left the bytes as they were: no new version, no touch.
    public var unchanged = false

    public init(index: Int, agent: String, kind: Kind, path: String, destination: String? = nil) {
        (self.index, self.agent, self.kind, self.path, self.destination) = (index, agent, kind, path, destination)
    }

    public var description: String {
        var text = "#\(index) \(time.split(separator: "T").last ?? "") \(agent) \(kind.rawValue) \(path)"
        if let destination { text += " -> \(destination)" }
        if kind == .bulk { text += " (\(written.count) files)" } else if let version = written.first {
            text += " [\(version.size) B \(version.sha256.prefix(12))\(version.orphaned ? " ORPHANED" : "")\(version.movedAway ? " MOVED AWAY" : "")]"
        }
        if unchanged { text += " (bytes unchanged: no new version)" }
        if !done { text += " NOT DONE" + (error.map { ": \($0)" } ?? "") }
        return text
    }

    /// Whether this operation changed `path`, one of its ancestors or (for folders) what is below it,
    /// in the sense of check 2 (see `OperationLog.lastWrites`).
    public func touches(_ other: String) -> Bool {
        guard touched else { return false }
        func related(_ a: String, _ b: String) -> Bool { a == b || b.hasPrefix(a + "/") || a.hasPrefix(b + "/") }
        if kind == .bulk { return related(path, other) }
        return related(path, other) || (destination.map { related($0, other) } ?? false)
    }
}

/// The global, totally ordered log of operations: one harness issues them all, one at a time.
public final class OperationLog: @unchecked Sendable {
    // @unchecked: appended to and read by the one test that owns it, never concurrently.
    public private(set) var operations: [FileOperation] = []

    public init() {}

    public func append(_ operation: FileOperation) { operations.append(operation) }

    /// The versions the end state must keep: for each path P whose last touching operation was a
    /// content write by some agent X, that write's version.
    ///
    /// The rule (check 2 of the fault suite): an operation touches P when it writes P's content
    /// (create, overwrite, append, truncate), deletes P, renames P or one of P's ancestors away, renames
    /// something onto P or onto one of P's ancestors, or removes P or an ancestor (rmdir, tree removal).
    /// A mkdir touches only the folder it makes; a write that leaves the bytes as they were touches
    /// nothing (the agent rightly sees no change, so an earlier version stays the one to keep). If the last operation touching P, in the log's
    /// order and over all agents, is a content write by X, then what X wrote (hashed through the
    /// descriptor it wrote with, after writing: the agent never writes into an existing inode, it
    /// replaces by rename, so that descriptor still names X's version) must end up at P or in a
    /// conflict copy of P (`name.sync-conflict-…-DEVICE.ext`). A path touched later by any other
    /// operation is not held to this: a later rename, delete or write on any agent may rightly
    /// replace X's version. The harness never aims an operation at a conflict copy, so a conflict
    /// copy only disappears when its folder is touched, which touches P too.
    ///
    /// One exception: a write by X into a folder that another agent renamed away within the
    /// `raceWindow` operations before it is not held. X had not seen the rename yet; its write rightly
    /// follows the folder to its new name (and what happens there later is not tracked at P), or stays
    /// at P when X's agent moves the folder file by file. Both are right, and only the first is where
    /// the log would look. The roots must still agree with each other and with the server (checks 1, 3).
    public static let raceWindow = 300

    /// A second exception, the run rule: a change is a change of content (docs/planner.md, "What is a
    /// change"). An agent X sees only what its own disk holds: when X writes P several times, each
    /// write finding on disk what X's previous one left (nothing came from X's agent in between, so
    /// other agents' operations never reached X's file), and the last write leaves the bytes the run
    /// began from, X changed nothing, as a single write of the same bytes changes nothing
    /// (`unchanged`) — unless one of the versions on the way reached the server (`reachedServer`,
    /// every content id its store holds or held), in which case X's agent saw it and the last write is
    /// an edit like any other. A run begins again at each version that reached the server. P is then
    /// held to what the other operations made of it, as if X's run had not been (seed 41008: b, stopped,
    /// wrote a file it had sent and then put its bytes back, while c edited it and a deleted it).
    public typealias Held = (operation: FileOperation, version: FileOperation.Version)

    /// One agent's writes at one path, each finding on disk what the one before left.
    private struct Run {
        /// The bytes the run began from: the agent's disk held them, and its agent knew them.
        var base: String?
        /// What the agent's last write in the run left.
        var last: String
        /// The versions since `base`.
        var versions: [String]
        /// What P would be held to without the run's writes (kept up to date by the other operations).
        var shadow: Held?
    }

    public func lastWrites(reachedServer: Set<String> = []) -> [String: Held] {
        var held: [String: Held] = [:]
        var runs: [String: [String: Run]] = [:] // by path, then agent
        /// Sets what P is held to (and, with `below`, what is below it), for the other agents' runs too.
        func hold(_ path: String, _ value: Held?, below: Bool = false, except agent: String? = nil) {
            held[path] = value
            for other in (runs[path] ?? [:]).keys where other != agent { runs[path]?[other]?.shadow = value }
            guard below else { return }
            for key in held.keys where key.hasPrefix(path + "/") { held[key] = nil }
            for key in runs.keys where key.hasPrefix(path + "/") {
                for other in runs[key]!.keys { runs[key]?[other]?.shadow = nil }
            }
        }
        func forget(_ path: String, below: Bool) { hold(path, nil, below: below) }
        func write(_ operation: FileOperation, _ version: FileOperation.Version) {
            let path = version.path, agent = operation.agent
            let value: Held = (operation, version)
            let reached = reachedServer.contains(version.sha256)
            if var run = runs[path]?[agent], version.before == run.last {
                if version.sha256 == run.base && !run.versions.contains(where: reachedServer.contains) {
                    held[path] = run.shadow
                    runs[path]?[agent] = Run(base: run.base, last: version.sha256, versions: [], shadow: run.shadow)
                    return
                }
                run.last = version.sha256
                if reached { (run.base, run.versions, run.shadow) = (version.sha256, [], value) } else { run.versions.append(version.sha256) }
                runs[path]?[agent] = run
            } else {
                runs[path, default: [:]][agent] = reached ? Run(base: version.sha256, last: version.sha256, versions: [], shadow: value)
                    : Run(base: version.before, last: version.sha256, versions: [version.sha256], shadow: held[path])
            }
            hold(path, value, except: agent)
        }
        var folderRenames: [(index: Int, agent: String, source: String)] = []
        func racesARename(_ operation: FileOperation, _ path: String) -> Bool {
            folderRenames.contains { rename in
                rename.agent != operation.agent && operation.index - rename.index <= Self.raceWindow && path.hasPrefix(rename.source + "/")
            }
        }
        for operation in operations where operation.touched {
            if operation.kind == .renameFolder { folderRenames.append((operation.index, operation.agent, operation.path)) }
            switch operation.kind {
            case .create, .overwrite, .append, .truncate, .final:
                for version in operation.written {
                    if racesARename(operation, version.path) {
                        runs[version.path]?[operation.agent] = nil
                        forget(version.path, below: false)
                    } else {
                        write(operation, version)
                    }
                }
            case .delete, .rmdir, .removeTree:
                forget(operation.path, below: true)
            case .rename, .renameFolder:
                forget(operation.path, below: true)
                if let destination = operation.destination { forget(destination, below: true) }
            case .mkdir:
                forget(operation.path, below: false)
            case .bulk:
                forget(operation.path, below: false)
                for version in operation.written where !racesARename(operation, version.path) {
                    runs[version.path]?[operation.agent] = nil
                    hold(version.path, (operation, version))
                }
            }
        }
        return held
    }

    /// Whether an operation after `index` did away with the bytes `sha256` (deleted, removed or replaced
    /// a file holding them, or wrote over them): a version the agent carried elsewhere while it was
    /// written (`movedAway`) is then rightly gone, through a path the log does not follow it to.
    public func destroyed(_ sha256: String, after index: Int) -> Bool {
        operations.contains { operation in
            operation.index > index && operation.touched
                && (operation.destroyed.contains(sha256) || operation.written.contains { $0.before == sha256 })
        }
    }

    /// The operations that touched `path` (or its ancestors, or what is below it), oldest first.
    public func history(of path: String) -> [FileOperation] { operations.filter { $0.touches(path) } }
}

/// What is in a root at one moment, as the harness chooses from it: folders (with whether they are
/// empty) and files, sorted, without sinkid's temporary files and without conflict copies.
public struct RootListing {
    public var folders: [(path: String, depth: Int, empty: Bool)] = [("", 0, false)]
    public var files: [(path: String, size: Int)] = []

    public init(_ root: String) {
        var pending: [(String, Int)] = [("", 0)]
        var found: [(String, Int, Bool)] = []
        while let (relative, depth) = pending.popLast() {
            let names = directoryEntries(relative.isEmpty ? root : root + "/" + relative)
            if !relative.isEmpty { found.append((relative, depth, names.isEmpty)) }
            for (name, isDirectory) in names where !name.hasPrefix(".sinki-tmp-") && !name.contains(".sync-conflict-") {
                let path = relative.isEmpty ? name : relative + "/" + name
                if isDirectory {
                    pending.append((path, depth + 1))
                } else {
                    var info = stat()
                    if lstat(root + "/" + path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG { files.append((path, Int(info.st_size))) }
                }
            }
        }
        folders += found.sorted { $0.0 < $1.0 }.map { (path: $0.0, depth: $0.1, empty: $0.2) }
        files.sort { $0.path < $1.path }
    }
}

/// The names in a folder with whether each is a folder (not following links); empty if unreadable.
public func directoryEntries(_ path: String) -> [(name: String, isDirectory: Bool)] {
    guard let directory = opendir(path) else { return [] }
    defer { closedir(directory) }
    var out: [(String, Bool)] = []
    while let entry = readdir(directory) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        if name == "." || name == ".." { continue }
        var isDirectory = entry.pointee.d_type == UInt8(DT_DIR)
        if entry.pointee.d_type == UInt8(DT_UNKNOWN) {
            var info = stat()
            isDirectory = lstat(path + "/" + name, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
        }
        out.append((name, isDirectory))
    }
    return out
}

/// Random operations over several roots (one per agent), each chosen from what is on disk in that
/// root at that moment, so they stay meaningful while sync changes the trees. Every choice comes from
/// one seeded stream, and every operation takes exactly three values from it (agent, kind, and the
/// seed of everything else), so the sequence of agents and kinds of a seed never depends on timing;
/// which paths they hit does, since it depends on what has synced.
///
/// No `[merge]` rule is configured by the suite, so every path is `keep-both`: a version either
/// stays at its path or becomes a conflict copy, never a merge of two.
public final class RandomOperations: @unchecked Sendable {
    // @unchecked: driven by the one test that owns it, one operation at a time.
    public let roots: [(agent: String, path: String)]
    public let log = OperationLog()
    public static let maxSize = 3 << 19 // 1.5 MiB
    private var random: SeededRandom

    static let fileNames = ["a.txt", "b.txt", "notes.md", "data.bin", "img.bin", "save1.save", "save2.save", "Makefile",
                            ".hidden", "report.final.txt", "é ü.txt", "x y.bin", "log", "c.json"]
    static let folderNames = ["d1", "d2", "d3", "sub", "Saves", "x y", "ü"]
    static let maxDepth = 3

    /// Which operations are drawn, and how often.
    public enum Mix: String, Sendable {
        /// Everything, folders included: renames and removals of whole folders, now and then a
        /// folder of hundreds of files at once.
        case all
        /// Files only (and empty folders made and removed): no folder is renamed or removed whole.
        case files

        /// Kinds and their weights (per thousand).
        var kinds: [(FileOperation.Kind, Int)] {
            switch self {
            case .all:
                [(.create, 230), (.overwrite, 130), (.append, 120), (.truncate, 70), (.delete, 90), (.rename, 100),
                 (.mkdir, 90), (.rmdir, 50), (.removeTree, 25), (.renameFolder, 94), (.bulk, 1)]
            case .files:
                [(.create, 280), (.overwrite, 170), (.append, 150), (.truncate, 90), (.delete, 110), (.rename, 120),
                 (.mkdir, 60), (.rmdir, 20)]
            }
        }
    }

    private let kinds: [(FileOperation.Kind, Int)]

    public init(roots: [(agent: String, path: String)], seed: UInt64, mix: Mix = .all) {
        self.roots = roots
        random = SeededRandom(seed: seed)
        kinds = mix.kinds
    }

    /// Chooses and carries out operation number `index`; it is in the log when this returns.
    @discardableResult
    public func next(_ index: Int) -> FileOperation {
        let which = random.below(roots.count)
        let kind = kinds[random.weighted(kinds.map(\.1))].0
        var local = SeededRandom(seed: random.next())
        let operation = perform(kind, index: index, root: roots[which], random: &local)
        log.append(operation)
        return operation
    }

    /// Agent `agent` writes `path` (the suite's last file per agent), outside the random stream.
    @discardableResult
    public func writeFinal(_ index: Int, agent: String, path: String) -> FileOperation {
        let root = roots.first { $0.agent == agent }!
        var operation = FileOperation(index: index, agent: agent, kind: .final, path: path)
        write(&operation, root: root.path, path: path, create: true,
              .replace(Array("final file of \(agent), written after every fault healed (op \(index))\n".utf8)))
        log.append(operation)
        return operation
    }

    private func perform(_ kind: FileOperation.Kind, index: Int, root: (agent: String, path: String),
                         random: inout SeededRandom) -> FileOperation {
        let listing = RootListing(root.path)
        var operation = FileOperation(index: index, agent: root.agent, kind: kind, path: "")
        let header = Array("op \(index) by \(root.agent)\n".utf8)
        func pick<T>(_ items: [T]) -> T? { items.isEmpty ? nil : items[random.below(items.count)] }
        func join(_ folder: String, _ name: String) -> String { folder.isEmpty ? name : folder + "/" + name }
        let roomy = listing.folders.filter { $0.depth < Self.maxDepth }
        switch kind {
        case .create:
            let folder = pick(listing.folders)!.path
            operation.path = join(folder, Self.fileNames[random.below(Self.fileNames.count)])
            let size = Self.size(&random)
            write(&operation, root: root.path, path: operation.path, create: true, .replace(Self.content(header, size, &random)))
        case .overwrite:
            guard let file = pick(listing.files) else { return skipped(operation, "no file") }
            operation.path = file.path
            let size = Self.size(&random)
            write(&operation, root: root.path, path: file.path, create: false, .replace(Self.content(header, size, &random)))
        case .append:
            guard let file = pick(listing.files) else { return skipped(operation, "no file") }
            operation.path = file.path
            let wanted = random.chance(0.8) ? random.int(in: 1...4096) : random.int(in: 4097...(256 << 10))
            let count = max(1, min(wanted, Self.maxSize - file.size))
            write(&operation, root: root.path, path: file.path, create: false, .append(Self.content(header, count, &random)))
        case .truncate:
            guard let file = pick(listing.files) else { return skipped(operation, "no file") }
            operation.path = file.path
            let length = file.size == 0 ? random.int(in: 1...4096) : random.below(file.size)
            write(&operation, root: root.path, path: file.path, create: false, .truncate(length))
        case .delete:
            guard let file = pick(listing.files) else { return skipped(operation, "no file") }
            operation.path = file.path
            let held = Self.hash(root.path + "/" + file.path)
            call(&operation, "unlink") { unlink(root.path + "/" + file.path) }
            if operation.done, let held { operation.destroyed = [held] }
        case .rename:
            guard let file = pick(listing.files) else { return skipped(operation, "no file") }
            operation.path = file.path
            operation.destination = join(pick(listing.folders)!.path, Self.fileNames[random.below(Self.fileNames.count)])
            let destination = operation.destination!
            if destination == file.path { return skipped(operation, "same name") }
            let replaced = Self.hash(root.path + "/" + destination)
            call(&operation, "rename") { rename(root.path + "/" + file.path, root.path + "/" + destination) }
            if operation.done, let replaced { operation.destroyed = [replaced] }
        case .mkdir:
            let folder = pick(roomy)!.path
            let path = join(folder, Self.folderNames[random.below(Self.folderNames.count)])
            operation.path = path
            call(&operation, "mkdir") { mkdir(root.path + "/" + path, 0o755) }
        case .rmdir:
            // An empty folder when there is one: rmdir of a full one fails and says nothing.
            let empty = listing.folders.dropFirst().filter(\.empty)
            guard let folder = pick(empty.isEmpty ? Array(listing.folders.dropFirst()) : Array(empty)) else { return skipped(operation, "no folder") }
            operation.path = folder.path
            call(&operation, "rmdir") { Glibc.rmdir(root.path + "/" + folder.path) }
        case .removeTree:
            guard let folder = pick(Array(listing.folders.dropFirst())) else { return skipped(operation, "no folder") }
            operation.path = folder.path
            // Touched even when it fails half-way: whatever was removed is gone.
            operation.touched = true
            let failures = Self.removeTree(root.path + "/" + folder.path, destroyed: &operation.destroyed)
            operation.done = failures.isEmpty
            if !failures.isEmpty { operation.error = failures.prefix(3).joined(separator: "; ") }
        case .renameFolder:
            guard let folder = pick(Array(listing.folders.dropFirst())) else { return skipped(operation, "no folder") }
            operation.path = folder.path
            let into = pick(roomy.filter { $0.path != folder.path && !$0.path.hasPrefix(folder.path + "/") })?.path ?? ""
            operation.destination = join(into, Self.folderNames[random.below(Self.folderNames.count)])
            let destination = operation.destination!
            if destination == folder.path { return skipped(operation, "same name") }
            call(&operation, "rename") { rename(root.path + "/" + folder.path, root.path + "/" + destination) }
        case .bulk:
            // One folder of many small files at once (a big folder to rename or remove later).
            let path = join(pick(roomy)!.path, "bulk\(index)")
            operation.path = path
            call(&operation, "mkdir") { mkdir(root.path + "/" + path, 0o755) }
            guard operation.done else { return operation }
            for number in 0..<random.int(in: 200...1200) {
                var one = FileOperation(index: index, agent: root.agent, kind: .create, path: operation.path + "/f\(number).txt")
                write(&one, root: root.path, path: one.path, create: true, .replace(Self.content(header, random.below(2048), &random)))
                operation.written += one.written
            }
        case .final:
            fatalError("bug: .final is written by writeFinal")
        }
        return operation
    }

    private func skipped(_ operation: FileOperation, _ why: String) -> FileOperation {
        var operation = operation
        operation.error = why
        return operation
    }

    /// Runs one system call for `operation`; done and touched when it returns 0.
    private func call(_ operation: inout FileOperation, _ name: String, _ body: () -> Int32) {
        if body() == 0 {
            operation.done = true
            operation.touched = true
        } else {
            operation.error = "\(name): \(String(cString: strerror(errno)))"
        }
    }

    enum Change {
        case replace([UInt8])
        case append([UInt8])
        case truncate(Int)
    }

    /// Opens `path` (creating it when `create` says so), reads what it holds, makes `change`, then
    /// reads the file back through the same descriptor and records its size and SHA-256: the version
    /// this write made. A write that leaves the bytes as they were (a 0-byte file written empty
    /// again) makes no new version: the agent rightly sees no change, so the operation counts as not
    /// touching the path (`unchanged`).
    private func write(_ operation: inout FileOperation, root: String, path: String, create: Bool, _ change: Change) {
        let full = root + "/" + path
        var existed = true
        var fd = open(full, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        if fd < 0 && errno == ENOENT && create {
            existed = false
            fd = open(full, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_CREAT | O_EXCL, 0o644)
            if fd < 0 && errno == EEXIST {
                existed = true // made meanwhile (by the agent): written over like any file
                fd = open(full, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
            }
        }
        guard fd >= 0 else {
            operation.error = "open: \(String(cString: strerror(errno)))"
            return
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            operation.error = "not a regular file"
            return
        }
        let before = existed ? Self.readAll(fd) : nil
        operation.touched = true
        var failure: String?
        func put(_ bytes: [UInt8], at start: Int) {
            var offset = 0
            while offset < bytes.count {
                let wrote = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress!.advanced(by: offset), bytes.count - offset, off_t(start + offset)) }
                if wrote <= 0 { failure = "write: \(String(cString: strerror(errno)))"; return }
                offset += wrote
            }
        }
        switch change {
        case let .replace(bytes):
            if ftruncate(fd, 0) != 0 { failure = "ftruncate: \(String(cString: strerror(errno)))" } else { put(bytes, at: 0) }
        case let .append(bytes):
            put(bytes, at: before?.count ?? 0)
        case let .truncate(length):
            if ftruncate(fd, off_t(length)) != 0 { failure = "ftruncate: \(String(cString: strerror(errno)))" }
        }
        // Read back through this descriptor: the bytes of this inode, whatever is at the path now.
        let content = Self.readAll(fd)
        _ = fstat(fd, &info)
        var atPath = stat()
        let movedAway = info.st_nlink > 0 && (lstat(full, &atPath) != 0 || atPath.st_ino != info.st_ino || atPath.st_dev != info.st_dev)
        operation.written = [FileOperation.Version(path: path, size: content.count, sha256: ContentID.of(content),
                                                   orphaned: info.st_nlink == 0, movedAway: movedAway,
                                                   before: before.map { ContentID.of($0) })]
        operation.done = failure == nil
        operation.error = failure
        if before == content {
            operation.unchanged = true
            operation.touched = false
        }
    }

    /// The SHA-256 of the regular file at `path`; nil when there is none.
    static func hash(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return ContentID.of(readAll(fd))
    }

    static func readAll(_ fd: Int32) -> [UInt8] {
        var content: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 256 << 10)
        while true {
            let got = chunk.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(content.count)) }
            if got <= 0 { return content }
            content += chunk[..<got]
        }
    }

    /// Removes a folder and everything below it; the failures, empty if all went.
    static func removeTree(_ path: String, destroyed: inout [String]) -> [String] {
        var failures: [String] = []
        for (name, isDirectory) in directoryEntries(path) {
            let child = path + "/" + name
            if isDirectory {
                failures += removeTree(child, destroyed: &destroyed)
                continue
            }
            let held = hash(child)
            if unlink(child) == 0 {
                if let held { destroyed.append(held) }
            } else if errno != ENOENT {
                failures.append("unlink \(name): \(String(cString: strerror(errno)))")
            }
        }
        if Glibc.rmdir(path) != 0 && errno != ENOENT { failures.append("rmdir: \(String(cString: strerror(errno)))") }
        return failures
    }

    /// A file size: many small files, some near the suite's 64 KiB inline limit, a fifth above it
    /// (those travel through tus), up to 1.5 MiB.
    static func size(_ random: inout SeededRandom) -> Int {
        switch random.weighted([8, 30, 27, 15, 20]) {
        case 0: return 0
        case 1: return random.int(in: 1...512)
        case 2: return random.int(in: 513...(16 << 10))
        case 3: return random.chance(0.15) ? [65535, 65536, 65537][random.below(3)] : random.int(in: (16 << 10)...(64 << 10))
        default: return random.int(in: (64 << 10 + 1)...maxSize)
        }
    }

    /// `count` bytes starting with `header` (which operation wrote them), the rest from the stream.
    static func content(_ header: [UInt8], _ count: Int, _ random: inout SeededRandom) -> [UInt8] {
        guard count > header.count else { return Array(header.prefix(count)) }
        return header + random.bytes(count - header.count)
    }
}
