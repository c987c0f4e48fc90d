import SinkiRecord
import SinkiSupport

/// Where a chunk can be read on this machine: in the file holding `manifest`, at `offset`.
public struct ChunkPlace: Sendable, Equatable {
    public var manifest: String
    public var offset: Int64
}

/// How far the upload of a large file has come, kept so that a restart goes on from there instead of
/// reading the file again: the file's identity when it was read (size, mtime, ctime, inode), the
/// chunks cut and sent so far (all of them once `manifest` is set), and the offset the next one starts at.
public struct ChunkUploadProgress: Sendable, Equatable {
    public var path: String
    public var size: Int64
    public var mtime: Int64
    public var ctime: Int64
    public var inode: UInt64
    public var offset: Int64
    public var chunks: [ChunkRef]
    /// The manifest hash, once every chunk is on the server: the record may then name it.
    public var manifest: String?
    /// The file's content identity then (`ContentID`): the manifest hash, or for a file of up to 256 KiB
    /// sent as chunks (an inline limit below that) the SHA-256 of its bytes.
    public var content: String?

    public init(path: String, stat: FileStat, offset: Int64 = 0, chunks: [ChunkRef] = [], manifest: String? = nil, content: String? = nil) {
        self.path = path
        size = stat.size
        mtime = stat.mtime
        ctime = stat.ctime
        inode = stat.inode
        self.offset = offset
        self.chunks = chunks
        self.manifest = manifest
        self.content = content ?? manifest
    }

    /// Whether `stat` is still the file this progress was read from.
    public func matches(_ stat: FileStat) -> Bool {
        size == stat.size && mtime == stat.mtime && ctime == stat.ctime && inode == stat.inode
    }
}

/// The manifests of large files this agent holds or sent, and an index from each chunk to one place
/// it can be read locally: what lets a new version be built from the chunks already on disk (its old
/// version, a copy, a renamed file) so that only the chunks nobody here holds are downloaded.
extension StateStore {
    static let manifestsSchema = """
        CREATE TABLE IF NOT EXISTS manifests(id TEXT PRIMARY KEY, chunks BLOB NOT NULL) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS chunk_places(chunk BLOB PRIMARY KEY, manifest TEXT NOT NULL, offset INTEGER NOT NULL) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS chunk_uploads(path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime INTEGER NOT NULL,
            ctime INTEGER NOT NULL, inode INTEGER NOT NULL, offset INTEGER NOT NULL, chunks BLOB NOT NULL, manifest TEXT,
            content TEXT) WITHOUT ROWID;
        """

    /// Keeps a manifest; with `held` (a file here has this content now) its chunks point at it as where
    /// they can be read (the newest such manifest wins a chunk). A manifest only read from the server is
    /// kept without its places: no file here holds it yet, and its chunks are read from the old version.
    public func saveManifest(_ id: String, chunks: [ChunkRef], held: Bool = true) throws(SQLiteError) {
        if try database.scalar("SELECT 1 FROM manifests WHERE id = ?", id) == nil {
            try database.run("INSERT INTO manifests(id, chunks) VALUES(?, ?)", id, ManifestCoding.encode(chunks.map { ($0.sha256, $0.size) }))
        }
        guard held else { return }
        let statement = try database.prepare("INSERT OR REPLACE INTO chunk_places(chunk, manifest, offset) VALUES(?, ?, ?)")
        defer { statement.reset() }
        var offset: Int64 = 0
        for chunk in chunks {
            guard let raw = ContentID.rawHash(chunk.sha256) else { continue }
            try statement.bind([raw, id, offset])
            while try statement.step() {}
            statement.reset()
            offset += chunk.size
        }
    }

    /// The chunks of manifest `id`, if this agent kept it.
    public func manifest(_ id: String) throws(SQLiteError) -> [ChunkRef]? {
        let statement = try database.prepare("SELECT chunks FROM manifests WHERE id = ?")
        try statement.bind([id])
        defer { statement.reset() }
        guard try statement.step(), let decoded = ManifestCoding.decode(statement.blob(0)) else { return nil }
        return decoded.map { ChunkRef(sha256: $0.sha256, size: $0.size) }
    }

    /// Where each of `chunks` (by name) may be read here; chunks no manifest here names are left out.
    public func places(of chunks: [String]) throws(SQLiteError) -> [String: ChunkPlace] {
        let statement = try database.prepare("SELECT manifest, offset FROM chunk_places WHERE chunk = ?")
        defer { statement.reset() }
        var out: [String: ChunkPlace] = [:]
        for name in Set(chunks) {
            guard let raw = ContentID.rawHash(name) else { continue }
            try statement.bind([raw])
            if try statement.step() { out[name] = ChunkPlace(manifest: statement.text(0), offset: statement.int64(1)) }
            statement.reset()
        }
        return out
    }

    /// Files on disk whose content is manifest `id` (by the Local tree, `tree_content`).
    public func holders(of id: String) throws -> [TreeRow] {
        var out: [TreeRow] = []
        try database.query("""
            SELECT \(Self.treeColumns) FROM tree INDEXED BY tree_content WHERE l_hash = ? AND l_kind = 0 AND l_size > \(ContentID.wholeFileLimit) LIMIT 8
            """, id) { out.append(Self.readRow($0)) }
        return out
    }

    /// Forgets manifests no file here holds any more, no Remote entry names and no upload builds (and
    /// their chunks' places); returns how many.
    @discardableResult
    public func pruneManifests() throws(SQLiteError) -> Int {
        try database.run("""
            DELETE FROM manifests WHERE id NOT IN (SELECT l_hash FROM tree WHERE l_kind = 0 AND l_size > \(ContentID.wholeFileLimit))
              AND id NOT IN (SELECT r_asset FROM tree WHERE r_asset_manifest = 1)
              AND id NOT IN (SELECT manifest FROM chunk_uploads WHERE manifest IS NOT NULL)
            """)
        let removed = database.changes
        if removed > 0 { try database.run("DELETE FROM chunk_places WHERE manifest NOT IN (SELECT id FROM manifests)") }
        return removed
    }

    // MARK: Uploads of chunks

    public func chunkUpload(_ path: String) throws(SQLiteError) -> ChunkUploadProgress? {
        let statement = try database.prepare("SELECT size, mtime, ctime, inode, offset, chunks, manifest, content FROM chunk_uploads WHERE path = ?")
        try statement.bind([path])
        defer { statement.reset() }
        guard try statement.step() else { return nil }
        var progress = ChunkUploadProgress(path: path, stat: FileStat(kind: .file, size: statement.int64(0), mtime: statement.int64(1),
                                                                       ctime: statement.int64(2), inode: UInt64(bitPattern: statement.int64(3)),
                                                                       device: 0, mode: 0),
                                           offset: statement.int64(4))
        progress.chunks = (ManifestCoding.decode(statement.blob(5)) ?? []).map { ChunkRef(sha256: $0.sha256, size: $0.size) }
        progress.manifest = statement.optionalText(6)
        progress.content = statement.optionalText(7)
        return progress
    }

    public func saveChunkUpload(_ progress: ChunkUploadProgress) throws(SQLiteError) {
        try database.run("""
            INSERT INTO chunk_uploads(path, size, mtime, ctime, inode, offset, chunks, manifest, content) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(path) DO UPDATE SET size = excluded.size, mtime = excluded.mtime, ctime = excluded.ctime, inode = excluded.inode,
                offset = excluded.offset, chunks = excluded.chunks, manifest = excluded.manifest, content = excluded.content
            """, progress.path, progress.size, progress.mtime, progress.ctime, progress.inode, progress.offset,
                         ManifestCoding.encode(progress.chunks.map { ($0.sha256, $0.size) }), progress.manifest, progress.content)
    }

    public func removeChunkUpload(_ path: String) throws(SQLiteError) {
        try database.run("DELETE FROM chunk_uploads WHERE path = ?", path)
    }
}
