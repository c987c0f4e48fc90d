import SinkiLoop
import SinkiControl
import SinkiRecord
import SinkiState
import SinkiSupport
import SinkiTransfer
import SinkiWatch

/// What `fetchAssets` brought: the downloads it holds for the apply, and the records whose content
/// could not be fetched, with why.
struct AssetFetchResult {
    var fetched: [AssetFetch] = []
    var failed: [String: ApplyFailure] = [:]
}

extension Agent {
    // MARK: The tus client

    /// The tus client on the agent's HTTP client and loop, set up from `[transfer]`.
    func tusClient() -> TusClient? {
        if let client = transfers.client { return client }
        guard let http = client?.http else { return nil }
        var options = TusOptions()
        options.chunkSize = configuration.transfer.chunkSize
        options.attempts = configuration.transfer.attempts
        options.maxRate = configuration.transfer.maxRate
        options.computeSHA256 = true
        let server = TusServer(endpoint: serverURL + Routes.uploads, bearerToken: client?.bearerToken)
        let made = TusClient(http: http, server: server, options: options, logger: logger.child("tus"))
        transfers.client = made
        return made
    }

    // MARK: Uploads

    /// Starts uploads of large files whose records wait for them, up to `[transfer] parallel` at once.
    func pumpUploads() {
        // Not gated on `reachable`: that turns true only when a long-poll answers, and the tus client
        // retries a server out of reach on its own.
        guard caughtUp, !stopping, !control.paused, accessOpen, !transfers.choosingUploads, let replica else { return }
        let width = max(1, configuration.transfer.parallel)
        guard transfers.uploads.count < width else { return }
        transfers.choosingUploads = true
        let busy = Set(transfers.uploads.keys).union(transfers.failed.keys.filter { $0.hasPrefix("upload:") }.map(TransferBook.Key.path))
        Task {
            let paths: [String]
            do { paths = try await replica.uploadCandidates(limit: width - transfers.uploads.count, excluding: busy) } catch {
                logger.error("cannot list the files to upload: \(error)")
                paths = []
            }
            transfers.choosingUploads = false
            guard !stopping, !control.paused else { return }
            for path in paths where transfers.uploads[path] == nil && transfers.uploads.count < width {
                transfers.uploads[path] = Task { await self.upload(path) }
            }
        }
    }

    /// Sends one large file's chunks that the server lacks (going on from an earlier run) and marks
    /// its record ready to push.
    /// With `repair`, the file is synced and its record is not sent again: only chunks the server
    /// lacks go (a verify found some missing).
    func upload(_ path: String, repair: Bool = false) async {
        let key = TransferBook.Key.of(.upload, path)
        defer {
            transfers.uploads[path] = nil
            transfers.moving[key] = nil
            finishIfIdle()
            pumpUploads()
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
            let sent = try await ChunkSender(tus: tus, sync: sync, replica: replica, source: source, width: max(1, configuration.transfer.parallel),
                                             progress: { [unowned self] read, new in
                                                 self.assumeIsolated { $0.transfers.progress(key, done: read, new: new) }
                                             }).run()
            connected()
            let resumed = source.resume.map { " (resumed at byte \($0.offset))" } ?? ""
            logger.info("uploaded \(quoted(path)): \(source.size) bytes in \(sent.chunks) chunk(s), \(sent.bytes) sent now\(resumed)")
            transfers.failed[key] = nil
            failedUploadAttempts[key] = nil
            if sent.recordWaits { pumpPush() }
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
            Task {
                _ = await sleeper?.sleep(milliseconds: UInt64(delay * 1000))
                // Still failed (not retried by hand, not superseded by a change meanwhile): start it again.
                guard !stopping, transfers.failed[key]?.attempts == attempts else { return }
                transfers.failed[key] = nil
                // The server may take it now (a larger Tus-Max-Size, say): ask it again what it offers.
                transfers.client = nil
                pumpUploads()
            }
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
        recheckLater([(root, relative)])
    }

    // MARK: Downloads

    /// Downloads the assets `records` need, up to `[transfer] parallel` at once, before they are
    /// applied: a record is written only when every byte it names is here and checked. A download that
    /// failed after its last attempt is returned in `failed` (its record is then kept as not applied,
    /// with why, and tried again later); a server out of reach throws. Every download returned is held
    /// until `releaseDownloads`: two callers needing the same bytes never remove them under each other.
    func fetchAssets(_ records: [Record], retrying: Bool = false) async throws -> AssetFetchResult {
        guard let replica, records.contains(where: { $0.asset != nil }) else { return AssetFetchResult() }
        let fetches = try await replica.assetsToFetch(records)
        var result = AssetFetchResult(fetched: fetches)
        if fetches.isEmpty { return result }
        for fetch in fetches { transfers.downloadHolds[fetch.asset.sha256, default: 0] += 1 }
        var needed: [AssetFetch] = []
        for fetch in fetches where !fetch.ready {
            let key = TransferBook.Key.of(.download, fetch.path)
            if let failure = transfers.failed[key], !retrying {
                result.failed[fetch.path] = ApplyFailure(.downloadFailed, "its download failed: \(failure.reason)")
            } else {
                transfers.failed[key] = nil
                needed.append(fetch)
            }
        }
        let width = max(1, configuration.transfer.parallel)
        var start = 0
        while start < needed.count {
            let wave = needed[start..<min(start + width, needed.count)]
            let tasks = wave.map { fetch in sharedDownload(fetch) }
            var thrown: (any Error)?
            await withTaskCancellationHandler {
                for (fetch, task) in zip(wave, tasks) {
                    do {
                        if let failure = try await task.value { result.failed[fetch.path] = failure }
                    } catch { thrown = thrown ?? error }
                }
            } onCancel: {
                for task in tasks { task.cancel() }
            }
            if let thrown {
                await releaseDownloads(result)
                throw thrown
            }
            start += width
        }
        return result
    }

    /// The download of `fetch`'s bytes: the one already running for the same content (another page,
    /// a push's conflict, a retry), or a new one. Two downloads of one content would share one partial
    /// file and pull it from under each other.
    private func sharedDownload(_ fetch: AssetFetch) -> Task<ApplyFailure?, any Error> {
        if let running = transfers.downloading[fetch.asset.sha256] { return running }
        let task = Task { () -> ApplyFailure? in
            defer { self.transfers.downloading[fetch.asset.sha256] = nil }
            return try await self.download(fetch)
        }
        transfers.downloading[fetch.asset.sha256] = task
        return task
    }

    /// Lets go of downloads `fetchAssets` returned; the last holder of one that the apply did not
    /// consume removes it.
    func releaseDownloads(_ result: AssetFetchResult) async {
        guard let replica else { return }
        var unused: [AssetFetch] = []
        for fetch in result.fetched {
            let left = (transfers.downloadHolds[fetch.asset.sha256] ?? 1) - 1
            transfers.downloadHolds[fetch.asset.sha256] = left > 0 ? left : nil
            if left <= 0 { unused.append(fetch) }
        }
        if !unused.isEmpty { await replica.discardDownloads(unused) }
    }

    /// Downloads one asset into the state folder (going on from what an earlier try left), checked
    /// against its size and SHA-256; a mismatch is downloaded again, never kept. Returns why it failed
    /// after its last attempt; throws when the server is out of reach or the agent stops.
    private func download(_ fetch: AssetFetch) async throws -> ApplyFailure? {
        if fetch.asset.isManifest { return try await rebuild(fetch) }
        guard let replica, let client = tusClient() else { throw CancellationError() }
        let key = TransferBook.Key.of(.download, fetch.path)
        let size = fetch.asset.size
        transfers.moving[key] = TransferBook.Moving(direction: .download, total: size)
        defer { transfers.moving[key] = nil }
        do {
            let received = try await client.download(serverURL + Routes.assets + fetch.asset.id, to: fetch.partialPath, size: size,
                                                     sha256: fetch.asset.sha256,
                                                     progress: { [unowned self] done, total in
                // A resumed download's total is what was left to fetch.
                self.assumeIsolated { $0.transfers.progress(key, done: total > 0 ? size - total + done : done) }
            })
            logger.debug("downloaded \(quoted(fetch.path)): \(size) bytes, \(received) received now")
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
        do { try await replica.downloadFinished(fetch) } catch {
            return ApplyFailure.from(error)
        }
        return nil
    }

    /// Builds a manifest asset's file in the state folder: chunks already on this machine are copied
    /// (each checked), the rest downloaded (each checked), `[transfer] parallel` at once. Returns why
    /// it failed; throws when the server is out of reach or the agent stops.
    private func rebuild(_ fetch: AssetFetch) async throws -> ApplyFailure? {
        guard let replica, let sync = client else { throw CancellationError() }
        let asset = fetch.asset
        let key = TransferBook.Key.of(.download, fetch.path)
        guard let chunks = asset.chunks else { return ApplyFailure(.invalid, "bug: a manifest asset without chunks") }
        if let problem = ContentID.manifestProblem(chunks.map { ($0.sha256, $0.size) }, size: asset.size, hash: asset.sha256) {
            return ApplyFailure(.invalid, "the manifest of \(quoted(fetch.path)) is not valid: \(problem)")
        }
        transfers.moving[key] = TransferBook.Moving(direction: .download, total: asset.size)
        defer { transfers.moving[key] = nil }
        do {
            let assembler = try await replica.assembler(for: asset)
            // An earlier run's chunks are read back and checked: a kill may have lost what the page cache held.
            try await Blocking.run { assembler.recheck() }
            let wanted = assembler.missing.map { chunks[$0] }
            if !wanted.isEmpty {
                let (sources, places) = try await replica.chunkSources(for: wanted)
                if !sources.isEmpty { _ = try await Blocking.run { assembler.copyLocal(from: sources, places: places) } }
            }
            let local = assembler.bytesInPlace
            transfers.progress(key, done: local, new: 0)
            var names: [String] = []
            var seen = Set<String>()
            for index in assembler.missing where seen.insert(chunks[index].sha256).inserted { names.append(chunks[index].sha256) }
            var received: Int64 = 0
            let outcome = try await ChunkFetcher(sync: sync, assembler: assembler, width: max(1, configuration.transfer.parallel),
                                                 maxRate: configuration.transfer.maxRate)
                .run(names) { bytes in
                    received += bytes
                    transfers.progress(key, done: assembler.bytesInPlace, new: received)
                }
            if let failure = outcome.failure {
                transfers.failed[key] = TransferBook.Failure(direction: .download, total: asset.size, reason: failure.message)
                logger.error("download of \(quoted(fetch.path)) failed: \(failure.message); tried again later (or now with sinkid retry)")
                return failure
            }
            try await Blocking.run { try assembler.finish() }
            logger.debug("downloaded \(quoted(fetch.path)): \(asset.size) bytes, \(received) received now, \(local) from chunks already here")
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
        pumpUploads()
        return keys.map(TransferBook.Key.path).sorted()
    }

    /// Ends the running uploads (pause, stop); each keeps where it stands, to go on later.
    func cancelUploads() {
        for task in transfers.uploads.values { task.cancel() }
    }
}
