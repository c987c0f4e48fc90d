import SinkiControl
import SinkiLoop
import SinkiRecord
import SinkiState
import SinkiSupport
import SinkiTransfer

/// The full comparison with the server (anti-entropy): when it runs, what it last found.
struct VerifyState {
    var running = false
    /// Differences repaired so far by the comparison running now.
    var repairedThisRun = 0
    /// Callers waiting for the comparison running now (`sinkid sync --verify`).
    var waiters: [CheckedContinuation<VerifyRecord, Never>] = []
    var last: VerifyRecord?
    var timer: LoopTimer?
    var nextRun: Int64?

    /// Rounds of one comparison at most: each repairs what it found, the next checks the repairs
    /// (and what changed meanwhile). Still different after the last, the paths are shown as differing.
    static let rounds = 3
    /// Records per page asked of the server.
    static let page = 1000
}

extension Agent {
    /// Compares every record here with the server's and repairs what differs (see `Replica.compare`),
    /// round after round until one finds nothing (at most `VerifyState.rounds`); returns what the last
    /// comparison found. A comparison already running is joined. With `adoptHead`, the feed position
    /// (forgotten because the server no longer knew it) becomes the server's position before the
    /// listing: what the feed's lost history held, the comparison has brought in.
    @discardableResult
    func verifyNow(_ why: String, adoptHead: Bool = false, storeReplaced: Bool = false) async -> VerifyRecord {
        if verify.running {
            return await withCheckedContinuation { verify.waiters.append($0) }
        }
        verify.running = true
        verify.repairedThisRun = 0
        logger.info("comparing every record with the server (\(why))")
        let started = Clock.monotonic()
        let outcome = await compareRounds(adoptHead: adoptHead, storeReplaced: storeReplaced)
        verify.running = false
        verify.last = outcome
        try? await replica?.saveVerify(outcome)
        // Every page listed went into the Remote tree: it holds all the server has in the roots now.
        if outcome.result == "same" || outcome.result == "repaired" { try? await replica?.markRemoteSeeded() }
        let seconds = String(format: "%.2f", Double(Clock.monotonic() - started) / 1e9)
        switch outcome.result {
        case "same": logger.info("compared with the server in \(seconds) s: the same")
        case "repaired": logger.info("compared with the server in \(seconds) s: \(outcome.repaired) difference(s) repaired; now the same")
        default: logger.error("compared with the server in \(seconds) s: \(outcome.detail ?? outcome.result)")
        }
        let waiters = verify.waiters
        verify.waiters = []
        for waiter in waiters { waiter.resume(returning: outcome) }
        if outcome.result == "differing" || outcome.result == "failed" { verifySoon() }
        control.notifier?.status(serviceStatus)
        return outcome
    }

    private func compareRounds(adoptHead: Bool, storeReplaced: Bool) async -> VerifyRecord {
        var repaired = 0
        var differing: [String] = []
        do {
            for round in 1...VerifyState.rounds {
                if stopping { throw CancellationError() }
                differing = try await compareOnce(adoptHead: adoptHead && round == 1, storeReplaced: storeReplaced && round == 1)
                if differing.isEmpty {
                    return VerifyRecord(finishedAt: Clock.now(), result: repaired == 0 ? "same" : "repaired", repaired: repaired,
                                        differing: [], detail: repaired == 0 ? nil : "\(repaired) difference(s) repaired")
                }
                repaired += differing.count
                verify.repairedThisRun = repaired
                logger.warning("full comparison, round \(round): \(differing.count) path(s) differed from the server "
                    + "(\(differing.prefix(5).joined(separator: ", "))\(differing.count > 5 ? ", …" : "")); repaired")
                await settleAfterRepairs()
            }
            return VerifyRecord(finishedAt: Clock.now(), result: "differing", repaired: repaired, differing: differing,
                                detail: "\(differing.count) path(s) still differ from the server after \(VerifyState.rounds) rounds of repairs")
        } catch {
            return VerifyRecord(finishedAt: Clock.now(), result: "failed", repaired: repaired, differing: [],
                                detail: "the comparison could not finish: \(error)")
        }
    }

    /// One comparison of every root, page by page; returns the paths that differed (all repaired or
    /// on their way: queued to send, applied, or kept as not applied with why).
    private func compareOnce(adoptHead: Bool, storeReplaced: Bool) async throws -> [String] {
        guard let replica, let client else { throw CancellationError() }
        var differing: [String] = []
        var head: String?
        var historyFloor: Int64 = 0
        let applied = FeedToken.tag(of: try await replica.feedToken(server: feedKey))
        for (index, root) in configuration.roots.enumerated() {
            let id = RootID(index)
            // A paused root is compared once it goes on: its differences are to be left alone until then.
            guard !heldRoots.contains(id) else { continue }
            // Local truth first: what the disk holds now is in the database before it is compared.
            let scan = try await replica.reconcile(LocalPath(id, ""), progress: pushProgress)
            note(scan, root: id)
            var after = ""
            while true {
                let page = try await client.list(prefix: root.name, after: after.isEmpty ? nil : after, limit: VerifyState.page)
                connected()
                if head == nil { head = page.token }
                historyFloor = max(historyFloor, page.floor ?? 0)
                // Against a store made afresh, tags agreed with the old one compare with nothing.
                let listedAt = storeReplaced ? .max : FeedToken.tag(of: head) ?? .max
                let last = page.more ? page.records.last?.path : nil
                // After the server forgot our position, everything up to the listing is ours to bring in.
                let readThrough = storeReplaced ? .max : adoptHead ? listedAt : min(listedAt, applied ?? .max)
                let mismatched = try await replica.compare(root: id, server: page.records, after: after, through: last,
                                                           floor: page.floor ?? 0, readThrough: readThrough)
                differing += mismatched.map(\.path)
                guard let last else { break }
                after = last
            }
        }
        if adoptHead, let head { try await replica.adoptFeedPosition(FeedToken.atLeast(head, floor: historyFloor)) }
        differing += try await repairChunks()
        pumpSync()
        return differing
    }

    /// Asks the server for the chunks of every large file held here as synced, and uploads again those
    /// it lacks (removed as damaged when a receiver reported them, say): another device could never
    /// build that file otherwise. Returns the paths whose chunks were sent again.
    private func repairChunks() async throws -> [String] {
        guard let replica, let client else { throw CancellationError() }
        var repaired: [String] = []
        var after = ""
        while true {
            let held = try await replica.heldManifests(after: after, limit: 256)
            guard let last = held.last else { break }
            after = last.path
            var names: [String] = []
            var seen = Set<String>()
            for file in held { for chunk in file.chunks where seen.insert(chunk.sha256).inserted { names.append(chunk.sha256) } }
            var missing = Set<String>()
            var start = 0
            while start < names.count {
                let slice = Array(names[start..<min(start + ChunkNamesRequest.mostToCheck, names.count)])
                missing.formUnion(try await client.missingChunks(slice))
                start += slice.count
            }
            for file in held where file.chunks.contains(where: { missing.contains($0.sha256) }) {
                logger.warning("the server lacks chunks of \(quoted(file.path)); sending them again")
                await upload(file.path, repair: true)
                repaired.append(file.path)
            }
        }
        return repaired
    }


    /// Between rounds: what the repairs made differ is carried out (sent, written, failures tried
    /// again), so that the next round finds it done.
    private func settleAfterRepairs() async {
        guard let replica else { return }
        await replica.retryFailures(under: nil)
        await syncUntilSettled()
        let deadline = Clock.monotonic() + 30_000_000_000
        while !stopping, Clock.monotonic() < deadline, !(pushTasks.isEmpty && transfers.uploads.isEmpty && !rounds.running) {
            guard let sleeper else { break }
            _ = await sleeper.sleep(milliseconds: 50) // the pushes' answers come on the loop meanwhile
        }
    }

    /// Compares again a minute from now (after a comparison that could not finish, or that still found
    /// differences: those may have been changes on their way that have arrived since).
    func verifySoon() {
        guard let sleeper else { return }
        Task {
            _ = await sleeper.sleep(milliseconds: 60_000)
            guard !stopping, caughtUp, !verify.running else { return }
            await verifyNow("checking again what the last comparison found")
        }
    }

    /// What status shows of the comparisons.
    var verifySummary: VerifySummary {
        let last = verify.last
        return VerifySummary(lastRun: last?.finishedAt, result: last?.result, repaired: last?.repaired ?? 0,
                             differing: last?.result == "differing" ? last?.differing ?? [] : [], detail: last?.detail,
                             running: verify.running, nextRun: verify.nextRun)
    }

    /// Starts the periodic comparison (`[agent] verify-interval`, ±10 %); with nothing else to do an
    /// agent sleeps in one timer between them.
    func scheduleVerify() {
        guard configuration.verifySeconds > 0, !stopping else { return }
        let timer = verify.timer ?? LoopTimer(loop: loop)
        verify.timer = timer
        let seconds = configuration.verifySeconds * Double.random(in: 0.9...1.1)
        verify.nextRun = Clock.now() + Int64(seconds * 1e9)
        timer.start(after: UInt64(seconds * 1000)) { [unowned self] in
            self.assumeIsolated { $0.startPeriodicVerify() }
        }
    }

    private func startPeriodicVerify() {
        Task {
            if caughtUp && !control.paused && reachable != false { await verifyNow("every \(Format.seconds(configuration.verifySeconds))") }
            scheduleVerify()
        }
    }
}

/// Durations for log lines.
enum Format {
    static func seconds(_ value: Double) -> String {
        if value >= 3600 && value.truncatingRemainder(dividingBy: 3600) == 0 { return "\(Int(value / 3600)) h" }
        if value >= 60 && value.truncatingRemainder(dividingBy: 60) == 0 { return "\(Int(value / 60)) min" }
        return "\(Int(value)) s"
    }
}
