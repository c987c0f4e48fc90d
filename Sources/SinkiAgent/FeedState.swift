import SinkiLoop
import SinkiTransfer

/// What the agent knows of its change feed's request: whether it is parked in a long-poll, and
/// whether the next one must ask without waiting (docs/architecture.md, "Losing and finding the server").
struct FeedState {
    /// The long-poll waiting at the server now: its number and when it was sent (monotonic ns).
    var parked: (id: Int, since: Int64)?
    /// The streamed answer open now (its number as in `parked`), while it is.
    var stream: (id: Int, pages: FeedPages)?
    var nextID = 0
    /// The next feed request asks without waiting (`sinkid sync`, a wake).
    var askNow = false
    /// Armed after a push the server saved while a long-poll was parked (`expectEcho`).
    var echoTimer: LoopTimer?
    /// How long the last check against the server's digests took, about a round trip: on a streamed
    /// feed, a check waits that long for a next page, which would make it moot.
    var checkMilliseconds: UInt64 = 20
    /// The feed's backoff sleeps, apart from the agent's other sleeps (rescans, comparisons) so that
    /// an answer from the server ends these alone.
    var retrySleeper: LoopSleeper?
}
