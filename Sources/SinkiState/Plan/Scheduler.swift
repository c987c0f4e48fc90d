import SinkiMerge
import SinkiPlan
import SinkiRecord
import SinkiSupport

/// One operation the planner chose, with the row it was planned from.
struct PlannedOperation {
    var operation: Operation
    var row: TreeRow
    var path: LocalPath
}

/// The scheduler: walks the paths where the trees differ, a page at a time from where the last page
/// ended, gives each to the planner with what its plan depends on (its parent, what is below it, the
/// sources of renames), and returns the operations. Paths with an operation under way, or waiting out
/// a failure, are passed by; they are planned again once their outcome is recorded.
///
/// A walk through the whole of the work is a pass. A pass that ends having seen the trees change
/// (anything recorded since it began) starts another; one that saw nothing change ends the rounds,
/// until the next change asks for more.
final class Scheduler {
    let context: ReplicaContext
    var store: StateStore { context.store }
    /// Paths handed out and not answered yet (a save in flight, a download, an upload, a merge).
    var inFlight = PathSet()
    var failures = FailureBook()
    /// Renames the server refused because their source no longer holds the content there: that path
    /// is sent with its bytes next time, until its Local content changes.
    var noMoveFrom: [String: String] = [:]
    private var cursor = ""
    private var previousCursor = ""
    /// The paths of the last page, in order: where to resume when its saves did not all fit a batch.
    private var lastPage: [String] = []
    /// The most paths a page that will build a batch should plan: about what the last batch took, when
    /// its bytes were the bound (over a slow link, some 150 of 1,000 planned; the rest were planned for
    /// nothing, 50 ms a page).
    private(set) var savePageLimit = Int.max
    private var passWrites = 0
    private var passFresh = true

    init(context: ReplicaContext) { self.context = context }

    /// The next page of planned operations, and whether the rounds are over for now (a pass ended with
    /// nothing changed). `excludingRoots`: roots stopped for safety, whose paths wait.
    func nextPage(limit: Int, excludingRoots: Set<RootID>, remoteOnly: Bool) throws -> (planned: [PlannedOperation], settled: Bool) {
        if passFresh {
            passFresh = false
            passWrites = store.treeWrites
        }
        previousCursor = cursor
        let page = try store.workPage(after: cursor, limit: limit, remoteOnly: remoteOnly)
        lastPage = page
        guard let last = page.last else {
            cursor = ""
            passFresh = true
            // A failed path that no longer differs is not seen by the walk again: its failure goes here,
            // or status would report it not applied for ever (the fault suite's seed 5: a rename's delete
            // kept because the file was open, and the file then deleted here).
            try forgetSettledFailures()
            // Nothing changed during the pass: every path still differing waits on something.
            return ([], store.treeWrites == passWrites)
        }
        cursor = last
        var overlay = Overlay()
        var planned: [PlannedOperation] = []
        var handled = PathSet()
        let now = Clock.now()
        for path in page where !handled.contains(path) {
            guard !inFlight.contains(path), let row = try store.row(path), !failures.holds(row, now: now) else { continue }
            guard let recordPath = try? RecordPath(validating: path), let local = context.locate(recordPath),
                  !excludingRoots.contains(local.root) else { continue }
            let answer = try plan(row, at: recordPath, overlay: overlay, waits: true)
            if case .wait(.parentFirst)? = answer {
                planned += try ancestors(of: recordPath, overlay: &overlay, handled: &handled)
            }
            let operation = answer?.isWork == true ? answer : nil
            if try store.conflict(path) != nil {
                // A conflict waits for `sinkid resolve`; once the path plans something else (the local
                // change went away, both sides came to hold the same), it settled itself.
                if case .conflict(.resolve)? = operation {} else {
                    try MergeDesk(context: context).dropWaiting(path, why: "both sides agree now, or the local change went away")
                }
            }
            guard let operation else { continue }
            // A delete that a rename's other half would spare: the rename goes first, in this page; one
            // that cannot go yet (its folder comes later in this page) holds the delete for a round.
            let (movers, waiting) = try self.movers(for: operation, row: row)
            if waiting { continue }
            for mover in movers where !handled.contains(mover.row.path) {
                planned.append(mover)
                handled.insert(mover.row.path)
            }
            handled.insert(path)
            overlay.note(operation)
            planned.append(PlannedOperation(operation: operation, row: row, path: local))
            // A rename made here goes with its source's delete, in one request: the server copies the
            // content, then the delete ends the old path, and peers that read both rename their file.
            if case let .upload(upload) = operation, let source = upload.movedFrom, !handled.contains(source.string),
               !inFlight.contains(source.string), let sourceRow = try store.row(source.string), !failures.holds(sourceRow),
               let sourceLocal = context.locate(source), case .sendDelete? = try plan(sourceRow, at: source) {
                handled.insert(source.string)
                planned.append(PlannedOperation(operation: try plan(sourceRow, at: source)!, row: sourceRow, path: sourceLocal))
            }
        }
        return (planned, false)
    }

    /// The first work among the folders above a path that waits for its parent: a folder no tree holds
    /// (a server sending files without their folders), or a non-folder in the way that no tree calls
    /// changed (a symlink here, synced, under which the server holds files). Neither is in the work
    /// index, so without this the child would wait for ever.
    private func ancestors(of path: RecordPath, overlay: inout Overlay, handled: inout PathSet) throws -> [PlannedOperation] {
        var next = path.parent
        while let ancestor = next, !handled.contains(ancestor.string), !inFlight.contains(ancestor.string),
              let local = context.locate(ancestor) {
            let row = try store.row(ancestor.string) ?? TreeRow(path: ancestor.string)
            if failures.holds(row) { return [] }
            guard let answer = try plan(row, at: ancestor, overlay: overlay, waits: true) else { return [] }
            if answer.isWork {
                handled.insert(ancestor.string)
                overlay.note(answer)
                return [PlannedOperation(operation: answer, row: row, path: local)]
            }
            guard case .wait(.parentFirst) = answer else { return [] }
            next = ancestor.parent
        }
        return []
    }

    /// Forgets the failures whose path no longer differs (settled another way): nothing is left to
    /// retry, and no pass would come to them.
    func forgetSettledFailures() throws {
        guard !failures.isEmpty else { return }
        try failures.forgetSettled { try store.differs($0) }
    }

    /// The last page is to be planned again next time (its saves could not go yet: both modify
    /// requests are in flight), so a pass never walks ahead of what it can send.
    func rewind() { cursor = previousCursor }

    /// A batch was built from the last page: `left` are the saves its bytes had no room for. The next
    /// page starts at the first of them rather than after the page (they would wait for the next pass),
    /// and plans about as many paths as a batch takes.
    func batchBuilt(taken: Int, left: [String]) {
        guard !left.isEmpty else {
            savePageLimit = savePageLimit > Int.max / 2 ? Int.max : savePageLimit * 2
            return
        }
        savePageLimit = max(32, taken + taken / 2)
        let positions = Dictionary(lastPage.enumerated().map { ($1, $0) }, uniquingKeysWith: min)
        guard let first = left.compactMap({ positions[$0] }).min() else { return }
        cursor = first > 0 ? lastPage[first - 1] : previousCursor
    }

    /// Starts the next pass from the beginning (after `sinkid sync`, a reconnect).
    func restart() {
        cursor = ""
        passFresh = true
    }

    /// The planner's answer for one row; nil when there is nothing to do now.
    func plan(_ row: TreeRow, at path: RecordPath, overlay: Overlay = Overlay(), waits: Bool = false) throws -> Operation? {
        guard let entries = try store.entries(of: row) else { return nil }
        if let local = row.local, try renamedFromDeleted(row, local: local) {
            context.logger.info("\(quoted(row.path)) was renamed here from \(quoted(context.moveHints[row.path] ?? "")), which another device deleted meanwhile: the delete follows the rename")
            return .deleteLocal(path, expecting: local.node, agree: nil)
        }
        var state = PathState(entries: entries, rule: rule(for: path, row: row))
        if let parent = path.parent {
            var parentEntries = try store.row(parent.string).flatMap { try store.entries(of: $0) } ?? PathEntries(path: parent)
            overlay.apply(to: &parentEntries)
            state.parent = parentEntries
        }
        // What is below matters to folders, and to anything else that has rows below it (a file or a
        // symlink here where the server holds a folder's contents: row 0).
        let folderSomewhere = row.local?.kind == .directory || row.remote?.kind == .directory || row.synced?.kind == .directory
        if try folderSomewhere || store.hasRowsBelow(row.path) {
            state.below = try store.below(row.path)
        }
        if let remote = row.remote, let from = remote.movedFrom, let source = try store.row(from) {
            state.remoteMoveSource = try store.entries(of: source)
        }
        if let local = row.local, local.kind != .directory, !local.hash.isEmpty, local.node != entries.base.node,
           // An empty file has no identity to find it by: only the watcher's word makes it a rename (a new
           // empty file taken for a deleted one went to the server as its rename, and a peer that had
           // deleted the other followed the "rename" with a delete: fault suite seed 7107).
           let source = try hintedSource(of: row.path, local: local) ?? (local.size > 0 ? store.localMoveSource(for: local.node, excluding: row.path) : nil),
           noMoveFrom[row.path] != source.path,
           // A source the watcher saw renamed to another path is that path's: a guess by content here
           // would send a second move from it, a copy that peers could take for the rename.
           context.moveSources[source.path].map({ $0 == row.path }) ?? true {
            state.localMoveSource = try store.entries(of: source)
        }
        let operation = Planner.plan(state)
        return operation.isWork || waits ? operation : nil
    }

    /// The source the watcher saw this path renamed from, if it still qualifies as one: gone from disk,
    /// agreed on with this content, and the server holding that very version.
    private func hintedSource(of path: String, local: LocalFacts) throws -> TreeRow? {
        guard let from = context.moveHints[path], let source = try store.row(from), source.local == nil, let synced = source.synced,
              synced.node == local.node, let remote = source.remote, remote.tag == synced.tag, remote.node == local.node else { return nil }
        return source
    }

    /// Whether `row` is a file the watcher saw renamed here, unchanged since, from a path another
    /// device deleted before the rename was sent (its tombstone read already): the delete follows the
    /// rename, as when the server refuses the move for the same reason (`settleMoveWithoutSource`).
    /// Sent, the file would come back on the device that deleted it.
    private func renamedFromDeleted(_ row: TreeRow, local: LocalFacts) throws -> Bool {
        guard row.synced == nil, row.remote?.kind == nil, local.kind != .directory, let from = context.moveHints[row.path],
              let source = try store.row(from), source.local == nil, let synced = source.synced, synced.node == local.node,
              let remote = source.remote, remote.kind == nil, remote.tag > synced.tag, remote.device != context.device else { return false }
        return true
    }

    /// The planner's merge rule for a path: keep-both is the planner's own; every other rule reads the
    /// files and is the merge engine's (`MergeRule.engine`).
    private func rule(for path: RecordPath, row: TreeRow) -> MergeRule {
        context.rules.policy(for: path).rule == .keepBoth ? .keepBoth : .engine
    }

    /// For a delete of a path that a rename takes elsewhere (a peer's, done here by a local rename; or
    /// one made here, sent as a move the server copies), that rename, planned now so that it goes first.
    /// Also whether one waits (for its folder): the delete then waits a round too. The mover's folder
    /// is made by its own plan, so the wait ends.
    private func movers(for operation: Operation, row: TreeRow) throws -> (movers: [PlannedOperation], waiting: Bool) {
        var candidates: [String] = []
        switch operation {
        case .deleteLocal(_, _, agree: .some):
            candidates = try store.remoteMovers(from: row.path)
        case .sendDelete:
            guard let synced = row.synced, let kind = synced.kind, kind != .directory else { return ([], false) }
            candidates = try store.localMovers(hash: synced.hash, kind: kind)
            if let new = context.moveSources[row.path], !candidates.contains(new) { candidates.append(new) }
        default:
            return ([], false)
        }
        var out: [PlannedOperation] = []
        var waiting = false
        for candidate in candidates {
            if inFlight.contains(candidate) {
                // Its save is on its way: the delete goes after it.
                if case .sendDelete = operation { waiting = true }
                continue
            }
            guard let moverRow = try store.row(candidate), !failures.holds(moverRow), let path = try? RecordPath(validating: candidate),
                  let local = context.locate(path), let planned = try plan(moverRow, at: path, waits: true) else { continue }
            switch planned {
            case let .renameLocal(from, _, _) where from.string == row.path:
                out.append(PlannedOperation(operation: planned, row: moverRow, path: local))
            case let .upload(upload) where upload.movedFrom?.string == row.path:
                out.append(PlannedOperation(operation: planned, row: moverRow, path: local))
            case .wait(.parentFirst) where wouldMove(moverRow, from: row):
                waiting = true
            default:
                continue
            }
        }
        return (out, waiting)
    }

    /// Whether `mover` is the other half of a rename of `source` (its content is the source's agreed one).
    private func wouldMove(_ mover: TreeRow, from source: TreeRow) -> Bool {
        if mover.remote?.movedFrom == source.path { return mover.local == nil && mover.remote?.node == source.synced?.node }
        guard let local = mover.local, let synced = source.synced else { return false }
        return local.node == synced.node
    }
}

/// What the operations planned earlier in a page will make of their paths, for the parent checks of
/// the paths after them: a folder made here or at the server in this page holds what comes below it
/// in the same page (folders are made before files, and saved first in a batch).
struct Overlay {
    private var localFolders = PathSet()
    private var remoteFolders = PathSet()

    mutating func note(_ operation: Operation) {
        switch operation {
        case let .makeLocalFolder(path, _): localFolders.insert(path.string)
        case let .makeRemoteFolder(path, _): remoteFolders.insert(path.string)
        default: break
        }
    }

    func apply(to entries: inout PathEntries) {
        let path = entries.path.string
        if localFolders.contains(path) { entries.local = LocalEntry(.folder) }
        if remoteFolders.contains(path) {
            entries.remote = RemoteEntry(tag: entries.remote?.tag ?? .none, node: .folder, movedFrom: entries.remote?.movedFrom)
        }
    }
}
