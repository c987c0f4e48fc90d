import SinkiRecord
import SinkiSupport

/// The executor's record half: what a disk operation that completed made of the trees, in one
/// transaction for a whole batch (after its `syncfs`). A failed operation records nothing but its
/// failure, so its path is planned again from the trees as they are.
struct Outcomes {
    let context: ReplicaContext
    var store: StateStore { context.store }

    /// What recording a batch found to report and to look at.
    struct Report {
        var applied: [AppliedChange] = []
        /// Paths to look at again (a folder kept because it holds something, a write the disk refused
        /// because it moved under it).
        var toCheck: [LocalPath] = []
        var done: [String] = []
    }

    func record(_ ops: [DiskOp], _ results: [DiskResult], failures: inout FailureBook, inline: inout InlineContent) throws -> Report {
        var report = Report()
        var bases: [(String, RemoteFacts, [UInt8]?)] = []
        try store.transaction {
            for (op, result) in zip(ops, results) {
                switch result {
                case let .failed(cause):
                    var failure = cause
                    // Status lists the reason: it names the path, whatever file the system call was on.
                    if !failure.message.contains(op.path.name) { failure.message = "\(quoted(op.recordPath)): \(failure.message)" }
                    failures.fail(op.recordPath, .down, failure, row: try store.row(op.recordPath))
                    context.logFailure(op.recordPath, failure, attempts: failures.entries[PathKey(op.recordPath)]?.attempts ?? 1)
                    if failure.decidesAgain || failure.cause == .busy { report.toCheck.append(op.path) }
                case .kept:
                    // A folder that still holds something here, or a file written or open to a writer: it is
                    // looked at, and the planner decides again with it (an edit beats the delete).
                    let why = op.expect?.kind == .directory ? "still holds files here" : "is being written here"
                    failures.fail(op.recordPath, .down, ApplyFailure(.changedHere, "\(quoted(op.recordPath)) \(why)"),
                                  row: try store.row(op.recordPath))
                    report.toCheck.append(op.path)
                case let .done(stat, unkept):
                    try recordDone(op, stat: stat, unkept: unkept)
                    failures.succeeded(op.recordPath)
                    inline.drop(op.recordPath)
                    report.done.append(op.recordPath)
                    if var event = op.event {
                        if context.keptAside.remove(op.recordPath) != nil, event == .changed { event = .conflict }
                        var written: Int64 = 0
                        if case .write = op.action { written = op.remote?.size ?? stat?.size ?? 0 }
                        report.applied.append(AppliedChange(path: op.recordPath, event: event, localPath: context.diskPath(op.path),
                                                            type: op.remote?.type ?? Record.defaultType, bytes: written))
                    }
                    if let remote = op.remote, op.agree != nil, case let .write(content) = op.action {
                        if case let .bytes(bytes) = content { bases.append((op.recordPath, remote, bytes)) } else { bases.append((op.recordPath, remote, nil)) }
                    }
                }
            }
        }
        for (path, facts, bytes) in bases { context.keepBase(path, facts, bytes: bytes) }
        return report
    }

    private func recordDone(_ op: DiskOp, stat: FileStat?, unkept: XattrShortfall?) throws {
        let path = op.recordPath
        switch op.action {
        case .write, .symlink:
            guard let stat else { return }
            var local = LocalFacts(stat, type: op.remote?.type ?? context.typeFor(path))
            local.hash = op.hash
            // What it could not keep here stands as given (`XattrSet.effective`): the file is the set.
            local.xattrs = XattrSet.digest(op.wantedXattrs)
            try store.setLocal(path, local)
            try store.setUnkeptXattrs(path, local.kind == .file ? unkept : nil)
            if let remote = op.remote, let asset = try context.asset(of: remote), let chunks = asset.chunks, asset.isManifest {
                // The manifest of a large file here is kept: its chunks build the next version.
                try store.saveManifest(asset.id, chunks: chunks)
            }
        case .attributes:
            guard let stat, var local = op.expect else { return }
            // Written in place between the check and the chmod, it keeps what it was known as: the next
            // look finds the edit and sends it.
            if local.size == stat.size && local.mtime == stat.mtime && local.inode == stat.inode {
                local.observe(stat)
                local.xattrs = XattrSet.digest(op.wantedXattrs)
                try store.setUnkeptXattrs(path, unkept)
            }
            try store.setLocal(path, local)
        case .mkdir:
            guard let stat else { return }
            try store.setLocal(path, LocalFacts(kind: .directory, mtime: stat.mtime, ctime: stat.ctime, inode: stat.inode, mode: stat.mode,
                                                type: Record.directoryType))
        case .remove:
            try store.setLocal(path, nil)
            // A folder goes only when empty: entries the tree still had below it are gone too.
            for below in try store.presentRows(below: path) { try store.setLocal(below.path, nil) }
        case let .rename(from, expect):
            let fromPath = context.recordPath(from)
            var local = expect
            if let stat {
                // The planner saw the source unchanged, but a program may have written it between that look
                // and the rename (the file keeps its inode, so the rename still succeeds). Taking the stat
                // then would record that edit as the version agreed: such a file keeps what it was known
                // as, and the next look finds it changed and sends it (its ctime moved with the rename).
                if expect.sameFile(stat) { local.observe(stat) }
            }
            local.type = local.kind == .file ? context.typeFor(path) : local.type
            try store.setLocal(path, local)
            // What was not kept here moved with the files.
            try store.moveUnkeptXattrs(from: fromPath, to: path)
            try store.setLocal(fromPath, nil)
        }
        if let agree = op.agree {
            try store.setSynced(path, agree)
            if let node = agree.node, try store.sent(path).contains(node) { try store.dropSent(path) }
        }
    }
}
