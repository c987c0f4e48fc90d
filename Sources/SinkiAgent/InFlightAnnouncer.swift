import SinkiRecord
import SinkiSupport
import SinkiTransfer

/// Tells the server which chunks of a large file this agent has uploaded, as they get there, so that
/// the user's other devices fetch them while the rest is still on its way (docs/protocol.md, "Files in
/// flight"). One announcement at a time, naming every chunk that reached the server since the last
/// (so a slow link coalesces them rather than queueing a request per chunk); the sender never waits
/// for one, except for the last before its record goes (which ends the session at the server). Best
/// effort: an announcement that fails costs the receivers their head start, never the upload.
/// Loop-confined, like the client it drives.
final class InFlightAnnouncer {
    private let sync: SyncClient
    let path: String
    let session = RandomID.hex(bytes: 16)
    private let size: Int64
    /// The file's chunks on the server so far, in file order.
    private var ready: [ChunkRef] = []
    /// How many of `ready` the server has taken (nil: announcing has stopped for this upload).
    private var announced: Int? = 0
    private var pump: Task<Void, Never>?

    init(sync: SyncClient, path: String, size: Int64) {
        self.sync = sync
        self.path = path
        self.size = size
    }

    /// The next chunks of the file, in order, are on the server.
    func add(_ chunks: some Collection<ChunkRef>, isolation: isolated (any Actor)? = #isolation) {
        guard announced != nil, !chunks.isEmpty else { return }
        ready += chunks
        guard pump == nil else { return }
        pump = Task { [self] in
            _ = isolation
            defer { pump = nil }
            while let from = announced, from < ready.count {
                let upTo = min(ready.count, from + InFlightAnnouncement.maxChunks)
                let announcement = InFlightAnnouncement(path: path, session: session, size: size, index: from, chunks: Array(ready[from..<upTo]),
                                                        device: sync.device)
                do throws(SyncError) {
                    try await sync.announce(announcement)
                    if announced != nil { announced = upTo }
                } catch let .problem(problem) where problem.code == ProblemKind.inflightGap.code {
                    // The server lost the session (a restart): the next announcement names every chunk again.
                    if announced != nil { announced = 0 }
                    return
                } catch {
                    // Not a reason to fail the upload: the receivers wait for the record instead.
                    announced = nil
                }
            }
        }
    }

    /// Waits for the announcement under way (before the record goes, which ends the session).
    func settle(isolation: isolated (any Actor)? = #isolation) async {
        await pump?.value
    }

    /// Gives the session up (the file changed or went away, the upload failed or was cancelled): the
    /// receivers drop what they fetched of it. Best effort, without waiting.
    func abandon(isolation: isolated (any Actor)? = #isolation) {
        guard announced != nil else { return }
        announced = nil
        var end = InFlightAnnouncement(path: path, session: session, size: size, index: 0, chunks: [], device: sync.device)
        end.end = true
        let sync = self.sync, running = pump
        // After the announcement under way, so that the end is the last word on the session.
        Task {
            _ = isolation
            await running?.value
            try? await sync.announce(end)
        }
    }
}
