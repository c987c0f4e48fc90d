import SinkiLoop
import SinkiRecord
import SinkiSupport

/// The change feed as streamed answers (`SyncClient.streamFeed`), one after another, their pages
/// taken one at a time and in order. Each answer ends at the server's word (its wait up, its bytes
/// sent); the next is asked for at once from the last page read, so the link never waits for the
/// reader, unless more than `mostUnread` bytes of pages wait unread: then once the reader has taken
/// them. Loop-confined.
public final class FeedPages {
    /// Bytes of pages that may wait unread before the next answer waits for the reader.
    public static let mostUnread = 16 << 20
    /// Bytes an answer may hold unread at all, the page it is reading included: as much as a page asked
    /// for may take (`HTTPClient.send`'s memory limit). A server ends an answer long before (8 MiB); one
    /// that streams on regardless fails the answer here rather than fill the agent's memory.
    public static let mostHeld = 512 << 20

    private var reader = RecordPageStream()
    private var arrived: [RecordPage] = []
    private var head = 0
    private var unreadBytes = 0
    /// Where the last page read ends: the next answer starts there.
    private var since: String?
    private var inflight: Int64?
    /// An answer ended cleanly while too much waited unread: the next is asked for once it is taken.
    private var askWhenRead = false
    /// How the pages ended (an answer failed, or the reader cancelled); nil while they go on.
    private var outcome: SyncError?
    /// Why the bytes of the current answer are not pages, once they were not.
    private var failure: SyncError?
    /// Rung when a page arrives or the pages end: what the reader waits on.
    private let arrivals = Doorbell()
    /// Rung when the reader has taken enough that the next answer may be asked for, or the pages end.
    private let drained = Doorbell()
    /// The task that runs `SyncClient.streamFeed` into these pages: `cancel` ends it.
    public var transfer: Task<Void, Never>?
    /// Called once when the pages end for good.
    public var onEnd: (() -> Void)?
    /// Called as pages arrive, before the reader takes them: the answer is alive.
    public var onArrival: (() -> Void)?
    /// When the last two pages arrived (monotonic ns; 0: none yet).
    private var arrivedAt: (last: Int64, before: Int64) = (0, 0)

    /// How far apart the last two pages came, in milliseconds, when they are part of a run of pages (a
    /// device saving batch after batch); nil when they were a second or more apart or fewer came.
    public var burstGapMilliseconds: UInt64? {
        guard arrivedAt.before > 0 else { return nil }
        let gap = arrivedAt.last - arrivedAt.before
        return gap < 1_000_000_000 ? UInt64(gap / 1_000_000) : nil
    }

    /// Pages from feed position `since` (and in-flight position `inflight`) on.
    public init(since: String?, inflight: Int64?) {
        self.since = since
        self.inflight = inflight
    }

    /// Where the first answer starts.
    var start: (since: String?, inflight: Int64?) { (since, inflight) }

    /// Whether a page waits to be taken now.
    public var hasUnread: Bool { head < arrived.count }

    /// The next page, waiting for it. A cancelled caller ends the transfer; a failed answer throws once
    /// the pages before it are taken.
    public func next(isolation: isolated (any Actor)? = #isolation) async throws(SyncError) -> RecordPage {
        while head == arrived.count && outcome == nil && !Task.isCancelled {
            // A cancelled caller's wait ends at once (the bell's stream ends it).
            await arrivals.wait(isolation: isolation)
        }
        if head < arrived.count {
            let page = arrived[head]
            head += 1
            if head == arrived.count {
                arrived.removeAll(keepingCapacity: true)
                head = 0
            }
            unreadBytes -= Self.size(of: page)
            if askWhenRead && unreadBytes <= Self.mostUnread {
                askWhenRead = false
                drained.ring()
            }
            return page
        }
        if outcome == nil { cancel() }
        throw outcome ?? .transport(.cancelled)
    }

    /// Waits up to `milliseconds` (timed on `loop`) for a page: true when one is there.
    public func waitForPage(milliseconds: UInt64, loop: EventLoop, isolation: isolated (any Actor)? = #isolation) async -> Bool {
        if head == arrived.count && outcome == nil && !Task.isCancelled {
            let timer = LoopTimer(loop: loop)
            let arrivals = self.arrivals
            timer.start(after: milliseconds) { arrivals.ring() }
            await arrivals.wait(isolation: isolation)
            timer.stop()
        }
        return head < arrived.count
    }

    /// Hands the reader a page with nothing new, at the position the answer stands (so that it does
    /// what it does after a page: the agent checks with the server's digests). False when the answer is
    /// over or no position is known yet.
    public func nudge() -> Bool {
        guard outcome == nil, failure == nil, let since else { return false }
        arrived.append(RecordPage(records: [], token: since, more: false))
        arrivals.ring()
        return true
    }

    /// Ends the transfer and the pages.
    public func cancel() {
        transfer?.cancel()
        finish(.transport(.cancelled))
    }

    /// Bytes of the current answer as they arrive.
    func take(_ bytes: UnsafeRawBufferPointer) {
        guard failure == nil, outcome == nil else { return }
        do {
            let pages = try reader.take(bytes)
            unreadBytes += pages.reduce(0) { $0 + Self.size(of: $1) }
            guard unreadBytes + reader.partialBytes <= Self.mostHeld else {
                throw SyncError.badResponse("the answer holds more than \(Self.mostHeld >> 20) MiB its reader has not taken")
            }
            guard let last = pages.last else { return }
            since = last.token
            if let news = last.inflight { inflight = news.position }
            arrived += pages
            arrivedAt = (Clock.monotonic(), arrivedAt.last)
            arrivals.ring()
            onArrival?()
        } catch let error as SyncError {
            failure = error
            transfer?.cancel()
        } catch {
            failure = .badResponse("\(error)")
            transfer?.cancel()
        }
    }

    /// The current answer is over: how it ended. Nil when the pages end here, else where the next
    /// answer starts, once the reader has taken enough of what waits.
    func end(_ result: Result<Void, SyncError>, isolation: isolated (any Actor)? = #isolation) async -> (since: String?, inflight: Int64?)? {
        guard outcome == nil else { return nil }
        if let failure {
            finish(failure)
            return nil
        }
        if case let .failure(error) = result {
            finish(error)
            return nil
        }
        do {
            try reader.finish()
        } catch {
            finish(.badResponse("\(error)"))
            return nil
        }
        reader = RecordPageStream()
        if unreadBytes > Self.mostUnread {
            askWhenRead = true
            while askWhenRead && outcome == nil && !Task.isCancelled { await drained.wait(isolation: isolation) }
        }
        guard outcome == nil else { return nil }
        return (since, inflight)
    }

    private func finish(_ error: SyncError) {
        guard outcome == nil else { return }
        outcome = error
        arrivals.ring()
        drained.ring()
        let onEnd = self.onEnd
        self.onEnd = nil
        onEnd?()
    }

    /// What a page holds in memory, about: its content and a little for each record.
    private static func size(of page: RecordPage) -> Int {
        page.records.reduce(0) { $0 + ($1.data?.count ?? 0) + 256 }
    }

}

/// A wake-up that is never lost: rung before anyone waits, the next wait returns at once (one ring is
/// kept). Its waits end at once in a cancelled task. Waited on by one task at a time.
private final class Doorbell {
    private let rings: AsyncStream<Void>.Continuation
    private var listener: AsyncStream<Void>.AsyncIterator

    init() {
        let (stream, rings) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        self.rings = rings
        listener = stream.makeAsyncIterator()
    }

    func ring() { rings.yield() }

    func wait(isolation: isolated (any Actor)? = #isolation) async {
        _ = await listener.next(isolation: isolation)
    }
}
