import SinkiRecord
import SinkiTransfer

/// Where the next feed page comes from before the one it follows is written: a page asked for (a
/// catch-up page, or at the end of the feed a long-poll, `waits`), or a streamed answer that goes on.
/// A check to try again or a wake replaces one that waits with an ask that does not.
enum PageAhead {
    case asked(Task<RecordPage, any Error>, waits: Bool)
    case streamed(FeedPages)

    var waits: Bool {
        switch self {
        case let .asked(_, waits): return waits
        case .streamed: return true
        }
    }

    func cancel() {
        switch self {
        case let .asked(task, _): task.cancel()
        case let .streamed(stream): stream.cancel()
        }
    }

    /// The page.
    func next(isolation: isolated (any Actor)? = #isolation) async throws -> RecordPage {
        switch self {
        case let .asked(task, _):
            // The page asked for ahead is its own task: a cancelled pull loop (a wake, a pause) ends it too,
            // or waiting for it would wait out a long-poll.
            return try await withTaskCancellationHandler { try await task.value } onCancel: { task.cancel() }
        case let .streamed(stream):
            return try await stream.next(isolation: isolation)
        }
    }
}
