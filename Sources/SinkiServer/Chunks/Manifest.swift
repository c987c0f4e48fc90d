import Glibc
import SinkiRecord
import SinkiSupport

extension Asset {
    /// The manifest as the stores keep it (`ManifestCoding`, 36 bytes a chunk); nil for an upload asset.
    var storedChunks: [UInt8]? { chunks.map { ManifestCoding.encode($0.map { ($0.sha256, $0.size) }) } }

    /// A stored manifest read back; the record's path names it in the error when the bytes are not one.
    static func chunks(stored: [UInt8], path: String) throws(RecordStoreError) -> [ChunkRef] {
        guard let entries = ManifestCoding.decode(stored) else {
            throw RecordStoreError(path: "records", message: "the manifest stored for \(quoted(path)) is \(stored.count) bytes, not whole 36-byte entries")
        }
        return entries.map { ChunkRef(sha256: $0.sha256, size: $0.size) }
    }
}

extension ExtendedAttributes {
    /// The set as the stores keep it (`encoded`); nil for none.
    var stored: [UInt8]? { isEmpty ? nil : encoded }

    /// A stored set read back; the record's path names it in the error when the bytes are not one.
    init(stored: [UInt8]?, path: String) throws(RecordStoreError) {
        guard let stored else {
            self = .none
            return
        }
        guard let set = ExtendedAttributes(encoded: stored) else {
            throw RecordStoreError(path: "records", message: "the extended attributes stored for \(quoted(path)) are no encoded set")
        }
        self = set
    }
}

extension Record {
    /// What the record weighs in a page beyond its fixed fields: its inline data or its manifest, so
    /// that a page of large files' manifests stops growing like one of inline content.
    var pageBytes: Int { (data?.count ?? 0) + (asset?.chunks?.count ?? 0) * ManifestCoding.entryBytes + xattrs.totalBytes }
}

/// A manifest asset's bytes from `first` on, read from the packs (or files) holding its chunks, in
/// order, as libmicrohttpd sends them: one file open at a time, nothing assembled. A chunk that is gone
/// or of another size than the manifest says ends the answer mid-body (the client asks again, by Range).
final class ManifestReader: ContentSource {
    private let chunks: ChunkStore
    private let user: String
    private let manifest: [ChunkRef]
    /// Where each chunk was when the answer began (looked up again if it moved since).
    private var entries: [ChunkIndex.Entry]
    /// Where each chunk starts in the file.
    private let starts: [Int64]
    private let first: Int64
    /// The file of the chunk being read, and the place of its bytes.
    private var open: (index: Int, file: FileDescriptor, at: Int64)?

    init(chunks: ChunkStore, user: String, manifest: [ChunkRef], entries: [ChunkIndex.Entry], from first: Int64) {
        precondition(entries.count == manifest.count, "bug: a manifest reader without an entry per chunk")
        self.chunks = chunks
        self.user = user
        self.manifest = manifest
        self.entries = entries
        var starts: [Int64] = []
        starts.reserveCapacity(manifest.count)
        var offset: Int64 = 0
        for chunk in manifest {
            starts.append(offset)
            offset += chunk.size
        }
        self.starts = starts
        self.first = first
    }

    /// The chunk holding byte `position` of the file (the last one whose start is at or before it).
    private func index(of position: Int64) -> Int {
        if let open, starts[open.index] <= position, position < starts[open.index] + manifest[open.index].size { return open.index }
        var low = 0, high = starts.count - 1
        while low < high {
            let middle = (low + high + 1) / 2
            if starts[middle] <= position { low = middle } else { high = middle - 1 }
        }
        return low
    }

    func read(at offset: Int64, into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        let position = first + offset
        let index = index(of: position)
        let chunk = manifest[index]
        if open?.index != index {
            open = nil
            guard let opened = try chunks.open(user: user, chunk: chunk.sha256, entry: entries[index]) else {
                throw SystemError("open", errno: ENOENT, path: "chunk \(chunk.sha256) of \(quoted(user))")
            }
            guard opened.entry.size == chunk.size else {
                throw SystemError("read", errno: EIO, path: "chunk \(chunk.sha256): \(opened.entry.size) bytes, the manifest says \(chunk.size)")
            }
            entries[index] = opened.entry
            open = (index, opened.file, opened.entry.offset)
        }
        let within = position - starts[index]
        let want = Int(min(Int64(buffer.count), chunk.size - within))
        let got = try open!.file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]), at: open!.at + within)
        guard got == want else { throw SystemError("read", errno: EIO, path: "\(open!.file.path): short at \(open!.at + within)") }
        return got
    }
}
