import SinkiPlan
import SinkiRecord

/// The synced folder's name in every simulated world.
let simRoot = "R"

/// The paths a history draws from: a small name space, so that edits, renames and type changes collide.
let basePaths: [RecordPath] = {
    var out: [RecordPath] = []
    func add(_ prefix: String, depth: Int) {
        for name in ["a", "b", "c"] {
            let path = try! RecordPath(validating: prefix + "/" + name)
            out.append(path)
            if depth < 3 { add(path.string, depth: depth + 1) }
        }
    }
    add(simRoot, depth: 1)
    return out
}()

/// One record as the simulated server keeps it: its latest version only, as the real store does.
struct ServerRecord: Equatable {
    var tag: Int64
    var node: Node?
    var modifiedAt: Int64
    var movedFrom: RecordPath?
    /// The version this one replaced (`RemoteEntry.replaced`).
    var replaced: Node?

    var remoteEntry: RemoteEntry {
        RemoteEntry(tag: ChangeTag(tag), node: node, modifiedAt: modifiedAt, movedFrom: movedFrom, replaced: replaced)
    }
}

/// One thing on the simulated disk.
struct DiskItem: Equatable {
    var node: Node
    var modifiedAt: Int64
}

/// An in-memory world for one case: the server, this device's disk, and the agent's three trees, all
/// indexed by interned path ids so that a case costs microseconds, not milliseconds.
final class World {
    var paths: [RecordPath] = []
    var parentOf: [Int] = []
    var index: [RecordPath: Int] = [:]

    var server: [ServerRecord?] = []
    var serverHead: Int64 = 0
    var disk: [DiskItem?] = []

    var remote: [RemoteEntry?] = []
    var local: [LocalEntry?] = []
    var synced: [SyncedEntry?] = []
    /// Saves made whose answer was not recorded (`PathEntries.sent`).
    var sent: [[Node]] = []
    /// The change feed's position: every record with a tag up to here has been read into Remote.
    var feedToken: Int64 = 0

    /// Content every side last wrote and nobody knowingly replaced: each must be somewhere at the end.
    var owed = Owed()
    var rules: [MergeRule]
    var clock: Int64 = 1_764_633_600_000_000_000
    private var contentCounter = 0
    /// Completed operations by kind (`OperationKind`), to show what the cases exercised.
    var completed = [Int](repeating: 0, count: OperationKind.allCases.count)
    /// Filled only when a single seed is replayed: what happened, for the failure message.
    var trace: [String]?

    init(rules: [MergeRule], tracing: Bool) {
        self.rules = rules
        trace = tracing ? [] : nil
        paths.reserveCapacity(basePaths.count + 16)
        for path in basePaths { _ = id(path) }
    }

    func note(_ line: @autoclosure () -> String) {
        if trace != nil { trace!.append(line()) }
    }

    func id(_ path: RecordPath) -> Int {
        if let known = index[path] { return known }
        let parent = path.parent.map { id($0) } ?? -1
        let new = paths.count
        paths.append(path)
        parentOf.append(parent)
        index[path] = new
        server.append(nil)
        disk.append(nil)
        remote.append(nil)
        local.append(nil)
        synced.append(nil)
        sent.append([])
        return new
    }

    func rule(of id: Int) -> MergeRule { rules[id % rules.count] }

    func freshContent() -> ContentHash {
        contentCounter += 1
        return ContentHash("c\(contentCounter)")
    }

    func tick() -> Int64 {
        clock += 1_000_000_000
        return clock
    }

    /// Whether `id` lies strictly below `ancestor`.
    func isBelow(_ id: Int, _ ancestor: Int) -> Bool {
        var cursor = parentOf[id]
        while cursor >= 0 {
            if cursor == ancestor { return true }
            cursor = parentOf[cursor]
        }
        return false
    }

    /// `id` and everything below it, deepest first.
    func subtree(_ id: Int) -> [Int] {
        var out = [id]
        for other in paths.indices where isBelow(other, id) { out.append(other) }
        return out.sorted { paths[$0].depth > paths[$1].depth }
    }

    func entries(_ id: Int) -> PathEntries {
        PathEntries(path: paths[id], remote: remote[id], local: local[id], synced: synced[id], sent: sent[id])
    }

    /// Whether the parent of `id` is a folder on disk (the root always is).
    func diskParentIsFolder(_ id: Int) -> Bool {
        let parent = parentOf[id]
        return parent < 0 || disk[parent]?.node == .folder
    }

    func serverParentIsFolder(_ id: Int) -> Bool {
        let parent = parentOf[id]
        return parent < 0 || server[parent]?.node == .folder
    }

    /// Whether a name is free everywhere: a conflict copy must not land on anything.
    func isFree(_ id: Int) -> Bool {
        disk[id] == nil && server[id] == nil && remote[id] == nil && local[id] == nil && synced[id] == nil
    }

    static func content(of node: Node?) -> ContentHash? {
        switch node {
        case let .file(hash, _, _)?, let .symlink(hash)?: return hash
        default: return nil
        }
    }
}
