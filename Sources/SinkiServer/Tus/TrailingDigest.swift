import Dispatch
import Glibc
import SinkiSupport

/// A hash of a file being written, computed beside the writer: the request's thread writes the bytes
/// and says how far the file holds them (`advance`); this reads them back from the page cache on its
/// own queue and hashes them. The writer never waits for it until it needs the digest, so a request
/// is received as fast as the socket and the disk allow whenever a core is free.
///
/// Used for an upload's SHA-256 (across its chunks) and for one chunk's `Upload-Checksum`.
// @unchecked: every stored property but `queue` and `path` is touched only by blocks on the serial
// `queue` (`advance` and `mark` add blocks; `rollBack` and `finish` run one with `sync`).
final class TrailingDigest: @unchecked Sendable {
    private let queue = DispatchQueue(label: "sinki.tus.hash", qos: .userInitiated)
    private let path: String
    private var digest: Digest
    /// Bytes `start..<position` are in `digest`.
    private var position: Int64
    private var failure: SystemError?
    /// The file and a read buffer, held while a request writes the file (see `release`).
    private var file: FileDescriptor?
    private var buffer: UnsafeMutableRawBufferPointer?
    /// Where to keep a copy of the digest, for `rollBack`, and the copy once taken.
    private var markAt: Int64?
    private var marked: (position: Int64, digest: Digest)?
    /// Bytes read back per step: the request's buffers are smaller, so one read takes what arrived meanwhile.
    private static let step = 1 << 20

    /// Hashes `path` from `start` with `algorithm`, as `advance` reports bytes written.
    init(path: String, from start: Int64, algorithm: Digest.Algorithm) {
        self.path = path
        digest = Digest(algorithm)
        position = start
    }

    deinit { buffer?.deallocate() }

    /// The file holds the bytes to hash up to `end` now.
    func advance(to end: Int64) {
        queue.async { [self] in catchUp(to: end) }
    }

    /// Keeps a copy of the digest as it stands at `offset` (where a chunk that may be taken back starts).
    func mark(at offset: Int64) {
        queue.async { [self] in
            marked = nil
            markAt = offset
            takeMark()
        }
    }

    /// The bytes from `offset` on are being taken back: forget them. False when the digest cannot go back
    /// there (no mark at `offset`); the caller drops this hasher then.
    func rollBack(to offset: Int64) -> Bool {
        queue.sync {
            markAt = nil
            if position <= offset { return failure == nil }
            guard let marked, marked.position == offset else { return false }
            digest = marked.digest
            position = offset
            failure = nil
            return true
        }
    }

    /// Waits until every byte up to `end` is hashed; the digest.
    func finish(at end: Int64) throws(SystemError) -> [UInt8] {
        let result: Result<[UInt8], SystemError> = queue.sync {
            catchUp(to: end)
            if let failure { return .failure(failure) }
            return .success(digest.finish())
        }
        return try result.get()
    }

    /// Closes the file and frees the buffer once the queued work is done; the next `advance` takes them
    /// again. Called when a request ends, so an upload that waits for its next chunk holds neither.
    func release() {
        queue.async { [self] in
            file = nil
            buffer?.deallocate()
            buffer = nil
        }
    }

    private func takeMark() {
        guard let markAt, position == markAt else { return }
        marked = (markAt, digest.copy())
        self.markAt = nil
    }

    private func catchUp(to end: Int64) {
        guard failure == nil, end > position else { return }
        do throws(SystemError) {
            if self.file == nil { self.file = try FileDescriptor.open(path, flags: O_RDONLY) }
            if self.buffer == nil { self.buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.step, alignment: 16) }
            guard let file = self.file, let buffer = self.buffer else { return }
            while position < end {
                // Stop at the mark, so the copy holds exactly the bytes before it.
                let stop = markAt.map { $0 > position && $0 < end ? $0 : end } ?? end
                let want = Int(min(Int64(Self.step), stop - position))
                let got = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]), at: position)
                guard got == want else { throw SystemError("read", errno: EIO, path: "\(path): \(got) of \(want) bytes at \(position)") }
                digest.update(UnsafeRawBufferPointer(rebasing: buffer[0..<got]))
                position += Int64(got)
                takeMark()
            }
        } catch {
            failure = error
        }
    }
}
