import SinkiRecord
import SinkiSupport

/// How one request reads the change feed: its user, the part of the tree its token sees, and what it
/// leaves out. Each page it reads starts where the last one ended.
struct FeedReader: Sendable {
    let store: any RecordStore
    let chunks: ChunkStore
    let board: InFlightBoard
    let origins: OriginBook
    let user: String
    let storeID: String
    let limit: PageLimit
    let prefix: String?
    let omitDataFrom: String?
    /// The reader's own saves, passed over.
    let omitOrigin: SaveOrigin?
    /// The reader's device: its own files in flight are no news to it.
    let device: String

    /// A page of what committed after `tag`, with the in-flight news after `inflightAfter`.
    func page(after tag: Int64, inflightAfter: Int64?) throws -> (page: RecordPage, lastTag: Int64, isEmpty: Bool) {
        let news = news(after: inflightAfter)
        let batch = try store.changes(user: user, after: tag, limit: limit, within: prefix)
        var records = batch.records
        var omitted = 0
        if let omitOrigin {
            (records, omitted) = origins.leavingOut(records, user: user, origin: omitOrigin)
        }
        chunks.flagIncomplete(&records, user: user)
        if let omitDataFrom {
            for index in records.indices where records[index].device == omitDataFrom { records[index].data = nil }
        }
        let page = RecordPage(records: records, token: ChangeToken(storeID: storeID, tag: batch.lastTag).text, more: batch.more,
                              inflight: news, omitted: omitted)
        // A page of the reader's own saves alone still answers: its position moved, and the reader
        // learns that its feed is alive.
        return (page, batch.lastTag, records.isEmpty && news == nil && omitted == 0)
    }

    /// The in-flight news after `position`; nil when the request did not ask or there is none.
    func news(after position: Int64?) -> InFlightNews? {
        position.flatMap { board.news(user: user, after: $0, reader: device, within: prefix) }
    }
}

/// The pages of a streamed feed answer after its first (`ResponseBody.live`): each the frames of what
/// committed since the last, envelope last, until the request's deadline or `maxBytes`.
final class FeedStream: LiveSource {
    let feed: FeedReader
    let user: String
    let token: String?
    let deadline: Int64
    private var after: Int64
    private var inflightAfter: Int64?
    private var sent: Int
    private let maxBytes: Int

    init(feed: FeedReader, user: String, token: String?, deadline: Int64, after: Int64, inflightAfter: Int64?, sent: Int, maxBytes: Int) {
        self.feed = feed
        self.user = user
        self.token = token
        self.deadline = deadline
        self.after = after
        self.inflightAfter = inflightAfter
        self.sent = sent
        self.maxBytes = maxBytes
    }

    func next() throws -> LiveStep {
        // Past its bytes the answer ends at a page's end: a client applying slower than it reads holds no more.
        guard sent < maxBytes else { return .end }
        let read = try feed.page(after: after, inflightAfter: inflightAfter)
        guard !read.isEmpty else { return .wait }
        after = read.lastTag
        if let news = read.page.inflight { inflightAfter = news.position }
        let bytes = read.page.framesBytes
        sent += bytes.count
        return .bytes(bytes)
    }
}
