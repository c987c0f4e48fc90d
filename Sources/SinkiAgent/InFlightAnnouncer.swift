import SinkiRecord
import SinkiSupport
import SinkiTransfer

/// Tells the server, batch by batch, which chunks of a large file this agent has uploaded, so that the
/// user's other devices fetch them while the rest is still on its way (docs/protocol.md, "Files in
/// flight"). Best effort: an announcement that fails costs the others their head start, never the
/// upload. Announcements go one after another, off the sender's path: it never waits a round trip
/// for one, except for the last before its record goes (which ends the session at the server).
/// Loop-confined, like the client it drives.
final class InFlightAnnouncer {
    private let sync: SyncClient
    let path: String
    let session = RandomID.hex(bytes: 16)
    private let size: Int64
    /// Chunks the server has taken so far (nil: announcing has stopped for this upload).
    private var announced: Int? = 0
    private var pending: Task<Void, Never>?

    init(sync: SyncClient, path: String, size: Int64) {
        self.sync = sync
        self.path = path
        self.size = size
    }

    /// Announces what of `chunks` (the file's chunks so far, in order, all on the server) is new.
    func announce(_ chunks: [ChunkRef], isolation: isolated (any Actor)? = #isolation) {
        let previous = pending
        pending = Task { [self] in
            _ = isolation
            await previous?.value
            guard let from = announced, from < chunks.count else { return }
            // Several batches' worth at most per request: a resumed upload's first one names them all.
            let upTo = min(chunks.count, from + InFlightAnnouncement.maxChunks)
            let announcement = InFlightAnnouncement(path: path, session: session, size: size, index: from, chunks: Array(chunks[from..<upTo]),
                                                    device: sync.device)
            do throws(SyncError) {
                try await sync.announce(announcement)
                announced = upTo
            } catch let .problem(problem) where problem.code == ProblemKind.inflightGap.code {
                // The server lost the session (a restart): the next batch names every chunk again.
                announced = 0
            } catch {
                // Not a reason to fail the upload: the receivers wait for the record instead.
                announced = nil
            }
        }
    }

    /// Waits for the announcements under way (before the record goes, which ends the session).
    func settle(isolation: isolated (any Actor)? = #isolation) async {
        await pending?.value
    }

    /// Gives the session up (the file changed or went away, the upload failed or was cancelled): the
    /// receivers drop what they fetched of it. Best effort, without waiting.
    func abandon(isolation: isolated (any Actor)? = #isolation) {
        guard announced != nil else { return }
        announced = nil
        var end = InFlightAnnouncement(path: path, session: session, size: size, index: 0, chunks: [], device: sync.device)
        end.end = true
        let sync = self.sync, previous = pending
        // After the announcement under way, so that the end is the last word on the session.
        pending = Task {
            _ = isolation
            await previous?.value
            try? await sync.announce(end)
        }
    }
}
