import SinkiRecord
import SinkiSupport

/// One path of the Remote tree: the server's record as this agent last read it (content left out).
public struct RemoteEntry: Sendable, Equatable {
    public var path: String
    public var changeTag: Int64
    public var deleted: Bool
    public var type: String
    /// The record's content id (`sha256`): empty for a folder and a tombstone.
    public var contentID: String
    public var size: Int64
    /// The path this version was renamed from, as its writer said (a folder's rename moves what is in it).
    public var movedFrom: String?

    public init(path: String, changeTag: Int64, deleted: Bool, type: String, contentID: String, size: Int64, movedFrom: String? = nil) {
        self.path = path
        self.changeTag = changeTag
        self.deleted = deleted
        self.type = type
        self.contentID = contentID
        self.size = size
        self.movedFrom = movedFrom
    }

    public init(_ record: Record) {
        self.init(path: record.path, changeTag: record.changeTag, deleted: record.deleted, type: record.type,
                  contentID: record.deleted ? "" : record.sha256, size: record.deleted ? 0 : record.size,
                  movedFrom: record.deleted ? nil : record.movedFrom)
    }

    /// The content id a live record counts with in the folder digests; nil for a tombstone.
    var liveContent: String? { deleted ? nil : contentID }
}

/// The Remote tree (issue 21): every record the agent has read from the server — through the change
/// feed, the answers to its own saves, conflicts, and full comparisons — at its newest version,
/// tombstones included, with the digests of its folders kept in the same transactions, so that a copy
/// that drifted from the server's shows as a digest that differs (`GET /v1/digests`).
///
/// Rows only move forward: a record older than the one held (a page read before an acknowledgement,
/// say) changes nothing. Digests are `TreeDigest`s, exactly as the server keeps them.
extension StateStore {
    static let remoteSchema = """
        CREATE TABLE IF NOT EXISTS remote(
            path TEXT PRIMARY KEY,
            change_tag INTEGER NOT NULL,
            deleted INTEGER NOT NULL,
            type TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            size INTEGER NOT NULL,
            moved_from TEXT
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS remote_moved_from ON remote(moved_from) WHERE moved_from IS NOT NULL;
        CREATE TABLE IF NOT EXISTS remote_folders(
            path TEXT PRIMARY KEY,
            parent TEXT,
            digest BLOB NOT NULL,
            direct BLOB NOT NULL,
            head INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS remote_folders_parent ON remote_folders(parent, path) WHERE parent IS NOT NULL;
        -- What was read since a tag: the look for versions read but not held here walks only those.
        CREATE INDEX IF NOT EXISTS remote_tag ON remote(change_tag);
        """

    /// Takes in records as read from the server; each replaces the row of its path only when newer.
    /// Returns the entries that changed. Runs in the caller's transaction, or one of its own.
    @discardableResult
    public func observeRemote(_ records: [Record]) throws -> Int {
        try observeRemote(records.map(RemoteEntry.init))
    }

    /// `exactly`: each entry replaces its row whatever the tags say (a repair sets the tree to what the
    /// server answered, which may be older than what was read before if the server lost records).
    @discardableResult
    func observeRemote(_ entries: [RemoteEntry], exactly: Bool = false) throws -> Int {
        if entries.isEmpty { return 0 }
        return try transaction {
            var deltas = FolderDeltas()
            var changed = 0
            for entry in entries where entry.changeTag > 0 {
                let old = try remoteEntry(entry.path)
                if let old, exactly ? old == entry : old.changeTag >= entry.changeTag { continue }
                try database.run("""
                    INSERT INTO remote(path, change_tag, deleted, type, sha256, size, moved_from) VALUES(?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT(path) DO UPDATE SET change_tag = excluded.change_tag, deleted = excluded.deleted,
                        type = excluded.type, sha256 = excluded.sha256, size = excluded.size, moved_from = excluded.moved_from
                    """, entry.path, entry.changeTag, entry.deleted, entry.type, entry.contentID, entry.size, entry.movedFrom)
                deltas.change(path: entry.path, from: old?.liveContent, to: entry.liveContent, tag: entry.changeTag)
                changed += 1
            }
            try apply(deltas)
            return changed
        }
    }

    /// Removes the rows at `paths` (the server holds no record there: a repair found it so).
    func forgetRemote(_ paths: [String]) throws {
        if paths.isEmpty { return }
        try transaction {
            var deltas = FolderDeltas()
            for path in paths {
                guard let old = try remoteEntry(path) else { continue }
                try database.run("DELETE FROM remote WHERE path = ?", path)
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
            try database.run("DELETE FROM remote")
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

    public func remoteEntry(_ path: String) throws -> RemoteEntry? {
        var found: RemoteEntry?
        try database.query("SELECT path, change_tag, deleted, type, sha256, size, moved_from FROM remote WHERE path = ?", path) {
            found = Self.readRemote($0)
        }
        return found
    }

    static func readRemote(_ row: Statement) -> RemoteEntry {
        RemoteEntry(path: row.text(0), changeTag: row.int64(1), deleted: row.bool(2), type: row.text(3), contentID: row.text(4),
                    size: row.int64(5), movedFrom: row.optionalText(6))
    }

    /// The digests of one folder of the Remote tree (zero, head 0, for a folder that never held a record).
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

    /// Whether a version newer than `tag` renamed `path` or a folder above it away (its writer's
    /// tombstones for the old paths follow it: until they come, a row moved away here is no loss).
    func remoteMovedAway(_ path: String, after tag: Int64) throws -> Bool {
        for source in FolderDeltas.folders(of: path).dropFirst() + [path] {
            if try database.scalar("SELECT 1 FROM remote WHERE moved_from = ? AND change_tag > ? AND deleted = 0 LIMIT 1", source, tag) != nil {
                return true
            }
        }
        return false
    }

    /// The rows directly in folder `path` (tombstones included), in bytewise order.
    public func remoteEntries(directlyIn path: String) throws -> [RemoteEntry] {
        var out: [RemoteEntry] = []
        let depth = path.utf8.reduce(1) { $1 == UInt8(ascii: "/") ? $0 + 1 : $0 }
        try database.query("SELECT path, change_tag, deleted, type, sha256, size, moved_from FROM remote WHERE path >= ? AND path < ? ORDER BY path",
                           path + "/", path + "0") { row in
            let entry = Self.readRemote(row)
            if entry.path.utf8.reduce(0, { $1 == UInt8(ascii: "/") ? $0 + 1 : $0 }) == depth { out.append(entry) }
        }
        return out
    }
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
