import SinkiPlan
import SinkiRecord
import SinkiSupport

/// The `sent` table: the versions this agent saved at the server and has recorded no answer to.
extension StateStore {
    /// Notes a save about to go (committed before the request leaves).
    public func noteSent(_ path: String, _ node: Node) throws(SQLiteError) {
        try database.run("INSERT OR IGNORE INTO sent(path, kind, hash, perm, xattrs) VALUES(?, ?, ?, ?, ?)", path, node.recordKind.code, node.hash,
                         node.perm, node.xattrs)
    }

    /// The unanswered saves of `path`.
    public func sent(_ path: String) throws -> [Node] {
        var out: [Node] = []
        try database.query("SELECT kind, hash, perm, xattrs FROM sent WHERE path = ?", path) { row in
            out.append(Node(kind: RecordKind(code: row.int64(0)), hash: row.text(1), perm: UInt32(truncatingIfNeeded: row.int64(2)),
                            xattrs: row.text(3)))
        }
        return out
    }

    /// An outcome for `path` was recorded: every unanswered save of it is answered (Remote only moves
    /// forward, so an older one can no longer come back as news).
    public func dropSent(_ path: String) throws(SQLiteError) {
        try database.run("DELETE FROM sent WHERE path = ?", path)
    }

    /// Whether any save waits for its answer (cheap: one row looked at).
    public var hasSent: Bool { (try? database.scalar("SELECT EXISTS (SELECT 1 FROM sent)")) == 1 }
}
