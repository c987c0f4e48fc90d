import Glibc
import SinkiPlan
import SinkiRecord
import SinkiSupport

/// Turns a page of planned operations into a round: each operation sorted by who carries it out (this
/// machine's disk, the server, the merge engine), with the content a write needs, or a fetch of that
/// content first. It reads the trees and the feed's inline content; it changes nothing but the round.
struct Router {
    let context: ReplicaContext
    let feed: FeedReader
    let options: StepOptions
    /// Downloads and chunk uploads this round may still start.
    private var fetchSlots: Int
    private var downloadSlots: Int
    private var uploadSlots: Int
    private var store: StateStore { context.store }
    private var logger: Logger { context.logger }

    init(context: ReplicaContext, feed: FeedReader, options: StepOptions) {
        self.context = context
        self.feed = feed
        self.options = options
        fetchSlots = options.fetchSlots
        downloadSlots = options.downloadSlots
        uploadSlots = options.uploadSlots
    }

    /// Sorts one planned operation into the round: by who carries it out, with its content when it
    /// writes, or a fetch of that content first.
    mutating func route(_ planned: PlannedOperation, into round: inout Round) throws {
        let row = planned.row, path = row.path, local = planned.path
        switch planned.operation {
        case .nothing, .wait:
            return
        case .advanceSynced:
            round.advance.append((path, row.remote.map(SyncedFacts.init) ?? SyncedFacts(tag: 0, kind: nil)))
        case let .upload(upload), let .conflict(.overwriteRemote(upload)):
            guard options.canSend, let facts = row.local else { return }
            if facts.kind == .file, upload.movedFrom == nil, facts.size > context.inlineLimit || facts.hash.isEmpty {
                if let asset = try finishedAsset(path, facts) {
                    round.saves.append(SaveItem(path: local, recordPath: path, node: upload.node, base: upload.base.value, local: facts, asset: asset))
                } else if uploadSlots > 0 {
                    uploadSlots -= 1
                    round.uploads.append(path)
                }
                return
            }
            round.saves.append(SaveItem(path: local, recordPath: path, node: upload.node, base: upload.base.value, movedFrom: upload.movedFrom?.string,
                                        local: facts))
            if let remote = row.remote, remote.kind == nil, row.synced?.kind != nil, !context.keptAside.contains(path) {
                logger.info("\(quoted(path)): deleted on \(remote.device) but edited here: the edit is kept")
            }
        case let .makeRemoteFolder(_, base):
            guard options.canSend else { return }
            // A folder the watcher saw renamed goes as the rename it is (peers then know where it came from).
            var movedFrom: String?
            if let from = context.moveHints[path], let source = try store.row(from), source.local == nil, source.synced?.kind == .directory {
                movedFrom = from
            }
            round.saves.append(SaveItem(path: local, recordPath: path, node: .folder, base: base.value, movedFrom: movedFrom, local: row.local))
        case let .sendDelete(_, base):
            guard options.canSend else { return }
            round.saves.append(SaveItem(path: local, recordPath: path, node: nil, base: base.value))
        case .download, .conflict(.overwriteLocal):
            guard let remote = row.remote, let kind = remote.kind else { return }
            if kind == .file, let facts = row.local, facts.kind == .file, !facts.hash.isEmpty, facts.hash == remote.hash {
                // The same bytes with another mode or other extended attributes (a chmod or a setfattr
                // elsewhere): no content moves.
                round.disk.append(DiskOp(action: .attributes, path: local, recordPath: path, expect: facts, remote: remote, agree: SyncedFacts(remote),
                                         hash: remote.hash, event: .changed))
                return
            }
            switch try content(path, remote) {
            case let .ready(content):
                if row.local == nil, row.synced?.kind != nil, !context.keptAside.contains(path) {
                    logger.info("\(quoted(path)): deleted here but edited on \(remote.device): the edit is kept")
                }
                let action: DiskOp.Action
                if kind == .symlink, case let .bytes(target) = content { action = .symlink(target) } else { action = .write(content) }
                round.disk.append(DiskOp(action: action, path: local, recordPath: path, expect: row.local, remote: remote,
                                         agree: SyncedFacts(remote), hash: remote.hash, event: .changed))
            case let .fetch(fetch): round.fetches.append(fetch)
            case let .refused(failure): round.refusedContent.append((path, failure))
            case nil: return
            }
        case let .makeLocalFolder(_, agree):
            round.disk.append(DiskOp(action: .mkdir, path: local, recordPath: path, expect: row.local, remote: row.remote,
                                     agree: agree == nil ? nil : row.remote.map(SyncedFacts.init), event: agree == nil ? nil : .changed))
        case let .deleteLocal(_, _, agree):
            round.disk.append(DiskOp(action: .remove, path: local, recordPath: path, expect: row.local, remote: nil,
                                     agree: agree == nil ? nil : row.remote.map(SyncedFacts.init) ?? SyncedFacts(tag: 0, kind: nil),
                                     event: agree == nil ? nil : .deleted))
        case let .renameLocal(from, _, _):
            guard let remote = row.remote, let source = context.locate(from), let expect = try store.row(from.string)?.local else { return }
            round.disk.append(DiskOp(action: .rename(from: source, expect: expect), path: local, recordPath: path, expect: nil, remote: remote,
                                     agree: SyncedFacts(remote), hash: remote.hash, event: .changed))
        case .conflict(.keepLocalAside):
            guard let facts = row.local else { return }
            round.keepLocal.append((local, facts))
        case .conflict(.keepRemoteAside):
            guard let remote = row.remote, remote.kind == .file || remote.kind == .symlink else { return }
            switch try content(path, remote) {
            case let .ready(content): round.keepRemote.append((local, remote, content))
            case let .fetch(fetch): round.fetches.append(fetch)
            case let .refused(failure): round.refusedContent.append((path, failure))
            case nil: return
            }
        case let .conflict(.resolve(recordPath, _, _)):
            guard let remote = row.remote, remote.kind == .file else { return }
            if let waiting = try store.conflict(path), waiting.remoteTag == remote.tag { return } // still waits for sinkid resolve
            switch try content(path, remote) {
            case let .ready(content): round.resolves.append((recordPath, local, row, remote, content))
            case let .fetch(fetch): round.fetches.append(fetch)
            case let .refused(failure): round.refusedContent.append((path, failure))
            case nil: return
            }
        }
    }

    /// Where the content of `remote` at `path` comes from: inline bytes read with the feed (checked),
    /// a checked download in the state folder, or a fetch to make first (nil: no fetch slot is free).
    private mutating func content(_ path: String, _ remote: RemoteFacts) throws -> Round.ContentState? {
        if remote.assetID != nil {
            if let asset = try context.asset(of: remote) {
                if context.hasDownload(asset) { return .ready(.download(asset)) }
                guard fetchSlots > 0, downloadSlots > 0 else { return nil }
                fetchSlots -= 1
                downloadSlots -= 1
                if mkdir(context.downloadsDirectory, 0o700) != 0 && errno != EEXIST {
                    throw SystemError("mkdir", errno: errno, path: context.downloadsDirectory)
                }
                return .fetch(ContentFetch(path: path, tag: remote.tag, size: remote.size, hash: remote.hash, asset: asset,
                                            finalPath: context.downloadPath(asset.sha256)))
            }
        } else if case let data = remote.size == 0 ? nil : feed.inline.data(path, tag: remote.tag), remote.size == 0 || data != nil {
            do {
                return .ready(.bytes(try RemoteContent.inflate(data, size: remote.size, hash: remote.hash, path: path)))
            } catch {
                feed.inline.drop(path)
                return .refused(ApplyFailure.from(error))
            }
        }
        guard fetchSlots > 0 else { return nil }
        fetchSlots -= 1
        return .fetch(ContentFetch(path: path, tag: remote.tag, size: remote.size, hash: remote.hash))
    }

    /// The asset a save of the large file at `path` may carry: the manifest of exactly its content as it
    /// is now, every chunk on the server (nil: its chunks are to upload first).
    private func finishedAsset(_ path: String, _ local: LocalFacts) throws -> Asset? {
        guard !local.hash.isEmpty, let progress = try store.chunkUpload(path), let manifest = progress.manifest, progress.content == local.hash,
              progress.size == local.size, progress.mtime == local.mtime, progress.ctime == local.ctime, progress.inode == local.inode else { return nil }
        return Asset(manifestHash: manifest, chunks: progress.chunks)
    }
}
