import Foundation
import Glibc
import SinkiRecord
import SinkiSupport
import Synchronization

/// Where one user's chunks are, and what is known of them: `KEY/index.db` beside the user's packs, a
/// SQLite database every server sharing the chunks folder opens (docs/server.md, "Chunks"). Chunk names
/// are kept as their 32 raw bytes.
///
/// - `chunks(name, pack, offset, size, stored, touched)`: a chunk's bytes are `size` bytes at `offset`
///   of `packs/PACK`, or the file `XX/NAME` of the layout before packs when `pack` is empty. `stored` is
///   when the bytes were written (durability is owed for those stored since the last `syncfs`),
///   `touched` when they were last stored or found present (garbage collection keeps them a grace
///   from then). Indexed by `(pack, offset)` for repacking.
/// - `scoped(prefix, name, touched)`: a token narrowed to the prefix (`prefix` the SHA-256 of its text)
///   uploaded the chunk, last at `touched`.
/// - `damaged(name)`: chunks removed as damaged and not stored since (`DamagedChunks`).
///
/// Opening an index that has never been opened imports the layout before packs (chunk files, the
/// `scoped/` and `damaged/` markers) in one transaction; the chunk files stay where they are until
/// garbage collection copies them into packs. Safe to use from any thread: one connection, one at a
/// time.
final class ChunkIndex: Sendable {
    let path: String
    private let db: Mutex<SQLiteDatabase>

    static let schemaVersion = 1

    /// A chunk as the index holds it.
    struct Entry: Sendable, Equatable {
        /// The pack holding its bytes; empty for a file of its own (the layout before packs).
        var pack: String
        var offset: Int64
        var size: Int64
        /// Nanoseconds since the epoch.
        var stored: Int64
        var touched: Int64

        var isFile: Bool { pack.isEmpty }
    }

    /// A chunk written into a pack, to be given its name.
    struct Arrival: Sendable {
        var name: [UInt8]
        var pack: String
        var offset: Int64
        var size: Int64
        /// The narrowed token's prefix key (raw SHA-256 of the prefix) when its bytes were checked.
        var prefixKey: [UInt8]?
    }

    /// What became of an arrival.
    enum Outcome: Sendable, Equatable {
        /// Its bytes are the chunk now.
        case stored
        /// The user held the chunk at that size already: touched, the arrival's bytes left unused.
        case alreadyHeld
    }

    /// Opens (creating, and importing the layout before packs) the index of the user folder `folder`.
    /// `shared`: the folder is on a network file system (no WAL).
    init(folder: String, shared: Bool) throws {
        path = folder + "/index.db"
        let database = try SQLiteDatabase(path: path, shared: shared)
        if database.userVersion < Self.schemaVersion {
            let imported = try database.transaction { () throws -> Bool in
                // Looked at again inside the write transaction: another server may have been first.
                guard database.userVersion < Self.schemaVersion else { return false }
                try database.execute("""
                    CREATE TABLE IF NOT EXISTS chunks(name BLOB PRIMARY KEY, pack TEXT NOT NULL, offset INTEGER NOT NULL,
                        size INTEGER NOT NULL, stored INTEGER NOT NULL, touched INTEGER NOT NULL) WITHOUT ROWID;
                    CREATE INDEX IF NOT EXISTS chunks_pack ON chunks(pack, offset);
                    CREATE TABLE IF NOT EXISTS scoped(prefix BLOB NOT NULL, name BLOB NOT NULL, touched INTEGER NOT NULL,
                        PRIMARY KEY(prefix, name)) WITHOUT ROWID;
                    CREATE TABLE IF NOT EXISTS damaged(name BLOB PRIMARY KEY) WITHOUT ROWID;
                    """)
                try LegacyLayout.importInto(database, folder: folder)
                try database.setUserVersion(Self.schemaVersion)
                return true
            }
            // The markers are rows now; the chunk files stay until collection moves them into packs.
            if imported { LegacyLayout.removeMarkers(folder: folder) }
        }
        db = Mutex(database)
    }

    private func with<T: Sendable>(_ body: (SQLiteDatabase) throws -> T) throws -> T {
        try db.withLock { database in
            let connection = database
            return try body(connection)
        }
    }

    // MARK: Looking up

    /// The entries of `names` (raw), nil where there is none.
    func entries(_ names: [[UInt8]]) throws -> [Entry?] {
        try with { database in
            try names.map { name in try Self.entry(database, name) }
        }
    }

    func entry(_ name: [UInt8]) throws -> Entry? { try entries([name])[0] }

    private static func entry(_ database: SQLiteDatabase, _ name: [UInt8]) throws -> Entry? {
        var found: Entry?
        try database.query("SELECT pack, offset, size, stored, touched FROM chunks WHERE name = ?", name) { row in
            found = Entry(pack: row.text(0), offset: row.int64(1), size: row.int64(2), stored: row.int64(3), touched: row.int64(4))
        }
        return found
    }

    /// Which of `names` a token narrowed to the prefix `prefixKey` uploaded (its marker is there).
    func marked(_ names: [[UInt8]], prefixKey: [UInt8]) throws -> [Bool] {
        try with { database in
            try names.map { name in try database.scalar("SELECT 1 FROM scoped WHERE prefix = ? AND name = ?", prefixKey, name) != nil }
        }
    }

    // MARK: Changing

    /// Gives each arrival its name, in one transaction: a chunk held at the same size keeps its bytes
    /// and is touched (unless `replace`: a narrowed token's checked bytes always take the name), any
    /// other arrival becomes the chunk. Every arrival clears the chunk's damage note, and a narrowed
    /// token's leaves its marker. Returns the outcomes, and the names whose own files (the layout before
    /// packs) were replaced: the caller removes those after the commit.
    func store(_ arrivals: [Arrival], now: Int64) throws -> (outcomes: [Outcome], replacedFiles: [[UInt8]]) {
        try with { database in
            try database.transaction {
                var outcomes: [Outcome] = []
                var replaced: [[UInt8]] = []
                for arrival in arrivals {
                    let held = try Self.entry(database, arrival.name)
                    if arrival.prefixKey == nil, let held, held.size == arrival.size {
                        try database.run("UPDATE chunks SET touched = ? WHERE name = ?", now, arrival.name)
                        outcomes.append(.alreadyHeld)
                    } else {
                        try database.run("INSERT OR REPLACE INTO chunks(name, pack, offset, size, stored, touched) VALUES (?, ?, ?, ?, ?, ?)",
                                         arrival.name, arrival.pack, arrival.offset, arrival.size, now, now)
                        if held?.isFile == true { replaced.append(arrival.name) }
                        outcomes.append(.stored)
                    }
                    if let prefixKey = arrival.prefixKey {
                        try database.run("INSERT OR REPLACE INTO scoped(prefix, name, touched) VALUES (?, ?, ?)", prefixKey, arrival.name, now)
                    }
                    try database.run("DELETE FROM damaged WHERE name = ?", arrival.name)
                }
                return (outcomes, replaced)
            }
        }
    }

    /// Sets `touched` of each of `names` the user holds to `now`; says which it holds.
    func touch(_ names: [[UInt8]], now: Int64) throws -> [Bool] {
        try with { database in
            try database.transaction {
                try names.map { name in
                    try database.run("UPDATE chunks SET touched = ? WHERE name = ?", now, name)
                    return database.changes > 0
                }
            }
        }
    }

    /// The chunk is removed as damaged: noted, and its entry gone, in one transaction. Returns the entry.
    func removeDamaged(_ name: [UInt8]) throws -> Entry? {
        try with { database in
            try database.transaction {
                guard let held = try Self.entry(database, name) else { return nil }
                try database.run("INSERT OR IGNORE INTO damaged(name) VALUES (?)", name)
                try database.run("DELETE FROM chunks WHERE name = ?", name)
                return held
            }
        }
    }

    /// The chunks removed as damaged and not stored since (raw names).
    func damaged() throws -> [[UInt8]] {
        try with { database in
            var names: [[UInt8]] = []
            try database.query("SELECT name FROM damaged") { row in names.append(row.blob(0)) }
            return names
        }
    }

    func clearDamaged(_ names: [[UInt8]]) throws {
        guard !names.isEmpty else { return }
        try with { database in
            try database.transaction { for name in names { try database.run("DELETE FROM damaged WHERE name = ?", name) } }
        }
    }

    // MARK: Garbage collection

    /// The chunks last touched at or before `cutoff` (raw names).
    func untouched(since cutoff: Int64) throws -> [[UInt8]] {
        try with { database in
            var names: [[UInt8]] = []
            try database.query("SELECT name FROM chunks WHERE touched <= ?", cutoff) { row in names.append(row.blob(0)) }
            return names
        }
    }

    /// Removes the entries of `names` still last touched at or before `cutoff`, in one transaction;
    /// returns the entries removed, with their names.
    func remove(_ names: [[UInt8]], touchedBy cutoff: Int64) throws -> [(name: [UInt8], entry: Entry)] {
        try with { database in
            try database.transaction {
                var removed: [(name: [UInt8], entry: Entry)] = []
                for name in names {
                    guard let held = try Self.entry(database, name), held.touched <= cutoff else { continue }
                    try database.run("DELETE FROM chunks WHERE name = ?", name)
                    removed.append((name, held))
                }
                return removed
            }
        }
    }

    /// Forgets narrowed tokens' uploads last made before `cutoff`.
    func removeMarkers(before cutoff: Int64) throws {
        try with { database in try database.run("DELETE FROM scoped WHERE touched < ?", cutoff) }
    }

    /// Live bytes and chunks per pack (the empty pack: chunks in files of their own).
    func packUsage() throws -> [String: (bytes: Int64, chunks: Int)] {
        try with { database in
            var usage: [String: (bytes: Int64, chunks: Int)] = [:]
            try database.query("SELECT pack, SUM(size), COUNT(*) FROM chunks GROUP BY pack") { row in
                usage[row.text(0)] = (row.int64(1), row.int(2))
            }
            return usage
        }
    }

    /// The chunks in `pack`, in the order of their bytes; at most `limit`.
    func contents(of pack: String, limit: Int = .max) throws -> [(name: [UInt8], offset: Int64, size: Int64)] {
        try with { database in
            var rows: [(name: [UInt8], offset: Int64, size: Int64)] = []
            try database.query("SELECT name, offset, size FROM chunks WHERE pack = ? ORDER BY offset LIMIT ?", pack, limit) { row in
                rows.append((row.blob(0), row.int64(1), row.int64(2)))
            }
            return rows
        }
    }

    /// A chunk copied by repacking, from where it was to where it is now.
    struct Move: Sendable {
        var name: [UInt8]
        var from: (pack: String, offset: Int64)
        var to: (pack: String, offset: Int64)
    }

    /// Points each chunk still where its move found it at its new place, in one transaction; returns
    /// the positions of the moves made (an entry changed meanwhile, by a new upload or a removal, is
    /// left as it is).
    func apply(_ moves: [Move]) throws -> Set<Int> {
        guard !moves.isEmpty else { return [] }
        return try with { database in
            try database.transaction {
                var moved = Set<Int>()
                for (position, move) in moves.enumerated() {
                    try database.run("UPDATE chunks SET pack = ?, offset = ? WHERE name = ? AND pack = ? AND offset = ?",
                                     move.to.pack, move.to.offset, move.name, move.from.pack, move.from.offset)
                    if database.changes > 0 { moved.insert(position) }
                }
                return moved
            }
        }
    }
}

/// The layout of a user's chunks before packs (one file each: `XX/HASH`, markers as empty files under
/// `scoped/PREFIX/XX/HASH` and `damaged/HASH`), read into a new index.
enum LegacyLayout {
    /// Rows for every chunk file (`stored` its ctime, `touched` its mtime) and marker of the user folder.
    static func importInto(_ database: SQLiteDatabase, folder: String) throws {
        for fanOut in names(in: folder) where fanOut.utf8.count == 2 && ChunkStore.isHex(fanOut) {
            for name in names(in: folder + "/" + fanOut) where ChunkStore.isName(name) && name.hasPrefix(fanOut) {
                guard let held = stat(folder + "/" + fanOut + "/" + name), let raw = ContentID.rawHash(name) else { continue }
                try database.run("INSERT OR IGNORE INTO chunks(name, pack, offset, size, stored, touched) VALUES (?, '', 0, ?, ?, ?)",
                                 raw, held.size, held.ctime, held.mtime)
            }
        }
        for prefix in names(in: folder + "/scoped") {
            guard let prefixKey = ContentID.rawHash(prefix) else { continue }
            for fanOut in names(in: folder + "/scoped/" + prefix) {
                for name in names(in: folder + "/scoped/" + prefix + "/" + fanOut) {
                    guard let raw = ContentID.rawHash(name), let held = stat(folder + "/scoped/" + prefix + "/" + fanOut + "/" + name) else { continue }
                    try database.run("INSERT OR REPLACE INTO scoped(prefix, name, touched) VALUES (?, ?, ?)", prefixKey, raw, held.mtime)
                }
            }
        }
        for name in names(in: folder + "/damaged") {
            guard let raw = ContentID.rawHash(name) else { continue }
            try database.run("INSERT OR IGNORE INTO damaged(name) VALUES (?)", raw)
        }
    }

    /// The marker folders, once their rows are committed.
    static func removeMarkers(folder: String) {
        for marker in ["/scoped", "/damaged"] { try? FileManager.default.removeItem(atPath: folder + marker) }
    }

    /// Where the chunk `name` lives as a file of its own.
    static func path(folder: String, name: String) -> String { folder + "/" + name.prefix(2) + "/" + name }

    static func names(in folder: String) -> [String] {
        (try? FileDescriptor.open(folder, flags: O_RDONLY | O_DIRECTORY).listDirectory().names) ?? []
    }

    /// What `lstat` says of a regular file; nil for anything else.
    static func stat(_ path: String) -> FileStat? {
        var info = Glibc.stat()
        guard lstat(path, &info) == 0 else { return nil }
        let found = FileStat(info)
        return found.kind == .file ? found : nil
    }
}
