import Glibc
import SinkiLoop
import SinkiControl
import SinkiRecord
import SinkiState
import SinkiSupport
import SinkiTransfer
import SinkiWatch

extension Agent {
    // MARK: The tus client

    /// The tus client on the agent's HTTP client and loop, set up from `[transfer]`.
    func tusClient() -> TusClient? {
        if let client = transfers.client { return client }
        guard let http = client?.http else { return nil }
        var options = TusOptions()
        options.chunkSize = configuration.transfer.chunkSize
        options.attempts = configuration.transfer.attempts
        options.computeSHA256 = true
        let server = TusServer(endpoint: serverURL + Routes.uploads, bearerToken: client?.bearerToken, pinsOrigin: true)
        let made = TusClient(http: http, server: server, options: options, logger: logger.child("tus"))
        transfers.client = made
        return made
    }

    // MARK: Uploads

    /// Starts the chunked upload of a large file the replica handed out (its record goes once its
    /// chunks are on the server).
    func startUpload(_ path: String) {
        guard transfers.uploads[path] == nil else { return }
        transfers.uploads[path] = Task { await self.upload(path) }
    }

    /// Sends one large file's chunks that the server lacks (going on from an earlier run) and marks
    /// its record ready to push.
    /// With `repair`, the file is synced and its record is not sent again: only chunks the server
    /// lacks go (a verify found some missing).
    func upload(_ path: String, repair: Bool = false) async {
        let key = TransferBook.Key.of(.upload, path)
        var failure: ApplyFailure?
        defer {
            transfers.uploads[path] = nil
            transfers.moving[key] = nil
            let failed = failure
            Task {
                if !repair { try? await self.replica?.uploadEnded(path, failure: failed) }
                self.finishIfIdle()
                self.pumpSync()
            }
        }
        guard let replica, let tus = tusClient(), let sync = client else { return }
        let source: UploadSource
        do {
            guard let opened = try await replica.openForUpload(path, repair: repair) else {
                lookAgain(path)
                return
            }
            source = opened
        } catch {
            logger.error("cannot open \(quoted(path)) to upload it: \(error)")
            return
        }
        transfers.moving[key] = TransferBook.Moving(direction: .upload, total: source.size)
        do {
            var sender = ChunkSender(tus: tus, sync: sync, replica: replica, source: source, width: max(1, configuration.transfer.parallel),
                                     progress: { [unowned self] read, new in
                                         self.assumeIsolated { $0.transfers.progress(key, done: read, new: new) }
                                     })
            // A repair sends chunks of a file already synced: nobody waits for it.
            if !repair { sender.announcer = InFlightAnnouncer(sync: sync, path: path, size: source.size) }
            let sent = try await sender.run()
            connected()
            let resumed = source.resume.map { " (resumed at byte \($0.offset))" } ?? ""
            logger.info("uploaded \(quoted(path)): \(source.size) bytes in \(sent.chunks) chunk(s), \(sent.bytes) sent now\(resumed)")
            transfers.failed[key] = nil
            failedUploadAttempts[key] = nil
        } catch {
            if stopping || control.paused || Task.isCancelled { return }
            if error is UploadSuperseded || error is ChunkReadError {
                // The file changed under the upload: read it again (its chunks already sent stay on the server).
                logger.info("\(quoted(path)) changed while it was uploaded; reading it again")
                try? await replica.distrustStat(path)
                lookAgain(path)
                return
            }
            if let error = error as? TusError, Self.serverUnreachable(error) { disconnected(error); return }
            if case .transport? = error as? SyncError { disconnected(error); return }
            if let error = error as? SyncError, noteAccess(error) { return }
            let attempts = (failedUploadAttempts[key] ?? 0) + 1
            failedUploadAttempts[key] = attempts
            transfers.failed[key] = TransferBook.Failure(direction: .upload, total: source.size, reason: "\(error)", attempts: attempts)
            let delay = TransferBook.uploadRetryDelay(attempts: attempts)
            logger.error("upload of \(quoted(path)) failed: \(error); tried again in \(Int(delay)) s (sinkid retry: now)")
            // The failure holds the path for its delay; the server may take it then (a larger
            // Tus-Max-Size, say), so the next try asks it again what it offers.
            failure = ApplyFailure(.io, "its upload failed: \(error)")
            transfers.client = nil
        }
    }

    /// Whether a tus failure is the server out of reach (the agent as a whole waits for it), not this file's.
    static func serverUnreachable(_ error: TusError) -> Bool {
        switch error {
        case .transfer(let transfer): return transfer.isTemporary
        case .gaveUp(_, let last): return serverUnreachable(last)
        default: return false
        }
    }

    /// Has the watcher's path look at `path` again (it changed, or is not what the database says).
    func lookAgain(_ path: String) {
        guard let root = rootIndex(of: path), let relative = PathText.afterFirstComponent(path) else { return }
        recheckLater([LocalPath(RootID(root), relative)])
    }

    // MARK: Downloads

    /// The download of `fetch`'s bytes: the one already running for the same content (another page,
    /// a push's conflict, a retry, another path with the same bytes), or a new one, unless one that
    /// ended has left the content waiting. Two downloads of one content would share one partial file
    /// and pull it from under each other; a download leaves the shared ones only once its file is
    /// under its final name.
    func sharedDownload(_ fetch: ContentFetch) -> Task<ApplyFailure?, any Error> {
        let name = fetch.asset?.sha256 ?? fetch.path
        if let running = transfers.downloading[name] { return running }
        let task = Task { () -> ApplyFailure? in
            defer { self.transfers.downloading[name] = nil }
            if let asset = fetch.asset, await self.replica?.hasDownload(asset) == true { return nil }
            return try await self.download(fetch)
        }
        transfers.downloading[name] = task
        return task
    }

    /// Downloads one asset into the state folder (going on from what an earlier try left), checked
    /// against its size and SHA-256; a mismatch is downloaded again, never kept. Returns why it failed
    /// after its last attempt; throws when the server is out of reach or the agent stops.
    private func download(_ fetch: ContentFetch) async throws -> ApplyFailure? {
        guard let asset = fetch.asset, let partialPath = fetch.partialPath, let finalPath = fetch.finalPath else { return nil }
        if asset.isManifest { return try await rebuild(fetch, asset) }
        guard let client = tusClient() else { throw CancellationError() }
        let key = TransferBook.Key.of(.download, fetch.path)
        let size = asset.size
        transfers.moving[key] = TransferBook.Moving(direction: .download, total: size)
        defer { transfers.moving[key] = nil }
        do {
            let received = try await client.download(serverURL + Routes.assets + asset.id, to: partialPath, size: size,
                                                     sha256: asset.sha256,
                                                     progress: { [unowned self] done, total in
                // A resumed download's total is what was left to fetch.
                self.assumeIsolated { $0.transfers.progress(key, done: total > 0 ? size - total + done : done) }
            })
            // Checked whole: under its final name before this download ends (as a manifest's assembler does).
            if rename(partialPath, finalPath) != 0 {
                return ApplyFailure.from(SystemError("rename", errno: errno, path: partialPath))
            }
            logger.debug("downloaded \(quoted(fetch.path)): \(size) bytes, \(received) received now")
            // An earlier failure of this path is over (a later version came whole).
            transfers.failed[key] = nil
        } catch .cancelled {
            throw CancellationError()
        } catch {
            if Self.serverUnreachable(error) {
                disconnected(error)
                throw error
            }
            transfers.failed[key] = TransferBook.Failure(direction: .download, total: size, reason: "\(error)")
            logger.error("download of \(quoted(fetch.path)) failed: \(error); tried again later (or now with sinkid retry)")
            return ApplyFailure(.downloadFailed, "its download failed: \(error)")
        }
        return nil
    }

    /// Builds a manifest asset's file in the state folder: chunks already on this machine are copied
    /// (each checked), the rest downloaded (each checked), `[transfer] parallel` at once. Returns why
    /// it failed; throws when the server is out of reach or the agent stops.
    private func rebuild(_ fetch: ContentFetch, _ asset: Asset) async throws -> ApplyFailure? {
        guard let replica, let sync = client else { throw CancellationError() }
        let key = TransferBook.Key.of(.download, fetch.path)
        guard let chunks = asset.chunks else { return ApplyFailure(.invalid, "bug: a manifest asset without chunks") }
        if let problem = ContentID.manifestProblem(chunks.map { ($0.sha256, $0.size) }, size: asset.size, hash: asset.sha256) {
            return ApplyFailure(.invalid, "the manifest of \(quoted(fetch.path)) is not valid: \(problem)")
        }
        // What was fetched while the sender sent it becomes this download's first chunks.
        let handed = await adoptPrefetch(fetch.path, chunks: chunks, id: asset.sha256)
        transfers.moving[key] = TransferBook.Moving(direction: .download, total: asset.size)
        defer { transfers.moving[key] = nil }
        // With the line when it ends (downloaded, or failed), what ran at once is in the log.
        logger.debug("downloading \(quoted(fetch.path)): \(asset.size) bytes, \(transfers.downloading.count) download(s) running")
        do {
            let assembler = try await replica.assembler(for: asset)
            // An earlier run's chunks are read back and checked: a kill may have lost what the page cache held.
            // Chunks handed over from what was fetched ahead were checked as they were placed, by this run,
            // in a download file made for them (a hand-over never joins an existing one): read back and
            // hashed again they cost a second SHA-256 of the whole file after the record arrived.
            if handed == 0 { _ = await Blocking.run { assembler.recheck() } }
            let wanted = assembler.missing.map { chunks[$0] }
            let (sources, places) = wanted.isEmpty ? ([], [:]) : try await replica.chunkSources(for: wanted)
            let before = assembler.bytesInPlace
            transfers.progress(key, done: before, new: 0)
            // The chunks no file here holds are fetched while those one holds are copied (an edit of a
            // large file: a few fetched, the rest copied); what the copy could not place (a file that
            // changed meanwhile) is fetched after it.
            let copying = sources.isEmpty ? nil : Task { [sources, places] in await Blocking.run { assembler.copyLocal(from: sources, places: places) } }
            var received: Int64 = 0
            /// Fetches the chunks still missing, but those `copied` names (the copy places them).
            func fetchMissing(but copied: [String: (source: Int, offset: Int64)]) async throws -> ChunkFetcher.Outcome {
                var names: [String] = []
                var seen = Set<String>()
                for index in assembler.missing where copied[chunks[index].sha256] == nil && seen.insert(chunks[index].sha256).inserted {
                    names.append(chunks[index].sha256)
                }
                return try await ChunkFetcher(sync: sync, sink: assembler, width: max(1, configuration.transfer.parallel))
                    .run(names) { bytes in
                        received += bytes
                        transfers.progress(key, done: assembler.bytesInPlace, new: received)
                    }
            }
            var outcome: ChunkFetcher.Outcome
            do {
                outcome = try await fetchMissing(but: places)
            } catch {
                _ = await copying?.value
                throw error
            }
            let local = before + (await copying?.value ?? 0)
            if outcome.failure == nil, !assembler.missing.isEmpty { outcome = try await fetchMissing(but: [:]) }
            if let failure = outcome.failure {
                transfers.failed[key] = TransferBook.Failure(direction: .download, total: asset.size, reason: failure.message)
                logger.error("download of \(quoted(fetch.path)) failed: \(failure.message); tried again later (or now with sinkid retry)")
                return failure
            }
            try await Blocking.run { try assembler.finish() }
            logger.debug("downloaded \(quoted(fetch.path)): \(asset.size) bytes, \(received) received now, \(local) from chunks already here")
            // An earlier failure of this path is over (a version sent again after a damaged chunk, say).
            transfers.failed[key] = nil
            return nil
        } catch let error as SyncError {
            if case .transport = error { disconnected(error) }
            throw error
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            return ApplyFailure.from(error)
        }
    }

    // MARK: Control

    /// Clears failed transfers at or below `path` (all without one); returns their paths.
    func retryTransfers(under path: String?) -> [String] {
        let keys = transfers.failed.keys.filter { key in
            guard let path else { return true }
            let failed = TransferBook.Key.path(of: key)
            return PathText.isWithin(failed, path)
        }
        guard !keys.isEmpty else { return [] }
        for key in keys { transfers.failed[key] = nil }
        // The server may have changed what it takes (its maximum size, say): ask it again.
        transfers.client = nil
        logger.info("retrying \(keys.count) failed transfer(s) (sinkid retry)")
        return keys.map(TransferBook.Key.path).sorted()
    }

    /// Ends the running uploads (pause, stop); each keeps where it stands, to go on later.
    func cancelUploads() {
        for task in transfers.uploads.values { task.cancel() }
    }
}
