import Glibc
import SinkiLoop
import SinkiRecord
import SinkiSupport
import Synchronization

/// A local file holding chunks a new version needs, opened below its root: the file's content is the
/// manifest `manifest`, as long as it still is what the database says (`expect`).
public struct ChunkSource: Sendable {
    public var file: HeldFile
    public var expect: FileStat
}

/// Builds a large file's new version from its manifest, in the state folder's download file
/// (`downloads/ID.part`), from chunks already on this machine (its old version, a copy, a renamed
/// file) and chunks downloaded: every chunk is checked against its SHA-256 before it is written, so a
/// bad chunk, local or remote, is never used. Which chunks are in place is kept beside it
/// (`ID.have`, a byte per chunk), so a run cut off by a kill goes on where it stopped; those chunks are
/// read and checked again first, since the kill may have lost what the page cache held.
///
/// Thread-safe: chunks are placed from several threads at once, each at its own offset.
public final class ChunkAssembler: Sendable {
    public let chunks: [ChunkRef]
    /// Where each chunk starts in the file.
    public let offsets: [Int64]
    public let size: Int64
    let partPath: String
    let havePath: String
    let finalPath: String
    private let part: HeldFile
    private let have: HeldFile
    private let placed: Mutex<[Bool]>

    /// Opens (creating if need be) the download file for manifest `id` in `directory`.
    public init(id: String, chunks: [ChunkRef], directory: String) throws(SystemError) {
        self.chunks = chunks
        var offsets: [Int64] = []
        offsets.reserveCapacity(chunks.count)
        var position: Int64 = 0
        for chunk in chunks {
            offsets.append(position)
            position += chunk.size
        }
        self.offsets = offsets
        size = position
        partPath = directory + "/" + id + ".part"
        havePath = directory + "/" + id + ".have"
        finalPath = directory + "/" + id
        part = try HeldFile.open(partPath, flags: O_RDWR | O_CREAT | O_CLOEXEC)
        let marksFile = try HeldFile.open(havePath, flags: O_RDWR | O_CREAT | O_CLOEXEC)
        have = marksFile
        var marks = [Bool](repeating: false, count: chunks.count)
        var saved = [UInt8](repeating: 0, count: chunks.count)
        let got = try saved.withUnsafeMutableBytes { buffer in Result { () throws(SystemError) in try marksFile.read(into: buffer, at: 0) } }.get()
        for (index, byte) in saved.prefix(got).enumerated() where byte == 1 { marks[index] = true }
        placed = Mutex(marks)
    }

    /// Indexes of the chunks not in place yet.
    public var missing: [Int] { placed.withLock { marks in marks.indices.filter { !marks[$0] } } }

    /// Bytes of the chunks in place.
    public var bytesInPlace: Int64 {
        placed.withLock { marks in marks.indices.reduce(0) { marks[$1] ? $0 + chunks[$1].size : $0 } }
    }

    /// Checks again the chunks an earlier run marked in place (by reading them back); those that do
    /// not hash to their names are to be placed again. Returns how many were kept.
    @discardableResult
    public func recheck() -> Int {
        let marked = placed.withLock { marks in marks.indices.filter { marks[$0] } }
        let good = Blocking.map(marked) { index in
            var bytes = [UInt8](repeating: 0, count: Int(chunks[index].size))
            let got = bytes.withUnsafeMutableBytes { buffer in (try? part.read(into: buffer, at: offsets[index])) ?? -1 }
            return got == bytes.count && Hex.encode(Digest.hash(bytes)) == chunks[index].sha256
        }
        var kept = 0
        for (index, ok) in zip(marked, good) {
            if ok { kept += 1 } else { unmark(index) }
        }
        return kept
    }

    /// Copies what `sources` hold of the missing chunks (`places`: chunk name → source index and
    /// offset there), each checked; returns the bytes placed so. A source that changed since the
    /// database saw it is not used.
    public func copyLocal(from sources: [ChunkSource], places: [String: (source: Int, offset: Int64)]) -> Int64 {
        let usable = sources.map { source in (try? source.file.stat()).map { Self.same($0, source.expect) } ?? false }
        let todo = missing.filter { places[chunks[$0].sha256].map { usable[$0.source] } ?? false }
        let copied: [Int64] = Blocking.map(todo) { index in
            guard let spot = places[chunks[index].sha256] else { return 0 }
            let file = sources[spot.source].file
            let length = Int(chunks[index].size)
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: length, alignment: 64)
            defer { buffer.deallocate() }
            guard let got = try? file.read(into: buffer, at: spot.offset), got == length,
                  (try? place(index, UnsafeRawBufferPointer(buffer))) == true else { return 0 }
            return Int64(length)
        }
        return copied.reduce(0, +)
    }

    /// Checks `bytes` against chunk `index` and writes them in place; false when they do not hash to
    /// its name (nothing is written then).
    public func place(_ index: Int, _ bytes: UnsafeRawBufferPointer) throws(SystemError) -> Bool {
        guard bytes.count == Int(chunks[index].size), Hex.encode(Digest.hash(bytes)) == chunks[index].sha256 else { return false }
        var done = 0
        while done < bytes.count {
            let wrote = try syscall("write", path: partPath) {
                pwrite(part.raw, bytes.baseAddress! + done, bytes.count - done, off_t(offsets[index]) + off_t(done))
            }
            done += wrote
        }
        mark(index)
        return true
    }

    /// Places `bytes` at every index whose chunk they are (a chunk may recur in one file); false when
    /// they are not that chunk.
    public func place(_ bytes: [UInt8], name: String) throws(SystemError) -> Bool {
        let indexes = missing.filter { chunks[$0].sha256 == name }
        for index in indexes {
            let ok = try bytes.withUnsafeBytes { buffer in Result { () throws(SystemError) in try place(index, buffer) } }.get()
            if !ok { return false }
        }
        return true
    }

    /// Every chunk is in place: the file is cut to its size and becomes the checked download the
    /// apply uses (`downloads/ID`); the marks go.
    public func finish() throws(SystemError) {
        precondition(missing.isEmpty, "bug: finishing a download with chunks missing")
        try syscall("ftruncate", path: partPath) { ftruncate(part.raw, off_t(size)) }
        try syscall("rename", path: partPath) { rename(partPath, finalPath) }
        unlink(havePath)
    }

    /// Forgets the download (its record lost to a newer one, say).
    public func discard() {
        unlink(partPath)
        unlink(havePath)
    }

    private func mark(_ index: Int) {
        placed.withLock { $0[index] = true }
        var one: UInt8 = 1
        _ = pwrite(have.raw, &one, 1, off_t(index))
    }

    private func unmark(_ index: Int) {
        placed.withLock { $0[index] = false }
        var zero: UInt8 = 0
        _ = pwrite(have.raw, &zero, 1, off_t(index))
    }

    /// Whether a source is still the file it was (a rename moves ctime, so only content facts count).
    private static func same(_ now: FileStat, _ expect: FileStat) -> Bool {
        now.size == expect.size && now.mtime == expect.mtime && now.inode == expect.inode
    }
}
