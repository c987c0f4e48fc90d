import SinkiControl
import SinkiRecord
import SinkiState
import SinkiSupport
import SinkiTransfer

/// The checks of this agent's copy of the server's records (the Remote tree) against the server's own
/// digests (issue 21): "up to date" is said only once they matched at the feed position read.
struct DigestCheckState {
    /// The digests of every root matched the server's at the position the feed was last read to;
    /// cleared whenever the feed brings something new.
    var matched = false
    /// When they last matched.
    var lastMatch: Int64?
    /// Kept in the state database across restarts.
    var counts = DigestCounts()
    /// The server answered that it has no digests (an older server): nothing waits for them.
    var unsupported = false
    /// Why the last check could not finish (nil: it did, or none ran yet).
    var failure: String?
    /// A full listing runs to fill the Remote tree of an upgraded database.
    var seeding = false
    /// The last check could not reach the server: the pull loop asks for its next page without
    /// waiting, and checks again after it.
    var recheck = false
    /// The last check was refused by a rate limit: once the limit has passed, the pull loop checks
    /// again before it asks for its next page.
    var checkFirst = false
    /// Checks in a row that got an answer outside the protocol: the next waits the longer.
    var failedChecks = 0
    /// A check was put off while saves were in flight: the feed passes over this run's own saves, so
    /// the copy holds them only once their answers are recorded. The last answer brings the check.
    var afterPushes = false
    /// Paths of batches whose answer did not come (a lost connection, a refusal): saved or not, the feed
    /// passed over them, so until they are sent again a check finds them differing, and takes them from
    /// the server. That is not a defect of the copy, and is not counted as one.
    var unanswered = Set<PathKey>()
    /// The feed position before this run's saves is noted in the state database (`markFeedBeforeSaves`):
    /// a save goes only once it is, and it is let go when a check finds the copy complete.
    var feedMarkedBeforeSaves = false

    /// Rounds of descent and repair in one check; a mismatch left after them is shown as an error.
    static let rounds = 3
}

/// How one comparison of a root's digests came out.
private enum DigestComparison {
    case matched
    /// The server holds changes the feed has not brought yet: the next page brings them, and a check
    /// follows it.
    case behind
    /// These paths differed and were repaired.
    case repaired([RemoteMismatch])
}

extension Agent {
    /// Checks the Remote tree against the server once the feed has been read to its end: each root's
    /// digest at the position read (one request a root), and a descent through the folders that differ
    /// when one does, setting the Remote tree to what the server holds there (the planner then does the
    /// rest). Runs inside the pull loop, so no feed page is taken in while it compares.
    func checkWithServer() async {
        digests.matched = false
        guard let replica, caughtUp, !stopping, !control.paused, !digests.seeding else { return }
        guard pushTasks.isEmpty else {
            digests.afterPushes = true
            return
        }
        guard await replica.remoteSeeded else {
            seedRemoteTree()
            return
        }
        do {
            guard let same = try await compareRounds() else { return }
            digests.matched = same
            digests.failedChecks = 0
            if same {
                digests.unanswered.removeAll()
                // Every save is answered and in the copy (no push runs during a check): a restart need
                // not read the feed again from before them.
                if digests.feedMarkedBeforeSaves && pushTasks.isEmpty {
                    digests.feedMarkedBeforeSaves = false
                    try await replica.clearFeedBeforeSaves()
                }
                digests.failure = nil
                digests.lastMatch = Clock.now()
            }
        } catch let wentBack as ServerWentBack {
            // Its feed now gives out tags this agent's position is past: start the feed over, as when the
            // server no longer knows the position, with a full comparison in place of the history.
            logger.error("\(wentBack)")
            do { try await replica.resetFeed() } catch { logger.error("cannot start the feed over: \(error)") }
            // Tags above the server's head now name nothing there: compared like a store made afresh, so
            // what it lost is sent again rather than taken for changes the feed will bring.
            await verifyNow("the server went back to an older state", adoptHead: true, storeReplaced: true)
            digests.recheck = true
        } catch {
            digests.failure = "cannot compare with the server: \(error)"
            // A refused token or a rate limit is waited out like any request's (the pull loop waits for
            // access), and the check alone goes first then: a feed page before it would spend the budget
            // the check needs, round after round.
            if let error = error as? SyncError, noteAccess(error) {
                digests.checkFirst = true
                return
            }
            if case .transport? = error as? SyncError {
                // The server out of reach: the feed finds it again, and the check follows its next page.
                digests.recheck = true
            } else {
                // An answer that is not the protocol (a server that does not speak it right, an answer cut
                // short): asked again after a growing pause, never in a loop with the feed.
                digests.failedChecks += 1
                let seconds = min(60, 1 << min(6, digests.failedChecks - 1))
                Task {
                    _ = await self.sleeper?.sleep(milliseconds: UInt64(seconds) * 1000)
                    self.digests.recheck = true
                    self.wakeFeed("the check against the server's digests is due again")
                }
            }
            if digests.failedChecks <= 1 {
                if error is SyncError { logger.warning(digests.failure!) } else { logger.error(digests.failure!) }
            }
        }
    }

    /// Compares the roots' digests, repairing what differs, up to `DigestCheckState.rounds` times;
    /// true when they ended the same (or the server has no digests), nil when the feed is behind.
    private func compareRounds() async throws -> Bool? {
        if digests.unsupported { return true }
        for round in 1...DigestCheckState.rounds {
            let mismatched: [RemoteMismatch]?
            do { mismatched = try await compareRoots() } catch let .problem(problem) as SyncError where problem.status == 404 {
                logger.warning("the server offers no digests (\(problem.detail)); up to date is said without them")
                digests.unsupported = true
                return true
            }
            guard let mismatched else { return nil }
            if mismatched.isEmpty { return true }
            if round == DigestCheckState.rounds {
                digests.failure = "\(mismatched.count) path(s) still differ from the server after \(round) rounds of repairs: "
                    + mismatched.prefix(5).map { quoted($0.path) }.joined(separator: ", ")
                logger.error(digests.failure!)
            }
        }
        return false
    }

    /// Compares every root's digest; nil when the feed is behind the server (a check follows the next
    /// page), else the paths that differed and were repaired (empty: all the same).
    private func compareRoots() async throws -> [RemoteMismatch]? {
        guard let replica, let client else { throw CancellationError() }
        var all: [RemoteMismatch] = []
        for (index, root) in configuration.roots.enumerated() where control.safetyStops[RootID(index)] == nil {
            // The copy first, then the server: an answer to this agent's own save that lands in between
            // is on the server already when it is asked, and shows as a change the feed has yet to bring.
            var here = try await replica.remoteFolder(root.name)
            let readThrough = try await replica.feedPosition()
            let reply = try await client.digests(of: root.name, children: false)
            if !PathText.same(reply.folder.path, root.name) { here = try await replica.remoteFolder(reply.folder.path) }
            switch try await compare(reply.folder, here, readThrough: readThrough) {
            case .matched: continue
            case .behind: return nil
            case let .repaired(found): all += found
            }
        }
        // Paths whose save's answer was lost differ until they are sent again; any other is a defect.
        let defects = all.filter { digests.unanswered.remove(PathKey($0.path)) == nil }
        if all.count > defects.count {
            logger.info("took \(all.count - defects.count) record(s) from the server whose save's answer did not come")
        }
        if !defects.isEmpty { try await noteRepaired(defects) }
        return all
    }

    /// Compares one folder's digests: the same, behind (the server has changes the feed has not
    /// brought), or different, when the descent finds and repairs what differs. The feed brings every
    /// change in order, so the copy is complete up to the feed position (`readThrough`); the answer to
    /// this agent's own save may put a newer one in it before the feed does, which is why the copy's
    /// own head does not say how far it was read.
    private func compare(_ server: FolderDigest, _ here: RemoteFolder, readThrough: Int64) async throws -> DigestComparison {
        if server.head > readThrough { return .behind }
        if server.head < here.head { throw ServerWentBack(folder: server.path, serverHead: server.head, readHead: here.head) }
        if server.digest == here.digest.hex { return .matched }
        logger.log(digests.unanswered.isEmpty ? .error : .info, "this agent's copy of the server's records under \(quoted(server.path)) differs from the server's "
                     + "(digest \(server.digest.prefix(16))… there, \(here.digest.hex.prefix(16))… here, head \(server.head)); finding what differs")
        return .repaired(try await descend(from: server.path))
    }

    /// Walks down from `folder` through the folders whose digests differ (a request each), and repairs
    /// the records directly in each folder whose own records differ.
    private func descend(from folder: String) async throws -> [RemoteMismatch] {
        guard let replica, let client else { throw CancellationError() }
        var queue = [folder]
        var found: [RemoteMismatch] = []
        while !queue.isEmpty, !stopping {
            let asked = queue.removeFirst()
            var mine: [String: RemoteFolder] = [:]
            for child in try await replica.remoteChildren(of: asked) { mine[child.path] = child }
            let reply = try await client.digests(of: asked, children: true)
            let path = reply.folder.path
            if !PathText.same(path, asked) {
                mine = [:]
                for child in try await replica.remoteChildren(of: path) { mine[child.path] = child }
            }
            for child in reply.children ?? [] {
                if child.digest != (mine.removeValue(forKey: child.path)?.digest ?? .empty).hex { queue.append(child.path) }
            }
            // Folders only this agent's copy has below: the server holds nothing there.
            for child in mine.values where !child.digest.isEmpty { queue.append(child.path) }
            if reply.folder.direct != (try await replica.remoteFolder(path)).direct.hex {
                found += try await repairFolder(path)
            }
        }
        return found
    }

    /// Lists the server's records in `folder` and sets the Remote tree's records directly in it to
    /// them; what differed is applied or sent again under the full comparison's rules.
    private func repairFolder(_ folder: String) async throws -> [RemoteMismatch] {
        guard let replica, let client else { throw CancellationError() }
        var records: [Record] = []
        var after: String?
        var listedAt: Int64 = .max
        var floor: Int64 = 0
        while true {
            let page = try await client.list(prefix: folder, after: after, limit: VerifyState.page)
            if after == nil {
                listedAt = FeedToken.tag(of: page.token) ?? .max
                floor = page.floor ?? 0
            }
            records += page.records.filter { PathText.same(PathText.folder(of: $0.path), folder) }
            guard page.more, let last = page.records.last?.path else { break }
            after = last
        }
        let mismatched = try await replica.repairRemote(folder: folder, server: records, floor: floor, listedAt: listedAt)
        for mismatch in mismatched {
            logger.error("mismatch with the server at \(quoted(mismatch.path)): the server has \(Self.describe(mismatch.server)), "
                         + "this agent's copy had \(Self.describe(mismatch.here)); repaired")
        }
        if !mismatched.isEmpty { pumpSync() }
        return mismatched
    }

    private func noteRepaired(_ mismatched: [RemoteMismatch]) async throws {
        digests.counts.repaired += mismatched.count
        digests.counts.lastRepairAt = Clock.now()
        try await replica?.saveDigestCounts(digests.counts)
    }

    /// Fills the Remote tree of a database that predates it with one full listing of the server (the
    /// full comparison observes every page), in the background; the checks run once it has.
    private func seedRemoteTree() {
        guard !digests.seeding else { return }
        digests.seeding = true
        Task {
            let outcome = await verifyNow("this agent's copy of the server's records is new: reading them once")
            digests.seeding = false
            if outcome.result == "same" || outcome.result == "repaired" {
                await checkWithServer()
                await sayIfUpToDate()
            }
        }
    }

    /// Loads the counts kept in the state database (at start).
    func loadDigestCounts() async {
        if let counts = try? await replica?.digestCounts() { digests.counts = counts }
    }

    /// What status shows of the checks.
    var digestSummary: DigestSummary {
        DigestSummary(matched: digests.matched, lastMatch: digests.lastMatch, repaired: digests.counts.repaired,
                      lastRepairAt: digests.counts.lastRepairAt, failure: digests.failure, unsupported: digests.unsupported)
    }

    private static func describe(_ entry: RemoteFacts?) -> String {
        guard let entry else { return "nothing" }
        if entry.kind == .directory { return "a folder (version \(entry.tag))" }
        return "version \(entry.tag) (\(entry.size) bytes, \(entry.hash.prefix(12))…)"
    }
}

/// The server's records under a folder end at an older change than this agent has read there: it was
/// restored from an older copy (heads never go back on a server that kept its data).
struct ServerWentBack: Error, CustomStringConvertible {
    var folder: String
    var serverHead: Int64
    var readHead: Int64
    var description: String {
        "the server's records under \(quoted(folder)) end at change \(serverHead), older than change \(readHead) this agent read there: "
            + "the server went back to an older copy of its data; reading everything from it again"
    }
}
