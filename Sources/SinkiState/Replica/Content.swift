import Glibc
import SinkiMerge
import SinkiRecord
import SinkiSupport

/// Remote content whose hash is not the one its record declares; it is never applied.
public struct ContentMismatch: Error, Sendable, CustomStringConvertible {
    public var path: String
    public var expected: String
    public var actual: String
    public var description: String { "content of \(quoted(path)) hashes to \(actual.prefix(16))…, record says \(expected.prefix(16))…" }
}

/// Remote content as it is checked before any of it reaches a root.
enum RemoteContent {
    /// Largest content a record may carry inline (the server's default limit): inflating allocates the
    /// declared size, so a hostile record declaring more is refused before any memory is taken.
    static let maxInlineBytes: Int64 = 64 << 20
    /// zlib never expands more than about 1,032 to 1: data declaring a size far beyond that is not
    /// what it says, and is refused without inflating it.
    static let maxInflateRatio: Int64 = 1032

    /// Inline `data` inflated (to no more than `size`) and checked against `size` and `hash` (`ContentID`).
    /// The server stores inline content as given: this is where it is checked.
    static func inflate(_ data: [UInt8]?, size: Int64, hash: String, path: String) throws -> [UInt8] {
        let data = data ?? Deflate.compress([])
        guard size <= maxInlineBytes, size <= Int64(data.count) * maxInflateRatio + 64 else {
            throw ApplyFailure(.invalid, "\(quoted(path)) declares \(size) bytes inline for \(data.count) bytes of data; "
                               + "more than \(maxInlineBytes) bytes, or more than zlib can make of them, is never inflated")
        }
        let bytes = try Deflate.decompress(data, expectedSize: Int(size))
        let digest = ContentID.of(bytes)
        guard digest == hash else { throw ContentMismatch(path: path, expected: hash, actual: digest) }
        return bytes
    }

    /// What is wrong with a downloaded asset as the content a record names; nil when nothing is. An
    /// upload asset was checked whole as it arrived, a manifest's chunks one by one: what is left is
    /// that the record names that content. Above 256 KiB its identity is the manifest's hash; a smaller
    /// file sent as chunks (an agent with a lower inline limit) is read back and hashed.
    static func problem(path: String, size: Int64, hash: String, asset: Asset, file: String) throws -> String? {
        guard asset.isManifest else { return nil }
        if ContentID.isManifest(size: size) {
            return hash == asset.sha256 ? nil : "\(quoted(path)) names content \(hash.prefix(16))…, its manifest is \(asset.sha256.prefix(16))…"
        }
        let bytes = try FileDescriptor.open(file, flags: O_RDONLY).readAll(sizeHint: Int(size))
        return ContentID.of(bytes) == hash ? nil : "the chunks of \(quoted(path)) do not make the content its record names"
    }
}

extension ReplicaContext {
    /// Where the checked download of the content with this name waits.
    func downloadPath(_ name: String) -> String { downloadsDirectory + "/" + name }

    /// Whether the checked download of `asset` is waiting in the state folder.
    func hasDownload(_ asset: Asset) -> Bool {
        var info = Glibc.stat()
        return lstat(downloadPath(asset.sha256), &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG && Int64(info.st_size) == asset.size
    }

    /// The asset a Remote entry names, with a manifest's chunks as this agent keeps them (nil when the
    /// entry names none, or its manifest is not kept).
    func asset(of remote: RemoteFacts) throws -> Asset? {
        guard let id = remote.assetID else { return nil }
        if remote.assetIsManifest {
            guard let chunks = try store.manifest(id) else { return nil }
            return Asset(manifestHash: id, chunks: chunks)
        }
        return Asset(id: id, size: remote.size, sha256: remote.hash)
    }

    /// Keeps the content just agreed on at `path` as the base of its next three-way merge, when its rule
    /// needs one. The bytes come from `bytes`, else from the file on disk (checked against the hash). A
    /// base that cannot be kept costs a fallback later, never a sync: failures are only logged.
    func keepBase(_ path: String, _ facts: RemoteFacts, bytes: [UInt8]? = nil) {
        guard let bases, facts.kind == .file, rules.needsBase(path), let local = locate(path) else { return }
        if bases.touch(facts.hash) { return }
        guard facts.size <= bases.limit else { return }
        do {
            if let bytes {
                try bases.put(bytes, sha256: facts.hash)
            } else {
                let content = try ContentReader.read(safeRoots[local.root.index], local.relative, keepBytes: true)
                guard content.sha256 == facts.hash, !content.unstable, let read = content.bytes else { return }
                try bases.put(read, sha256: facts.hash)
            }
        } catch {
            logger.warning("cannot keep the base of \(quoted(path)): \(error)")
        }
    }
}
