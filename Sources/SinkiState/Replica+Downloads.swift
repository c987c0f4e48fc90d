import Glibc
import SinkiRecord
import SinkiSupport

/// An asset to download before the records of a page can be applied.
public struct AssetFetch: Sendable, Equatable {
    /// A path whose record names the asset (the first, when several share it).
    public var path: String
    public var asset: Asset
    /// Where the bytes go while they arrive; a later try goes on from what it holds.
    public var partialPath: String
    /// Downloaded and checked already (an earlier try of the same page got it).
    public var ready: Bool
}

/// Downloads live in the state folder as `downloads/SHA256.part` while they arrive, and as
/// `downloads/SHA256` once their size and hash are checked; applying the record renames that file into
/// place (a copy when the state folder is on another file system). Named by content, a download cut
/// off by a restart goes on from where it stopped, and two paths with the same content fetch it once.
extension Replica {
    var downloadsDirectory: String {
        let state = store.path.lastIndex(of: "/").map { String(store.path[..<$0]) } ?? "."
        return state + "/downloads"
    }

    /// The assets `records` need that are not here already (`ready` when downloaded): for every file record
    /// without inline content that will be written, a conflict included (its rule needs the bytes).
    public func assetsToFetch(_ records: [Record]) throws -> [AssetFetch] {
        var out: [AssetFetch] = []
        var seen = Set<String>()
        let batch = Dictionary(records.map { (PathKey($0.path), $0) }, uniquingKeysWith: { $0.changeTag >= $1.changeTag ? $0 : $1 })
        for record in records where !record.deleted && record.kind == .file && record.data == nil {
            guard let asset = record.asset, asset.size > 0, !seen.contains(asset.sha256),
                  let recordPath = try? RecordPath(validating: record.path), let path = locate(recordPath),
                  !isIgnored(root: path.root.index, relative: path.relative, isDirectory: false) else { continue }
            if let row = try store.file(record.path) {
                if row.holds(record) { continue }
                if row.present && row.kind == .file && row.sha256 == asset.sha256 { continue }
            }
            if try isOwnUnacknowledgedPush(record) { continue }
            // Renamed from a path that is here with these bytes: the apply renames it (the same test as
            // its plan), nothing to fetch.
            if record.movedFrom != nil, (try? safeRoots[path.root.index].stat(path.relative)) == .some(nil),
               try store.outboxEntry(record.path) == nil, try renameSource(for: record, at: path, batch: batch) != nil { continue }
            seen.insert(asset.sha256)
            out.append(AssetFetch(path: record.path, asset: asset, partialPath: downloadPath(asset.sha256) + ".part",
                                  ready: hasDownload(asset)))
        }
        if !out.isEmpty && mkdir(downloadsDirectory, 0o700) != 0 && errno != EEXIST {
            throw SystemError("mkdir", errno: errno, path: downloadsDirectory)
        }
        return out
    }

    /// The partial file holds the asset, checked: it becomes the download the next apply uses.
    public func downloadFinished(_ fetch: AssetFetch) throws {
        let done = downloadPath(fetch.asset.sha256)
        try syscall("rename", path: fetch.partialPath) { rename(fetch.partialPath, done) }
    }

    /// Removes downloads the apply did not consume (their record lost to a newer one, say).
    public func discardDownloads(_ fetches: [AssetFetch]) {
        for fetch in fetches { unlink(downloadPath(fetch.asset.sha256)) }
    }

    /// Where the download of the content with this SHA-256 waits once checked.
    func downloadPath(_ sha256: String) -> String { downloadsDirectory + "/" + sha256 }

    /// Where the checked download of `record`'s asset waits (named by the asset: a manifest's hash is
    /// not the record's name for a file of up to 256 KiB).
    func downloadPath(of record: Record) -> String { downloadPath(record.asset?.sha256 ?? record.sha256) }

    /// Whether `record`'s bytes are a large file's asset (downloaded and checked before use), not inline.
    static func isAssetContent(_ record: Record) -> Bool { record.data == nil && record.size > 0 && record.asset != nil }

    /// Whether the checked download of `asset` is waiting in the state folder.
    func hasDownload(_ asset: Asset) -> Bool {
        var info = Glibc.stat()
        return lstat(downloadPath(asset.sha256), &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG
            && Int64(info.st_size) == asset.size
    }

    /// Whether the record's bytes can be written now: inline, or an asset downloaded and checked.
    func hasContent(_ record: Record) -> Bool {
        if record.data != nil || record.size == 0 { return true }
        if let asset = record.asset { return (asset.isManifest || asset.sha256 == record.sha256) && hasDownload(asset) }
        return false
    }
}

extension Replica {
    /// The local files holding chunks of `chunks`, opened below their roots, and for each chunk name
    /// found the source and offset to copy it from: a new version is built from these first, and only
    /// the rest is downloaded. Files that no longer match the database are not offered.
    public func chunkSources(for chunks: [ChunkRef]) throws -> (sources: [ChunkSource], places: [String: (source: Int, offset: Int64)]) {
        let found = try store.places(of: chunks.map(\.sha256))
        var sources: [ChunkSource] = []
        var byManifest: [String: Int?] = [:]
        var places: [String: (source: Int, offset: Int64)] = [:]
        for (name, place) in found {
            if byManifest[place.manifest] == nil { byManifest[place.manifest] = try openHolder(of: place.manifest, into: &sources) }
            if let index = byManifest[place.manifest] ?? nil { places[name] = (index, place.offset) }
        }
        return (sources, places)
    }

    /// Opens a present file whose content is manifest `id` and which is still what the database says;
    /// returns its index in `sources`.
    private func openHolder(of id: String, into sources: inout [ChunkSource]) throws -> Int? {
        for row in try store.holders(of: id) {
            guard let path = try? RecordPath(validating: row.path), let local = locate(path),
                  let file = try? safeRoots[local.root.index].open(local.relative, flags: O_RDONLY | O_NOCTTY | O_NONBLOCK),
                  let held = try? withExtendedLifetime(file, { () throws(SystemError) in try HeldFile(duplicating: file.raw) }),
                  let stat = try? held.stat(), row.matches(stat) else { continue }
            sources.append(ChunkSource(file: held, expect: stat))
            return sources.count - 1
        }
        return nil
    }

    /// The assembler of a manifest asset's download (going on from what an earlier run placed).
    public func assembler(for asset: Asset) throws -> ChunkAssembler {
        if mkdir(downloadsDirectory, 0o700) != 0 && errno != EEXIST { throw SystemError("mkdir", errno: errno, path: downloadsDirectory) }
        return try ChunkAssembler(id: asset.sha256, chunks: asset.chunks ?? [], directory: downloadsDirectory)
    }
}
