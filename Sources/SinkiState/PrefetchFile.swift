import Glibc
import SinkiRecord
import SinkiSupport
import Synchronization

/// Where fetched chunks go: each is checked against its name before it is written.
public protocol ChunkSink: Sendable {
    /// Writes `bytes` wherever chunk `name` belongs; false when they are not that chunk (nothing written).
    func place(_ bytes: [UInt8], name: String) throws(SystemError) -> Bool
}

extension ChunkAssembler: ChunkSink {}

/// A large file another device is sending now, fetched chunk by chunk as its sender announces them
/// (docs/protocol.md, "Files in flight"), in the state folder (`prefetch/SESSION.part`), before its
/// record exists. When the record comes, the chunks it shares with the announced ones (the same chunk at
/// the same place) are handed to the download of its manifest (`handOver`), which checks them again and
/// fetches only the rest; whatever does not match is never used. Nothing here touches a root.
///
/// Thread-safe: chunks are placed from several threads at once, each at its own offset.
public final class PrefetchFile: ChunkSink {
    public let session: String
    public let path: String
    let partPath: String
    private let part: HeldFile

    private struct Layout {
        var chunks: [ChunkRef] = []
        var offsets: [Int64] = []
        var end: Int64 = 0
        var placed: [Bool] = []
    }

    private let layout = Mutex(Layout())

    /// Makes the partial file of `session` (for record path `path`) in `directory`, empty.
    public init(session: String, path: String, directory: String) throws(SystemError) {
        self.session = session
        self.path = path
        if mkdir(directory, 0o700) != 0 && errno != EEXIST { throw SystemError("mkdir", errno: errno, path: directory) }
        partPath = directory + "/" + session + ".part"
        part = try HeldFile.open(partPath, flags: O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC)
    }

    /// Adds chunks announced from `index` on (what overlaps the chunks known already is skipped); false
    /// when they do not follow on (a gap: the announcement is ignored).
    @discardableResult
    public func extend(from index: Int, with chunks: [ChunkRef]) -> Bool {
        layout.withLock { layout in
            guard index <= layout.chunks.count else { return false }
            for chunk in chunks.dropFirst(layout.chunks.count - index) {
                layout.chunks.append(chunk)
                layout.offsets.append(layout.end)
                layout.placed.append(false)
                layout.end += chunk.size
            }
            return true
        }
    }

    /// Names of chunks announced and not in place yet, in file order, each once.
    public var missing: [String] {
        layout.withLock { layout in
            var seen = Set<String>()
            return layout.chunks.indices.compactMap { index in
                !layout.placed[index] && seen.insert(layout.chunks[index].sha256).inserted ? layout.chunks[index].sha256 : nil
            }
        }
    }

    /// Bytes of the chunks in place, and of the chunks announced.
    public var progress: (done: Int64, announced: Int64) {
        layout.withLock { layout in
            (layout.chunks.indices.reduce(0) { layout.placed[$1] ? $0 + layout.chunks[$1].size : $0 }, layout.end)
        }
    }

    public func place(_ bytes: [UInt8], name: String) throws(SystemError) -> Bool {
        guard Hex.encode(Digest.hash(bytes)) == name else { return false }
        let spots = layout.withLock { layout in
            layout.chunks.indices.filter { layout.chunks[$0].sha256 == name && !layout.placed[$0] && layout.chunks[$0].size == Int64(bytes.count) }
                .map { ($0, layout.offsets[$0]) }
        }
        for (index, offset) in spots {
            try bytes.withUnsafeBytes { buffer in
                Result { () throws(SystemError) in
                    var done = 0
                    while done < buffer.count {
                        done += try syscall("write", path: partPath) {
                            pwrite(part.raw, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
                        }
                    }
                }
            }.get()
            layout.withLock { $0.placed[index] = true }
        }
        return true
    }

    /// Hands what is in place to the download of manifest `id` (`chunks`) in `directory`: the partial
    /// file becomes `ID.part`, and the chunks it holds at the places the manifest has them (the common
    /// beginning of both lists) are marked in `ID.have`, as an earlier run of that download would have
    /// left them; `ChunkAssembler` reads them back and checks them. Nothing is handed over when that
    /// download exists already or nothing matches; the caller discards the file then. Returns the bytes
    /// handed over.
    public func handOver(to chunks: [ChunkRef], id: String, directory: String) throws(SystemError) -> Int64 {
        let (marks, bytes) = layout.withLock { layout -> ([UInt8], Int64) in
            var marks: [UInt8] = []
            var bytes: Int64 = 0
            for index in 0..<min(layout.chunks.count, chunks.count) {
                guard layout.chunks[index] == chunks[index] else { break }
                marks.append(layout.placed[index] ? 1 : 0)
                if layout.placed[index] { bytes += chunks[index].size }
            }
            return (marks, bytes)
        }
        guard bytes > 0 else { return 0 }
        let target = directory + "/" + id + ".part", havePath = directory + "/" + id + ".have"
        if mkdir(directory, 0o700) != 0 && errno != EEXIST { throw SystemError("mkdir", errno: errno, path: directory) }
        guard access(target, F_OK) != 0 else { return 0 }
        let have = try FileDescriptor.open(havePath, flags: O_WRONLY | O_CREAT | O_TRUNC, mode: 0o600)
        try marks.withUnsafeBytes { buffer in
            Result { () throws(SystemError) in _ = try syscall("write", path: havePath) { pwrite(have.raw, buffer.baseAddress!, buffer.count, 0) } }
        }.get()
        try syscall("rename", path: partPath) { rename(partPath, target) }
        return bytes
    }

    /// Removes the partial file (its session ended without a record to hand it to, say).
    public func discard() {
        unlink(partPath)
    }

    /// Removes every partial file in `directory`: what an earlier run fetched ahead is not kept.
    public static func clear(_ directory: String) {
        guard let dir = opendir(directory) else { return }
        defer { closedir(dir) }
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
            if name.hasSuffix(".part") { unlink(directory + "/" + name) }
        }
    }
}
