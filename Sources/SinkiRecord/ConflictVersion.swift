/// One version in a conflict left for `sinkid resolve`: its facts, and where the agent kept a copy of
/// it aside. The state database keeps it, the control socket lists it.
public struct ConflictVersion: Sendable, Equatable {
    public var device: String
    public var deleted: Bool
    public var size: Int64
    public var sha256: String
    /// Nanoseconds since the Unix epoch.
    public var modifiedAt: Int64
    /// The copy kept aside in the agent's state folder (`STATE/conflicts/…`); nil for a deleted version.
    public var copy: String?

    public init(device: String, deleted: Bool = false, size: Int64 = 0, sha256: String = "", modifiedAt: Int64 = 0, copy: String? = nil) {
        self.device = device
        self.deleted = deleted
        self.size = size
        self.sha256 = sha256
        self.modifiedAt = modifiedAt
        self.copy = copy
    }
}
