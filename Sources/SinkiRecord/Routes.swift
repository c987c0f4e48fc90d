/// The paths of the wire protocol (docs/protocol.md), written once for the server's router and the
/// agent's clients.
public enum Routes {
    public static let modify = "/v1/records/modify"
    public static let changes = "/v1/changes"
    public static let records = "/v1/records"
    /// The tus endpoint; an upload's URL is this followed by its id.
    public static let uploads = "/v1/uploads/"
    /// An asset's bytes: this followed by its id.
    public static let assets = "/v1/assets/"
    /// A chunk's bytes (`GET`, this followed by its SHA-256), or a report that they are damaged (`DELETE`).
    public static let chunks = "/v1/chunks/"
    /// Several chunks uploaded in one request, framed (`POST`; docs/protocol.md, "Chunks in batches").
    public static let chunkBatch = "/v1/chunks/batch"
    /// Several chunks fetched in one request: names in, frames out (`POST`).
    public static let fetchChunks = "/v1/chunks/fetch"
    /// Which of a list of chunks the server lacks (`POST`).
    public static let missingChunks = "/v1/chunks/missing"
    /// A folder's digests, for checking that a copy of the records equals the server's (`GET`).
    public static let digests = "/v1/digests"
    /// The chunks of a large file being sent now, before its record (`POST`).
    public static let inflight = "/v1/inflight"
    /// Minting a narrower token (`POST`).
    public static let tokens = "/v1/tokens"
    /// The versions of one path, newest first (`GET`).
    public static let history = "/v1/history"
    /// One version of a path, with its content (`GET`).
    public static let historyVersion = "/v1/history/version"
    /// A folder as it was at a moment (`GET`).
    public static let historyFolder = "/v1/history/folder"
    /// A version, or a folder at a moment, made current again (`POST`).
    public static let restore = "/v1/history/restore"
}
