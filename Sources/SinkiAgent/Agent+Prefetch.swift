import SinkiLoop
import SinkiRecord
import SinkiState
import SinkiSupport
import SinkiTransfer

/// Large files other devices are sending now, fetched here as their chunks reach the server
/// (docs/architecture.md, "Streaming"): a partial file per sender's session in `STATE/prefetch`, which
/// the file's download takes over once its record comes (`adoptPrefetch`). A cache, never state: a
/// restart clears it, and nothing in it reaches a root but through a download that checks every chunk.
struct PrefetchBook {
    struct Session {
        var file: PrefetchFile
        var size: Int64
        var task: Task<Void, Never>?
        /// More chunks were announced while the task fetched: it goes round once more.
        var more = false
        /// The sender's session ended (saved, given up, replaced); the file waits for its record.
        var ended = false
        var startedAt: Int64
    }

    /// By session name.
    var sessions: [String: Session] = [:]
    var byPath: [PathKey: String] = [:]
    /// Where the feed's in-flight news stands (`inflight=` on the next request).
    var position: Int64 = 0
    /// Sessions done with here (taken over, dropped), newest last: a page asked for before the news of
    /// their end was read tells of them again, and must not start them over.
    private(set) var finished: [String] = []
    private var finishedSet = Set<String>()

    mutating func finish(_ session: String) {
        guard finishedSet.insert(session).inserted else { return }
        finished.append(session)
        if finished.count > 256 { finishedSet.remove(finished.removeFirst()) }
    }

    func isFinished(_ session: String) -> Bool { finishedSet.contains(session) }

    /// Files fetched ahead at once, at most; later announcements wait for their records.
    static let maxSessions = 8

    var isIdle: Bool { sessions.values.allSatisfy { $0.task == nil } }
}

extension Agent {
    var prefetchDirectory: String { configuration.stateDirectory + "/prefetch" }
    var downloadsDirectory: String { configuration.stateDirectory + "/downloads" }

    /// The feed's news of files in flight: new chunks fetched, ended sessions stopped.
    func takeInFlight(_ news: InFlightNews) {
        prefetch.position = news.position
        for session in news.ended { endPrefetch(session) }
        for session in news.abandoned { dropPrefetch(session) }
        for file in news.files { prefetchFile(file) }
    }

    /// Records came for these paths: a file fetched ahead whose record names no manifest (a delete, a
    /// small file) has nothing to hand over to, and goes.
    func recordsArrived(_ records: [Record]) {
        guard !prefetch.byPath.isEmpty else { return }
        for record in records where record.deleted || record.asset?.chunks == nil {
            if let id = prefetch.byPath[PathKey(record.path)] { dropPrefetch(id) }
        }
    }

    private func prefetchFile(_ file: InFlightNews.File) {
        guard !stopping, !control.paused, let root = rootIndex(of: file.path), control.pausedRoots[configuration.roots[root].name] == nil,
              (try? RecordPath(validating: file.path)) != nil, InFlightAnnouncement.isSession(file.session) else { return }
        guard !prefetch.isFinished(file.session) else { return }
        if let id = prefetch.byPath[PathKey(file.path)], id != file.session { dropPrefetch(id) }
        if prefetch.sessions[file.session] == nil {
            // Joined late (a restart here): a session is taken only from its first chunk on.
            guard file.index == 0 else { return }
            if prefetch.sessions.count >= PrefetchBook.maxSessions, let oldest = prefetch.sessions.filter({ $0.value.ended })
                .min(by: { $0.value.startedAt < $1.value.startedAt })?.key { dropPrefetch(oldest) }
            guard prefetch.sessions.count < PrefetchBook.maxSessions,
                  let made = try? PrefetchFile(session: file.session, path: file.path, directory: prefetchDirectory) else { return }
            prefetch.sessions[file.session] = PrefetchBook.Session(file: made, size: file.size, startedAt: Clock.monotonic())
            prefetch.byPath[PathKey(file.path)] = file.session
            logger.debug("fetching \(quoted(file.path)) while \(file.device) sends it (\(HumanUnits.bytes(file.size)), session \(file.session))")
        }
        guard var session = prefetch.sessions[file.session], !session.ended else { return }
        session.file.extend(from: file.index, with: file.chunks)
        if session.task == nil {
            let id = file.session
            session.task = Task { await self.runPrefetch(id) }
        } else {
            session.more = true
        }
        prefetch.sessions[file.session] = session
    }

    /// Fetches what a session announced and this machine holds nowhere, `[transfer] parallel` at once,
    /// until nothing new was announced meanwhile.
    private func runPrefetch(_ id: String) async {
        guard let session = prefetch.sessions[id], let replica, let sync = client else { return }
        let file = session.file
        let key = TransferBook.Key.of(.download, file.path)
        // Shown as a download of the path (and so never "up to date" meanwhile), unless one runs already.
        let shown = transfers.moving[key] == nil
        if shown { transfers.moving[key] = TransferBook.Moving(direction: .download, total: session.size) }
        defer {
            if shown { transfers.moving[key] = nil }
            prefetch.sessions[id]?.task = nil
            finishIfIdle()
            Task { await self.sayIfUpToDate() }
        }
        while !Task.isCancelled && !stopping {
            prefetch.sessions[id]?.more = false
            let missing = file.missing
            // Chunks a file here holds are copied when the record comes, not fetched.
            let here = (try? await replica.chunksHeldHere(missing)) ?? []
            let wanted = missing.filter { !here.contains($0) }
            if !wanted.isEmpty {
                let fetcher = ChunkFetcher(sync: sync, sink: file, width: max(1, configuration.transfer.parallel))
                let outcome: ChunkFetcher.Outcome
                do {
                    outcome = try await fetcher.run(wanted) { _ in
                        if shown { transfers.progress(key, done: file.progress.done) }
                    }
                } catch {
                    return
                }
                if let failure = outcome.failure {
                    logger.debug("stopped fetching \(quoted(file.path)) ahead of its record: \(failure.message)")
                    return
                }
            }
            guard prefetch.sessions[id]?.more == true else { return }
        }
    }

    /// The sender's session ended: nothing more will be announced. What was fetched waits for the record.
    private func endPrefetch(_ id: String) {
        guard var session = prefetch.sessions[id] else {
            prefetch.finish(id)
            return
        }
        session.ended = true
        session.task?.cancel()
        prefetch.sessions[id] = session
    }

    /// Forgets a session and removes its file (once its fetching has stopped).
    private func dropPrefetch(_ id: String) {
        prefetch.finish(id)
        guard let session = prefetch.sessions.removeValue(forKey: id) else { return }
        logger.debug("dropped what was fetched ahead of \(quoted(session.file.path)) (session \(id))")
        if prefetch.byPath[PathKey(session.file.path)] == id { prefetch.byPath[PathKey(session.file.path)] = nil }
        session.task?.cancel()
        let file = session.file
        Task {
            await session.task?.value
            file.discard()
        }
    }

    /// The download of `path`'s manifest `id` (`chunks`) takes over what was fetched ahead of the record,
    /// as far as it matches; the rest of the partial file goes. Returns the bytes handed over.
    func adoptPrefetch(_ path: String, chunks: [ChunkRef], id: String) async -> Int64 {
        guard let sessionID = prefetch.byPath.removeValue(forKey: PathKey(path)),
              let session = prefetch.sessions.removeValue(forKey: sessionID) else { return 0 }
        prefetch.finish(sessionID)
        session.task?.cancel()
        await session.task?.value
        let file = session.file, directory = downloadsDirectory
        let handed = (try? await Blocking.run { try file.handOver(to: chunks, id: id, directory: directory) }) ?? 0
        if handed == 0 {
            file.discard()
        } else {
            logger.info("\(quoted(path)): \(handed) bytes of it fetched while it was sent")
        }
        return handed
    }

    /// Nothing waits here any more: files whose sessions were saved and whose records' downloads did not
    /// take them over (the content was here already, a conflict kept it aside) go.
    func dropEndedPrefetches() {
        for (id, session) in prefetch.sessions where session.ended { dropPrefetch(id) }
    }

    /// Stops fetching ahead (pause, stop); the files stay until their records or the next start.
    func cancelPrefetches() {
        for session in prefetch.sessions.values { session.task?.cancel() }
    }
}
