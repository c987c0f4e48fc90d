import SinkiRecord
import SinkiSupport

/// The Remote tree (issue 21): every record the agent has read from the server — through the change
/// feed, the answers to its own saves, conflicts, and listings — at its newest version, tombstones
/// included, with the digests of its folders kept in the same transactions, so that a copy that
/// drifted from the server's shows as a digest that differs (`GET /v1/digests`).
///
/// Entries only move forward: a record older than the one held (a page read before an
/// acknowledgement, say) changes nothing, except in a repair, which sets the tree to what the server
/// answered. Digests are `TreeDigest`s, exactly as the server keeps them.
extension StateStore {
    /// Takes in records as read from the server; each replaces the entry of its path only when newer
    /// (`exactly`: whatever the tags say). Returns the paths whose entry changed. Runs in the caller's
    /// transaction, or one of its own.
    @discardableResult
    public func observeRemote(_ records: [Record], exactly: Bool = false) throws -> [String] {
        try observeRemote(records.map { ($0.path, RemoteFacts($0)) }, exactly: exactly)
    }

    @discardableResult
    func observeRemote(_ entries: [(path: String, facts: RemoteFacts)], exactly: Bool = false) throws -> [String] {
        try observe(entries, exactly: exactly, agreed: false)
    }

    /// Records saves the server took: each version is Remote's (unless the feed brought a newer one
    /// already) and Synced's, in one row write each, and each folder's digests change once.
    func observeSaved(_ entries: [(path: String, facts: RemoteFacts)]) throws {
        _ = try observe(entries, exactly: false, agreed: true)
    }

    /// Remote takes `entries` (all but those it holds as new or newer; with `exactly`, all but those
    /// it holds as they are), and with `agreed` Synced takes each of them too; the paths Remote took.
    private func observe(_ entries: [(path: String, facts: RemoteFacts)], exactly: Bool, agreed: Bool) throws -> [String] {
        if entries.isEmpty { return [] }
        return try transaction {
            var deltas = FolderDeltas()
            var changed: [String] = []
            for (path, entry) in entries where entry.tag > 0 {
                let old = try row(path)?.remote
                if let old, exactly ? old == entry : old.tag >= entry.tag {
                    if agreed { try setSynced(path, SyncedFacts(entry)) }
                    continue
                }
                if agreed { try writeRemoteAndSynced(path, entry) } else { try writeRemote(path, entry) }
                deltas.change(path: path, from: old?.liveContent, to: entry.liveContent, tag: entry.tag)
                changed.append(path)
            }
            try apply(deltas)
            return changed
        }
    }

    /// Removes the Remote entries at `paths` (the server holds no record there: a repair found it so).
    func forgetRemote(_ paths: [String]) throws {
        if paths.isEmpty { return }
        try transaction {
            var deltas = FolderDeltas()
            for path in paths {
                guard let old = try row(path)?.remote else { continue }
                try writeRemote(path, nil)
                // The head stays: a record was there at that tag, and heads never go back.
                deltas.change(path: path, from: old.liveContent, to: nil, tag: 0)
            }
            try apply(deltas)
        }
    }

    /// Forgets the whole Remote tree (another server, or one that no longer knows our feed position:
    /// what it holds is read again from the start).
    public func clearRemote() throws {
        try transaction {
            treeWrites &+= 1
            try database.run("""
                UPDATE tree SET r_tag = 0, r_kind = NULL, r_hash = '', r_size = 0, r_type = '', r_mode = 0, r_mtime = 0, r_device = '',
                    r_moved_from = NULL, r_asset = NULL, r_asset_manifest = 0, r_perm = 0, r_incomplete = 0, r_xattrs = '', r_xattr_data = NULL
                    WHERE r_tag != 0
                """)
            try database.run("DELETE FROM tree WHERE l_kind IS NULL AND s_tag = 0 AND s_kind IS NULL AND r_tag = 0")
            try database.run("DELETE FROM remote_folders")
        }
    }

    private func apply(_ deltas: FolderDeltas) throws {
        for (folder, delta) in deltas.folders {
            let current = try remoteFolder(folder)
            let digest = (current?.digest ?? .empty) ^ delta.digest
            let direct = (current?.direct ?? .empty) ^ delta.direct
            let head = max(current?.head ?? 0, delta.head)
            try database.run("""
                INSERT INTO remote_folders(path, parent, digest, direct, head) VALUES(?, ?, ?, ?, ?)
                ON CONFLICT(path) DO UPDATE SET digest = excluded.digest, direct = excluded.direct, head = excluded.head
                """, folder, delta.parent, digest.bytes, direct.bytes, head)
        }
    }

    /// The digests of one folder of the Remote tree (nil for a folder that never held a record).
    public func remoteFolder(_ path: String) throws -> RemoteFolder? {
        var found: RemoteFolder?
        try database.query("SELECT path, digest, direct, head FROM remote_folders WHERE path = ?", path) { found = Self.readFolder($0) }
        return found
    }

    /// The folders directly in `path` that ever held a record, in bytewise order.
    public func remoteChildren(of path: String) throws -> [RemoteFolder] {
        var out: [RemoteFolder] = []
        try database.query("SELECT path, digest, direct, head FROM remote_folders WHERE parent = ? ORDER BY path", path) {
            out.append(Self.readFolder($0))
        }
        return out
    }

    private static func readFolder(_ row: Statement) -> RemoteFolder {
        RemoteFolder(path: row.text(0), digest: TreeDigest(bytes: row.blob(1)) ?? .empty, direct: TreeDigest(bytes: row.blob(2)) ?? .empty,
                     head: row.int64(3))
    }

    /// The Remote entries directly in folder `path` (tombstones included), in bytewise order.
    public func remoteEntries(directlyIn path: String) throws -> [(path: String, facts: RemoteFacts)] {
        var out: [(path: String, facts: RemoteFacts)] = []
        let depth = path.utf8.reduce(1) { $1 == UInt8(ascii: "/") ? $0 + 1 : $0 }
        try database.query("SELECT \(Self.treeColumns) FROM tree WHERE path >= ? AND path < ? AND r_tag != 0 ORDER BY path",
                           path + "/", path + "0") { statement in
            let row = Self.readRow(statement)
            guard let remote = row.remote, row.path.utf8.reduce(0, { $1 == UInt8(ascii: "/") ? $0 + 1 : $0 }) == depth else { return }
            out.append((row.path, remote))
        }
        return out
    }

    /// The highest change tag the Remote tree holds (0: none).
    public func remoteHead() throws(SQLiteError) -> Int64 { try database.scalar("SELECT max(r_tag) FROM tree") ?? 0 }
}

/// One folder of the Remote tree with its digests (`TreeDigest`).
public struct RemoteFolder: Sendable, Equatable {
    public var path: String
    public var digest: TreeDigest
    public var direct: TreeDigest
    public var head: Int64

    public init(path: String, digest: TreeDigest = .empty, direct: TreeDigest = .empty, head: Int64 = 0) {
        self.path = path
        self.digest = digest
        self.direct = direct
        self.head = head
    }
}
