import SinkiControl
import SinkiRecord
import SinkiState
import SinkiSupport
import SinkiTransfer
import SinkiWatch

/// Downloads a transfer waits for: one failed after its last attempt, and waits for `sinkid retry`.
struct TransferStalled: Error, CustomStringConvertible {
    var path: String
    var reason: String
    var description: String { "the download of \(quoted(path)) failed (\(reason)); remote changes wait for sinkid retry" }
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
        let server = TusServer(endpoint: serverURL + "/v1/uploads/", bearerToken: configuration.token)
        let made = TusClient(http: http, server: server, options: options, logger: logger.child("tus"))
        transfers.client = made
        return made
    }

    // MARK: Uploads

    /// Starts uploads of large files whose records wait for them, up to `[transfer] parallel` at once.
    func pumpUploads() {
        // Not gated on `reachable`: that turns true only when a long-poll answers, and the tus client
        // retries a server out of reach on its own.
        guard caughtUp, !stopping, !control.paused, !transfers.choosingUploads, let replica else { return }
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

    /// Uploads one file (or goes on with its earlier upload) and marks its record ready to push.
    private func upload(_ path: String) async {
        let key = TransferBook.Key.of(.upload, path)
        defer {
            transfers.uploads[path] = nil
            transfers.moving[key] = nil
            finishIfIdle()
            pumpUploads()
        }
        guard let replica, let client = tusClient() else { return }
        let source: UploadSource
        do {
            guard let opened = try await replica.openForUpload(path) else {
                lookAgain(path)
                return
            }
            source = opened
        } catch {
            logger.error("cannot open \(quoted(path)) to upload it: \(error)")
            return
        }
        if let stale = source.stale.flatMap(TusUploadState.init(encoded:)) {
            // An upload of content this path no longer has.
            for url in stale.parts.map(\.url) + (stale.url.map { [$0] } ?? []) {
                do { try await client.terminate(url) } catch { logger.debug("terminating \(url): \(error)") }
            }
        }
        transfers.moving[key] = TransferBook.Moving(direction: .upload, total: source.size)
        let name = path.split(separator: "/").last.map(String.init) ?? path
        let held = source
        do {
            let result = try await client.upload(
                file: source.file.procPath, metadata: TusMetadata(text: [("filename", name)]),
                resume: source.resume.flatMap(TusUploadState.init(encoded:)),
                persist: { state in try await replica.saveUpload(held, state: state.encoded) },
                progress: { [unowned self] done, _ in self.assumeIsolated { $0.transfers.progress(key, done: done) } })
            guard result.sha256 == source.sha256 else {
                logger.warning("\(quoted(path)) changed while it was uploaded (the bytes sent hash to \(result.sha256?.prefix(16) ?? "?")…); "
                    + "uploading it again once it is read")
                do { try await client.terminate(result.url) } catch { logger.debug("terminating \(result.url): \(error)") }
                try? await replica.dropUpload(path)
                lookAgain(path)
                return
            }
            guard let id = result.url.split(separator: "/").last.map(String.init), !id.isEmpty else {
                throw TusError.protocolViolation(url: result.url, detail: "the upload's URL names no id")
            }
            try await replica.uploadFinished(source, assetID: id)
            connected()
            logger.info("uploaded \(quoted(path)): \(result.size) bytes, \(result.bytesSent) sent now\(result.resumed ? " (resumed)" : "")")
            transfers.failed[key] = nil
            pumpPush()
        } catch {
            if stopping || control.paused || Task.isCancelled { return }
            if let row = try? await replica.knownFile(path), !row.present || row.sha256 != source.sha256 {
                // Changed meanwhile: the new content gets its own upload once it is hashed.
                logger.info("\(quoted(path)) changed while it was uploaded; uploading it again once it is read")
                return
            }
            if let error = error as? TusError {
                var changed = false
                if case .fileChanged = error { changed = true }
                if case .transfer(.bodyShrank) = error { changed = true }
                if changed {
                    logger.info("\(quoted(path)) changed while it was uploaded (\(error)); reading it again")
                    lookAgain(path)
                    return
                }
                if Self.serverUnreachable(error) { disconnected(error); return }
            }
            transfers.failed[key] = TransferBook.Failure(direction: .upload, total: source.size, reason: "\(error)")
            logger.error("upload of \(quoted(path)) failed: \(error); sinkid retry starts it again")
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
        guard let slash = path.firstIndex(of: "/"), let root = configuration.roots.firstIndex(where: { $0.name == path[..<slash] }) else { return }
        recheckLater([(root, String(path[path.index(after: slash)...]))])
    }

    // MARK: Downloads

    /// Downloads the assets `records` need, up to `[transfer] parallel` at once, before they are
    /// applied: a page is applied only when every byte it names is here and checked. Returns what was
    /// fetched, for `Replica.discardDownloads` once applied.
    func fetchAssets(_ records: [Record]) async throws -> [AssetFetch] {
        guard let replica, records.contains(where: { $0.asset != nil }) else { return [] }
        let fetches = try await replica.assetsToFetch(records)
        if fetches.isEmpty { return [] }
        for fetch in fetches where !fetch.ready {
            if let failure = transfers.failed[TransferBook.Key.of(.download, fetch.path)] {
                throw TransferStalled(path: fetch.path, reason: failure.reason)
            }
        }
        let needed = fetches.filter { !$0.ready }
        let width = max(1, configuration.transfer.parallel)
        var start = 0
        while start < needed.count {
            let wave = needed[start..<min(start + width, needed.count)]
            let tasks = wave.map { fetch in Task { try await self.download(fetch) } }
            var failure: (any Error)?
            await withTaskCancellationHandler {
                for task in tasks {
                    do { try await task.value } catch { failure = failure ?? error }
                }
            } onCancel: {
                for task in tasks { task.cancel() }
            }
            if let failure { throw failure }
            start += width
        }
        return fetches
    }

    /// Downloads one asset into the state folder (going on from what an earlier try left), checked
    /// against its size and SHA-256; a mismatch is downloaded again, never kept.
    private func download(_ fetch: AssetFetch) async throws {
        guard let replica, let client = tusClient() else { throw CancellationError() }
        let key = TransferBook.Key.of(.download, fetch.path)
        let size = fetch.asset.size
        transfers.moving[key] = TransferBook.Moving(direction: .download, total: size)
        defer { transfers.moving[key] = nil }
        do {
            let received = try await client.download(serverURL + "/v1/assets/" + fetch.asset.id, to: fetch.partialPath, size: size,
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
            } else {
                transfers.failed[key] = TransferBook.Failure(direction: .download, total: size, reason: "\(error)")
                logger.error("download of \(quoted(fetch.path)) failed: \(error); sinkid retry starts it again")
            }
            throw error
        }
        try await replica.downloadFinished(fetch)
    }

    // MARK: Control

    /// Clears failed transfers at or below `path` (all without one); returns their paths.
    func retryTransfers(under path: String?) -> [String] {
        let keys = transfers.failed.keys.filter { key in
            guard let path else { return true }
            let failed = TransferBook.Key.path(of: key)
            return failed == path || failed.hasPrefix(path + "/")
        }
        guard !keys.isEmpty else { return [] }
        for key in keys { transfers.failed[key] = nil }
        // The server may have changed what it takes (its maximum size, say): ask it again.
        transfers.client = nil
        logger.info("retrying \(keys.count) failed transfer(s) (sinkid retry)")
        if keys.contains(where: { $0.hasPrefix("download:") }) { sleeper?.wakeAll() }
        pumpUploads()
        return keys.map(TransferBook.Key.path).sorted()
    }

    /// Ends the running uploads (pause, stop); each keeps where it stands, to go on later.
    func cancelUploads() {
        for task in transfers.uploads.values { task.cancel() }
    }
}
