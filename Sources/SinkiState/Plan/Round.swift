import SinkiPlan
import SinkiRecord
import SinkiSupport

/// Content a write needs that is not here yet.
public struct ContentFetch: Sendable, Equatable {
    public var path: String
    /// The version whose content it is.
    public var tag: Int64
    /// That version's size and content id, which the download is checked against (the version at the
    /// path may have changed while it came).
    public var size: Int64 = 0
    public var hash = ""
    /// The large file's asset to download into the state folder; nil for a small file, whose record
    /// is looked up again with its inline content.
    public var asset: Asset?
    /// Where the checked download waits for its write once whole: the download (every path of its
    /// content at once) puts it there before it ends, so that a later download of the same content
    /// finds it there and never meets a half-built file of another.
    public var finalPath: String?
    /// Where an asset's bytes go while they arrive (a later try goes on from what it holds).
    public var partialPath: String? { finalPath.map { $0 + ".part" } }
}

/// What the agent may hand out in a round.
public struct StepOptions: Sendable {
    /// Saves may go (the feed was read to its end, the server answers, nothing holds them).
    public var canSend = true
    /// Another modify request may be made now.
    public var canPush = true
    public var maxRecords = 1000
    public var maxBytes = 8 << 20
    /// Large files' chunk uploads that may start now.
    public var uploadSlots = 4
    /// Downloads and look-ups that may start now.
    public var fetchSlots = 8
    /// Of those, large files' downloads (`[transfer] parallel`: files built at once).
    public var downloadSlots = 4
    /// Roots stopped for safety: their paths wait.
    public var excludingRoots: Set<RootID> = []
    public init() {}
}

/// What one round of planning did and handed out.
public struct Step: Sendable {
    /// Remote changes written here (for observers and `sinkid watch`).
    public var applied: [AppliedChange] = []
    /// Paths for the watcher's look (folders made, writes the disk refused).
    public var toCheck: [LocalPath] = []
    /// Records to send now, in one modify request.
    public var batch: [Outgoing] = []
    public var fetches: [ContentFetch] = []
    /// Large files whose chunks go before their record.
    public var uploads: [String] = []
    /// Conflicts for the merge engine.
    public var merges: [MergeJob] = []
    /// Tree entries this round recorded (writes, agreements): the next round may find more to do.
    public var recorded = 0
    /// A pass over the work ended with nothing changed: nothing more until something does.
    public var settled = false
    /// The page had saves and no request could go: the rounds wait for an answer.
    public var blocked = false
    public init() {}

    /// Whether the round did or handed out anything.
    public var didSomething: Bool { recorded > 0 || !batch.isEmpty || !fetches.isEmpty || !uploads.isEmpty || !merges.isEmpty }
}

/// The operations of one page, sorted by who carries them out.
struct Round {
    var disk: [DiskOp] = []
    var advance: [(String, SyncedFacts)] = []
    var saves: [SaveItem] = []
    var keepLocal: [(LocalPath, LocalFacts)] = []
    var keepRemote: [(LocalPath, RemoteFacts, WriteContent)] = []
    var fetches: [ContentFetch] = []
    var uploads: [String] = []
    var resolves: [(RecordPath, LocalPath, TreeRow, RemoteFacts, WriteContent)] = []
    /// Paths whose remote content cannot be taken (it breaks its own record), with why.
    var refusedContent: [(String, ApplyFailure)] = []

    /// What a write of `remote` at `path` takes its bytes from: here already, to fetch, or refused.
    enum ContentState {
        case ready(WriteContent)
        case fetch(ContentFetch)
        case refused(ApplyFailure)
    }
}
