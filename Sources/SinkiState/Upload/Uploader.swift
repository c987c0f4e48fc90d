import Glibc
import SinkiLoop
import SinkiPlan
import SinkiRecord
import SinkiSupport

/// A save the planner chose: a local version (or a delete) to send, based on `base`.
struct SaveItem {
    var path: LocalPath
    var recordPath: String
    /// nil: a tombstone.
    var node: Node?
    var base: Int64
    var movedFrom: String?
    var local: LocalFacts?
    /// A large file's finished upload: its record carries the manifest, never the bytes.
    var asset: Asset?
}

/// A record on its way to the server.
public struct Outgoing: Sendable, Equatable {
    public var record: Record
}

/// What the server's answer to a push left to do.
public struct AcknowledgeReport: Sendable {
    public var saved = 0
    /// `Replica.savedTotal` once these were counted.
    public var savedTotal = 0
    /// Saves the server refused as stale: the server's record came with the answer and is in Remote.
    public var conflicts = 0
    public var refused: [String] = []
    /// Renames the server refused because their source no longer holds the content there: the
    /// sources' records are read again, and the files go with their bytes. `agreed`: the source's
    /// Synced node as the refusal came (a delete in the same batch may change it right after).
    public var movesWithoutSource: [(path: String, source: String, agreed: Node?)] = []
    /// Large files whose chunks the server lacked: uploaded again.
    public var reupload: [String] = []
    public init() {}
}

/// The uploader: builds the records of the saves the planner chose (each file read as it is now,
/// small ones compressed on every core), notes each as sent before it goes, and records the server's
/// answers in the trees.
final class Uploader {
    let context: ReplicaContext
    let observer: LocalObserver
    let feed: FeedReader
    var store: StateStore { context.store }
    /// Local changes the server took since the replica opened (for the progress of a long push).
    var savedTotal = 0

    init(context: ReplicaContext, observer: LocalObserver, feed: FeedReader) {
        self.context = context
        self.observer = observer
        self.feed = feed
    }

    /// Reads and compresses what `items` send (on every core), about `maxBytes` of content at most,
    /// and notes what goes (`sent`). Items whose file is busy, gone or no longer small since it was
    /// planned are left out (the observer looks at them again). Read a slice at a time, each as large
    /// as the budget left holds at the compression seen so far: an item read and not taken was read
    /// for nothing, and with batches bounded by their pace to 256 KiB, reading all 1,000 planned files
    /// for each batch cost the sender 7 CPU seconds for 5,000 files over a slow link.
    func build(_ items: [SaveItem], maxBytes: Int) throws -> (records: [Outgoing], left: [SaveItem]) {
        var out: [Outgoing] = []
        var left: [SaveItem] = []
        var bytes = 0
        var read = 0
        var start = 0
        while start < items.count {
            if !out.isEmpty && bytes >= maxBytes {
                left += items[start...]
                break
            }
            let ratio = read > 0 && bytes > 0 ? max(0.05, Double(bytes) / Double(read)) : 1
            let budget = Double(maxBytes - bytes) / ratio
            var end = start, raw = 0
            while end < items.count {
                let size = Self.bytesToRead(items[end])
                if end > start && Double(raw + size) > budget { break }
                raw += size
                end += 1
            }
            let slice = try buildSlice(Array(items[start..<end]), maxBytes: maxBytes, bytes: &bytes, taken: !out.isEmpty)
            out += slice.records
            left += slice.left
            read += raw
            start = end
        }
        // Saves first, parents before what is in them (a rename's new path before its source's delete,
        // so the server can copy it); then deletes, deepest first, so a folder's follows its contents'.
        out.sort { a, b in
            if a.record.deleted != b.record.deleted { return !a.record.deleted }
            if a.record.deleted { return a.record.path.utf8.count > b.record.path.utf8.count }
            return a.record.path.utf8.lexicographicallyPrecedes(b.record.path.utf8)
        }
        return (out, left)
    }

    /// The bytes building `item`'s record reads: a small file's content; nothing for a folder, a
    /// delete, a rename or a large file's manifest.
    private static func bytesToRead(_ item: SaveItem) -> Int {
        guard case .file? = item.node, item.movedFrom == nil, item.asset == nil, let local = item.local else { return 0 }
        return Int(local.size)
    }

    /// One slice of `build`, in one transaction; `bytes` is the content taken so far, and `taken`
    /// whether any record was.
    private func buildSlice(_ items: [SaveItem], maxBytes: Int, bytes: inout Int, taken: Bool) throws -> (records: [Outgoing], left: [SaveItem]) {
        if items.isEmpty { return ([], []) }
        let safeRoots = context.safeRoots
        let device = context.device
        let inlineLimit = context.inlineLimit
        var cached: [Int: CachedContent] = [:]
        for (index, item) in items.enumerated() {
            if let local = item.local, item.node != nil, item.asset == nil, item.movedFrom == nil, local.kind != .directory,
               let hit = observer.pushCache.take(item.recordPath, matching: local) {
                cached[index] = hit
            }
        }
        let hits = cached
        // A file's extended attributes go with every save of it (`XattrSet.effective`): what it carries
        // of its Remote record and the names not kept here are read now, its own from the disk below.
        let policy = context.xattrs
        var carried: [Int: (remote: ExtendedAttributes, unkept: Set<String>)] = [:]
        for (index, item) in items.enumerated() where item.node?.recordKind == .file {
            carried[index] = (try store.row(item.recordPath)?.remote?.xattrs ?? .none, try store.unkeptXattrs(item.recordPath))
        }
        let carriedNow = carried
        // A file whose bytes are read (or were, into the push cache) has its attributes read on that same
        // descriptor; only the others are opened for them.
        let built: [Result<(Record, FileContent?), SafeRootError>] = Blocking.map(Array(items.enumerated())) { index, item in
            Result { () throws(SafeRootError) in
                var (record, content) = try Self.record(for: item, index: index, hits: hits, safeRoots: safeRoots, device: device,
                                                        inlineLimit: inlineLimit, xattrs: policy)
                guard !record.deleted, record.kind == .file, let carried = carriedNow[index] else { return (record, content) }
                var reading = content?.xattrs ?? hits[index]?.xattrs
                if reading == nil { reading = try XattrDisk.read(safeRoots[item.path.root.index], item.path.relative, policy: policy) }
                guard let reading else {
                    // Gone, or no longer a file, since it was planned: looked at again.
                    throw SafeRootError.system(SystemError("open", errno: ENOENT, path: item.recordPath))
                }
                record.xattrs = XattrSet.effective(own: reading.own, remote: carried.remote, unkept: carried.unkept, policy: policy).set
                return (record, content)
            }
        }
        var out: [Outgoing] = []
        var left: [SaveItem] = []
        try store.transaction {
            for (item, result) in zip(items, built) {
                switch result {
                case let .success((_, content)) where content?.busy == true:
                    // Being written again: sent once it is closed or quiet, never half-done.
                    observer.unstable.append(item.path)
                case let .success((record, content)):
                    if let content, content.unstable { observer.unstable.append(item.path) }
                    if (taken || !out.isEmpty) && bytes + (record.data?.count ?? 0) > maxBytes {
                        left.append(item)
                        continue
                    }
                    if var local = item.local, local.kind == .file {
                        // Changed since it was looked at: the Local tree follows what is being sent.
                        var changed = false
                        if let content, content.sha256 != local.hash || !local.matches(content.stat) {
                            local.observe(content.stat)
                            local.hash = content.sha256
                            changed = true
                        }
                        let xattrs = XattrSet.digest(record.xattrs)
                        if xattrs != local.xattrs {
                            local.xattrs = xattrs
                            changed = true
                        }
                        if changed { try store.setLocal(item.recordPath, local) }
                    } else if let content, var local = item.local, content.sha256 != local.hash || !local.matches(content.stat) {
                        local.observe(content.stat)
                        local.hash = content.sha256
                        try store.setLocal(item.recordPath, local)
                    }
                    bytes += record.data?.count ?? 0
                    if let node = RemoteFacts(record).node { try store.noteSent(record.path, node) }
                    out.append(Outgoing(record: record))
                case let .failure(error):
                    // Gone since it was planned (its delete event brings it back), or grown: looked at again.
                    if error.errno != ENOENT && error.errno != EFBIG { context.logger.warning("cannot read \(error); will retry") }
                    observer.unstable.append(item.path)
                }
            }
        }
        return (out, left)
    }

    /// The record of one save, its content read now unless it goes without (a folder, a delete, a rename
    /// the server copies, a large file's manifest, a small file read while it was hashed).
    private static func record(for item: SaveItem, index: Int, hits: [Int: CachedContent], safeRoots: [SafeRoot], device: String,
                               inlineLimit: Int64, xattrs: XattrPolicy) throws(SafeRootError) -> (Record, FileContent?) {
        let local = item.local
        var record = Record(path: item.recordPath, type: local.map { $0.type.isEmpty ? Record.defaultType : $0.type } ?? Record.defaultType,
                            baseTag: item.base, mode: local?.mode ?? 0, modifiedAt: local?.mtime ?? 0, device: device)
        guard let node = item.node, let local else {
            record.deleted = true
            record.mode = 0
            return (record, nil)
        }
        switch node {
        case .folder:
            record.type = Record.directoryType
            if let source = item.movedFrom { record.movedFrom = source }
            return (record, nil)
        case .file, .symlink:
            if case .symlink = node { record.type = Record.symlinkType }
            if let source = item.movedFrom {
                // Renamed: the server copies the content it holds at the source; nothing is read.
                record.movedFrom = source
                record.size = local.size
                record.sha256 = local.hash
                return (record, nil)
            }
            if let asset = item.asset {
                record.asset = asset
                record.size = asset.size
                // The content's name (`ContentID`): the manifest's hash above 256 KiB, else the SHA-256.
                record.sha256 = local.hash
                return (record, nil)
            }
            if let hit = hits[index] {
                record.data = hit.data
                record.size = local.size
                record.sha256 = local.hash
                return (record, nil)
            }
            if let now = try safeRoots[item.path.root.index].stat(item.path.relative), now.kind == .file, now.size > inlineLimit {
                // Grew past the inline limit since it was hashed: never read whole; looked at again.
                throw SafeRootError.system(SystemError("read", errno: EFBIG, path: item.recordPath))
            }
            let content = try ContentReader.read(safeRoots[item.path.root.index], item.path.relative, keepBytes: true, xattrs: xattrs)
            let bytes = content.bytes ?? []
            record.data = Deflate.compressForSending(bytes)
            record.size = Int64(bytes.count)
            record.sha256 = content.sha256
            record.mode = content.stat.mode
            record.modifiedAt = content.stat.mtime
            if content.stat.kind == .symlink { record.type = Record.symlinkType }
            return (record, content)
        }
    }

    /// Records the server's answers to a push: a saved version is what both now agree on; a conflict
    /// brings the server's record into Remote, for the planner to settle by the path's rule; a refusal
    /// is kept as a failure, shown by status.
    func acknowledge(_ batch: [Outgoing], _ results: [ModifyResult], failures: inout FailureBook) throws -> AcknowledgeReport {
        var report = AcknowledgeReport()
        var agreed: [(String, RemoteFacts)] = []
        try store.transaction {
            // Saved versions go into Remote together, so each folder's digests are updated once per
            // batch rather than once per file below it; before anything else reads the tree.
            var savedRemote: [(path: String, facts: RemoteFacts)] = []
            func observeSaved() throws {
                try store.observeSaved(savedRemote)
                savedRemote.removeAll()
            }
            for (outgoing, result) in zip(batch, results) {
                let path = outgoing.record.path
                if result.status != .saved { try observeSaved() }
                switch result.status {
                case .saved:
                    var saved = outgoing.record
                    saved.changeTag = result.record?.changeTag ?? 0
                    guard saved.changeTag > 0 else {
                        context.logger.error("server saved \(quoted(path)) without a changeTag; will push again")
                        continue
                    }
                    let facts = RemoteFacts(saved.withoutData)
                    savedRemote.append((path, facts))
                    try store.dropSent(path)
                    if outgoing.record.asset != nil { try store.removeChunkUpload(path) }
                    failures.succeeded(path)
                    agreed.append((path, facts))
                    report.saved += 1
                case .conflict:
                    try store.dropSent(path)
                    let before = try store.row(path)?.remote
                    if outgoing.record.deleted, result.record?.deleted == true, let agreed = try store.row(path)?.synced?.node {
                        if context.deletedHere.count > 10_000 { context.deletedHere.removeAll() }
                        context.deletedHere[PathKey(path)] = agreed
                    }
                    if let remote = result.record, remote.changeTag == 0 {
                        // The server holds nothing there (a tombstone purged since Remote read it): a
                        // save based on nothing goes next, else the same save would be refused for ever.
                        try store.forgetRemote([path])
                    } else if let remote = result.record {
                        try feed.ingest([remote], token: nil)
                    }
                    if let before, try store.row(path)?.remote == before {
                        // An answer that changes nothing here would bring the same save back at once: it
                        // waits out a backoff instead (a server whose answers disagree with its feed).
                        failures.fail(path, .up, ApplyFailure(.conflict, "the server refused the save as stale, and its record is the one here"),
                                      row: try store.row(path))
                    }
                    report.conflicts += 1
                case .refused where result.problem?.code == ProblemKind.moveSourceGone.code:
                    // The server no longer has the source's content there: deleted or changed. The bytes go next time.
                    try store.dropSent(path)
                    if let source = outgoing.record.movedFrom {
                        report.movesWithoutSource.append((path, source, try store.row(source)?.synced?.node))
                    }
                case .refused where result.problem?.code == ProblemKind.chunksMissing.code:
                    // The server lacks chunks the manifest names (removed as unreferenced while the record
                    // waited, say): the upload runs again and sends what is missing.
                    context.logger.info("the server lacks chunks of \(quoted(path)); uploading them again")
                    try store.dropSent(path)
                    try store.removeChunkUpload(path)
                    report.reupload.append(path)
                case .refused:
                    let reason = result.problem?.description ?? "refused"
                    context.logger.error("server refused \(quoted(path)): \(reason)")
                    try store.dropSent(path)
                    // An asset the server does not take (its upload expired, say) is uploaded anew on retry.
                    if outgoing.record.asset != nil { try store.removeChunkUpload(path) }
                    failures.fail(path, .up, ApplyFailure(.invalid, reason), row: try store.row(path))
                    report.refused.append(path)
                }
            }
            try observeSaved()
        }
        savedTotal += report.saved
        report.savedTotal = savedTotal
        for (path, facts) in agreed { context.keepBase(path, facts) }
        return report
    }
}
