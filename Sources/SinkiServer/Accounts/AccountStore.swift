/// A user of the server: their records, change feed, uploads and assets are theirs alone.
public struct ServerUser: Sendable, Equatable {
    public var name: String
    public var createdAt: Int64
    /// Bytes their current records and kept versions may take (`sinkid serve user quota`); nil: no limit.
    public var quota: Int64?
    public init(name: String, createdAt: Int64, quota: Int64? = nil) {
        self.name = name
        self.createdAt = createdAt
        self.quota = quota
    }
}

/// Why an account call could not be done, for people (the CLI prints it as one line).
public struct AccountError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable { case unknownUser, unknownToken, badName, exhausted }
    public var kind: Kind
    public var message: String
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }
    public var description: String { message }
}

/// Where the server keeps users and device tokens (docs/tokens.md). Calls may come from several
/// threads, and from several processes on one store (`sinkid serve token revoke` beside a running
/// server): every call reads what is committed now.
public protocol AccountStore: Sendable {
    /// Makes `name` a user if it is not one yet; returns whether it was made.
    @discardableResult
    func addUser(_ name: String, at now: Int64) throws -> Bool

    func users() throws -> [ServerUser]

    /// Removes the user, their tokens, their records and kept versions (their blobs are the upload
    /// store's to remove).
    func removeUser(_ name: String) throws

    /// Keeps a new token (made by the caller, with only its secret's hash). The user must exist.
    func addToken(_ token: DeviceToken) throws

    func token(id: String) throws -> DeviceToken?

    /// Tokens of `user` (all when nil), oldest first, revoked ones included.
    func tokens(user: String?) throws -> [DeviceToken]

    /// Revokes the token, every token minted from it and the tokens of their refresh chains, at `now`;
    /// returns the ids revoked (empty when the id is unknown or all of them were revoked already).
    func revoke(id: String, at now: Int64) throws -> [String]

    /// Refreshes token `id` (live, of the same user and chain) with `token`, in one transaction: the new
    /// one is kept, what `id` minted moves under it, and `id` is revoked. Throws `unknownToken` when `id`
    /// is not live.
    func refresh(_ token: DeviceToken, replacing id: String, at now: Int64) throws

    /// Notes a use of the token (kept coarse: at most once a minute).
    func markUsed(id: String, at now: Int64) throws

    /// Counts one upload against the token's chain; false when the chain has used `limit` already.
    func countUpload(chainID: String, limit: Int64?) throws -> Bool

    /// Counts `count` uploads against the chain at once (the allowance given to a minted token); false,
    /// counting nothing, when that would take the chain past `limit`.
    func countUploads(chainID: String, count: Int64, limit: Int64?) throws -> Bool

    /// Raised by every revocation, by any process: a server polls it to cut what revoked tokens hold open.
    func revocationCount() throws -> Int64

    /// Ids of tokens revoked after `since` (a `revocationCount`), with the count they were seen at.
    func revokedSince(_ since: Int64) throws -> (ids: [String], count: Int64)
}
