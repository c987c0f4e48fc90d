/// Where the server keeps the `ask` conflicts every device of a user knows (docs/protocol.md,
/// "Conflicts left for resolve"): one record per path in conflict, at `.sinki/conflicts/` and the
/// path (`.sinki/conflicts/SaveGames/player1.save`). Its content is the version the device that found
/// the conflict holds back (its device, size, SHA-256, mode, time); the version it contends with is
/// whatever the path itself holds on the server. Its tombstone settles the conflict everywhere.
/// No root may be named `.sinki`, so these records are never a synced file.
public enum SharedConflict {
    /// The reserved top-level name; a root may not have it.
    public static let reservedRoot = ".sinki"
    static let prefix = reservedRoot + "/conflicts/"

    /// The conflict record's path for the conflict at `path`.
    public static func recordPath(for path: String) -> String { prefix + path }

    /// The path in conflict that a conflict record's path names; nil for any other path.
    public static func conflictPath(of recordPath: String) -> String? {
        guard recordPath.utf8.starts(with: prefix.utf8) else { return nil }
        let path = String(decoding: recordPath.utf8.dropFirst(prefix.utf8.count), as: UTF8.self)
        guard let checked = try? RecordPath(validating: path), checked.root != reservedRoot else { return nil }
        return checked.string
    }

    /// Whether a record path is in the reserved namespace at all.
    public static func isReserved(_ recordPath: String) -> Bool {
        recordPath.utf8.starts(with: (reservedRoot + "/").utf8)
    }
}
