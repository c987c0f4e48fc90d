import SinkiRecord
import SinkiSupport

/// `POST /v1/inflight`: a sender announces chunks of a large file it has uploaded, before the file's
/// record, or gives the session up (`end`) (docs/protocol.md, "Files in flight"). `204`; `409
/// inflight-gap` when the announcement does not follow what the session announced before (the sender
/// then announces from index 0). The chunks are not checked here: a receiver checks each against its
/// name, and the record decides what is kept.
struct InFlightRoute: Route {
    let board: InFlightBoard
    let hub: WaiterHub
    /// A batch of `InFlightAnnouncement.maxChunks` chunk names, with room to spare.
    static let bodyLimit = 1 << 20

    func begin(_ request: Request) throws -> BodyPolicy { try request.writableJSON(limit: Self.bodyLimit) }

    func respond(to request: Request) throws -> Reply {
        let announcement = try request.decodeBody(InFlightAnnouncement.parse)
        do {
            _ = try RecordPath(validating: announcement.path)
        } catch {
            throw Problem(.badPath, detail: error.description, field: "path")
        }
        if let refusal = request.identity.scope.refusal(forPath: announcement.path, movedFrom: nil) { throw refusal }
        guard InFlightAnnouncement.isSession(announcement.session) else {
            throw Problem(.badRequest, detail: "session must be 32 lowercase hex digits", field: "session")
        }
        guard announcement.chunks.count <= InFlightAnnouncement.maxChunks else {
            throw Problem(.tooLarge, detail: "announce at most \(InFlightAnnouncement.maxChunks) chunks at a time; this has \(announcement.chunks.count)",
                          field: "chunks")
        }
        if let bad = announcement.chunks.firstIndex(where: { !ChunkStore.isName($0.sha256) || $0.size <= 0 || $0.size > ChunkRoutesLimits.maxChunkBytes }) {
            throw Problem(.badRequest, detail: "chunks[\(bad)] is not [SHA-256 in 64 lowercase hex digits, a size of 1 to \(ChunkRoutesLimits.maxChunkBytes)]",
                          field: "chunks")
        }
        guard ModifyValidator.isDeviceName(announcement.device) else {
            throw Problem(.badRequest, detail: "device must be at most \(ModifyValidator.maxDeviceBytes) bytes, without control characters", field: "device")
        }
        let user = request.identity.user
        if announcement.end {
            if board.giveUp(user: user, path: announcement.path, session: announcement.session) { hub.notify(user: user) }
            return .response(Response(status: 204, contentType: nil, body: .bytes([])))
        }
        try board.announce(user: user, device: announcement.device.isEmpty ? request.identity.device : announcement.device, announcement)
        hub.notify(user: user)
        return .response(Response(status: 204, contentType: nil, body: .bytes([])))
    }
}

/// Sizes the chunk routes hold chunks to.
enum ChunkRoutesLimits {
    /// The largest chunk the chunker makes (`ChunkProfile.large.maximum`).
    static let maxChunkBytes: Int64 = 4 << 20
}
