import Glibc
import SinkiControl
import SinkiLoop
import SinkiRecord
import SinkiState
import SinkiSupport
import SinkiTransfer

/// `ask` conflicts every device of the user knows (docs/protocol.md, "Conflicts left for resolve"):
/// the device that finds one records it on the server (`SharedConflict`), the others list it from
/// their feed, any of them settles it, and its record's tombstone tells the rest.
extension Agent {
    /// Sends what the server is to hear of conflicts: records of those found here, tombstones of those
    /// settled here. Runs while the server answers and the feed is read; one run at a time; what fails
    /// to reach the server goes on the next pump (after the next rounds, or the next contact).
    func pumpSharedConflicts() {
        if sharedConflictsTask != nil {
            sharedConflictsWanted = true
            return
        }
        guard !stopping, !control.paused, caughtUp, accessOpen, reachable == true, replica != nil else { return }
        sharedConflictsTask = Task {
            repeat {
                sharedConflictsWanted = false
                await self.sendSharedConflicts()
            } while sharedConflictsWanted && !stopping && !Task.isCancelled
            sharedConflictsTask = nil
            finishIfIdle()
        }
    }

    private func sendSharedConflicts() async {
        guard let replica else { return }
        // A few passes: an answer may ask for another try at once (a tombstone to base on); more waits
        // for the next pump.
        for _ in 0..<3 where !stopping && !control.paused && !Task.isCancelled {
            let work: (share: [ConflictShare], settle: [Record])
            do { work = try await replica.sharedConflictWork() } catch {
                logger.error("cannot read the conflicts to record on the server: \(error)")
                return
            }
            if work.share.isEmpty && work.settle.isEmpty { return }
            for item in work.share {
                var record = item.record
                if item.large {
                    do { record.asset = try await uploadAside(item) } catch {
                        if case .transport? = error as? SyncError { disconnected(error); return }
                        logger.warning("cannot send the chunks of \(quoted(item.path))'s version kept aside: \(error); tried again later")
                        return
                    }
                }
                guard let result = await saveOne(record) else { return }
                do { try await replica.conflictShared(item.path, sent: record, result: result) } catch {
                    logger.error("cannot note the conflict on \(quoted(item.path)) as recorded: \(error)")
                    return
                }
            }
            for tombstone in work.settle {
                guard let path = SharedConflict.conflictPath(of: tombstone.path), let result = await saveOne(tombstone) else { return }
                do { try await replica.sharedConflictDeleted(path, result: result) } catch {
                    logger.error("cannot note the conflict on \(quoted(path)) as settled: \(error)")
                    return
                }
            }
        }
    }

    /// One record sent alone: the server's answer for it, or nil when the server could not be reached
    /// or refused the request as a whole (said where it belongs: unreachable, token refused).
    private func saveOne(_ record: Record) async -> ModifyResult? {
        guard let client else { return nil }
        do {
            let response = try await client.modify(records: [record])
            connected()
            return response.results.first
        } catch {
            if case .transport = error {
                disconnected(error)
            } else if !noteAccess(error) {
                // A refusal of the request itself (too large, bad): the item's refusal, so it is not sent again and again.
                if case let .problem(problem) = error { return ModifyResult(path: record.path, status: .refused, problem: problem) }
                logger.warning("cannot record \(quoted(record.path)) on the server: \(error)")
            }
            return nil
        }
    }

    /// The chunks of a large version kept aside, sent as the agent sends any large file's (only those
    /// the server lacks); its manifest, which must name the very version recorded.
    private func uploadAside(_ item: ConflictShare) async throws -> Asset {
        guard let sync = client else { throw CancellationError() }
        let file = try HeldFile.open(item.copy, flags: O_RDONLY | O_NOFOLLOW)
        let reader = ChunkFileReader(file: file, size: item.record.size, from: 0)
        var chunks: [ChunkRef] = []
        while true {
            let batch = try await Blocking.run { try reader.next(maxBytes: ChunkSender.batchBytes) }
            if batch.isEmpty { break }
            let lacking = Set(try await sync.missingChunks(batch.map(\.ref.sha256)))
            var named = Set<String>()
            let unchecked = batch.filter { lacking.contains($0.ref.sha256) && named.insert($0.ref.sha256).inserted }
            if !unchecked.isEmpty {
                let toSend = await Blocking.run { ChunkFileReader.withChecksums(unchecked) }
                _ = try await sync.upload(toSend)
            }
            chunks += batch.map(\.ref)
        }
        guard let manifest = ContentID.manifestHash(hex: chunks.map { ($0.sha256, $0.size) }), manifest == item.record.sha256 else {
            throw ResolveError("the copy kept aside is no longer the version found in conflict")
        }
        return Asset(manifestHash: manifest, chunks: chunks)
    }

    /// `sinkid resolve` here for a conflict another device found, settled through the server: `local`
    /// keeps what the path holds (the other device's version is dropped everywhere), `remote` saves the
    /// other device's version over the path, `both` saves it beside the path under a conflict copy's
    /// name. Then its record's tombstone goes: every device stops listing it, and the device that found
    /// it takes what the path holds now. What this device writes comes from the feed like any change.
    func resolveShared(_ shared: SharedResolution, keep: KeepChoice) async throws(ControlError) -> ControlAck {
        guard let replica, let client else { throw ControlError(.unavailable, "the agent is not ready") }
        let other = shared.conflict.device, path = shared.path
        let message: String
        switch keep {
        case .local:
            message = "kept this machine's version of \(quoted(path)); the version from \(other) is dropped on every device"
        case .remote, .both:
            let held: Record?
            do { held = try await client.record(at: SharedConflict.recordPath(for: path)) } catch {
                if case .transport = error { disconnected(error) }
                throw ControlError(.unavailable, "cannot read the version from \(other) on the server: \(error.cause)")
            }
            guard let held, !held.deleted, held.changeTag == shared.conflict.tag else {
                throw ControlError(.failed, "the conflict on \(quoted(path)) changed on the server meanwhile (settled, or found again); sinkid conflicts shows it as it is")
            }
            let target = keep == .remote ? path : shared.copyPath
            let save = Record(path: target, type: held.type, data: held.data, asset: held.asset, baseTag: keep == .remote ? shared.remoteTag : 0,
                              size: held.size, sha256: held.sha256, mode: held.mode, modifiedAt: held.modifiedAt, device: configuration.device)
            let result: ModifyResult?
            do { result = try await client.modify(records: [save]).results.first } catch {
                if case .transport = error { disconnected(error) }
                throw ControlError(.unavailable, "cannot save the version from \(other) on the server: \(error.cause)")
            }
            switch result?.status {
            case .saved?: break
            case .conflict?:
                throw ControlError(.failed, "\(quoted(target)) changed on the server meanwhile (by \(result?.record?.device ?? "another device")); "
                                   + "nothing was settled: try again once this agent has it (sinkid status)")
            default:
                throw ControlError(.failed, "the server did not take the version from \(other) at \(quoted(target)): \(result?.problem.map { "\($0)" } ?? "no answer")")
            }
            message = keep == .remote
                ? "took the version from \(other) for \(quoted(path)) on every device"
                : "kept this machine's version of \(quoted(path)); the version from \(other) is kept beside it as \(quoted(target)) on every device"
        }
        do { try await replica.settleShared(path) } catch {
            throw ControlError(.failed, "cannot note the conflict on \(quoted(path)) as settled: \(error)")
        }
        logger.info("sinkid resolve --keep \(keep.rawValue): \(message)")
        pumpSharedConflicts()
        pumpSync()
        return ControlAck(message)
    }
}
