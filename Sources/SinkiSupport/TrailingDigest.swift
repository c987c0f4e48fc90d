import Dispatch
import Glibc
import Synchronization

/// A hash of a file being written, computed beside the writer: the writer says how far the file holds
/// the bytes (`advance`); this reads them back from the page cache on its own queue and hashes them.
/// The writer never waits for it until it needs the digest, so bytes are taken as fast as the socket
/// and the disk allow whenever a core is free.
///
/// Used by the server for an upload's SHA-256 (across its chunks) and for one chunk's
/// `Upload-Checksum`, and by the agent for a download's SHA-256.
// @unchecked: the properties below `shared` are touched only on the serial `queue` (by `drain` blocks,
// and by `rollBack`, `wait` and `finish` through `sync`); what the writer's thread says goes through
// the `shared` lock.
public final class TrailingDigest: @unchecked Sendable {
    /// What the writer has said, read by the queue.
    private struct Shared {
        /// The file holds the bytes to hash up to here.
        var reported: Int64
        /// A `drain` block is queued or running.
        var scheduled = false
        /// Where the queue stood when it last ran out of bytes: it is woken again once a step more arrived.
        var idleAt: Int64
        /// A mark asked for and not yet taken up by the queue.
        var markRequest: Int64?
    }

    private let queue = DispatchQueue(label: "sinki.trailing-digest", qos: .userInitiated)
    private let path: String
    private let shared: Mutex<Shared>
    private var digest: Digest
    /// Bytes `start..<position` are in `digest`.
    private var position: Int64
    private var failure: SystemError?
    /// Start write-back of what was hashed, from here on: for a file synced once whole, the disk starts early.
    private var writebackFrom: Int64?
    /// The file and a read buffer, held while a request writes the file (see `release`).
    private var file: FileDescriptor?
    private var buffer: UnsafeMutableRawBufferPointer?
    /// Where to keep a copy of the digest, for `rollBack`, and the copy once taken.
    private var markAt: Int64?
    private var marked: (position: Int64, digest: Digest)?
    /// Bytes read back per read, and the bytes that must arrive before an idle queue is woken: a writer's
    /// buffers are smaller, and one wake-up per write would cost more than the hashing.
    private static let step = 1 << 20
    private static let writebackStep: Int64 = 8 << 20

    /// Hashes `path` from `start` with `algorithm`, as `advance` reports bytes written.
    public init(path: String, from start: Int64, algorithm: Digest.Algorithm, startsWriteback: Bool = false) {
        self.path = path
        digest = Digest(algorithm)
        position = start
        shared = Mutex(Shared(reported: start, idleAt: start))
        writebackFrom = startsWriteback ? start : nil
    }

    deinit { buffer?.deallocate() }

    /// The file holds the bytes to hash up to `end` now.
    public func advance(to end: Int64) {
        let wake = shared.withLock { state -> Bool in
            state.reported = max(state.reported, end)
            guard !state.scheduled, state.reported - state.idleAt >= Self.step else { return false }
            state.scheduled = true
            return true
        }
        if wake { queue.async { [self] in drain() } }
    }

    /// Keeps a copy of the digest as it stands at `offset` (where a chunk that may be taken back starts).
    /// Called before any byte past `offset` is reported.
    public func mark(at offset: Int64) {
        shared.withLock { $0.markRequest = offset }
    }

    /// The bytes from `offset` on are being taken back: forget them. False when the digest cannot go back
    /// there (no mark at `offset`); the caller drops this hasher then.
    public func rollBack(to offset: Int64) -> Bool {
        queue.sync {
            takeMarkRequest()
            markAt = nil
            defer {
                shared.withLock { state in
                    state.reported = min(state.reported, offset)
                    state.idleAt = position
                }
            }
            if position <= offset { return failure == nil }
            guard let marked, marked.position == offset else { return false }
            digest = marked.digest
            position = offset
            writebackFrom = writebackFrom.map { min($0, offset) }
            failure = nil
            return true
        }
    }

    /// Waits until every byte up to `end` is hashed.
    public func wait(upTo end: Int64) throws(SystemError) {
        let failed: SystemError? = queue.sync {
            catchUpNow(to: end)
            return failure
        }
        if let failed { throw failed }
    }

    /// Waits until every byte up to `end` is hashed; the digest.
    public func finish(at end: Int64) throws(SystemError) -> [UInt8] {
        let result: Result<[UInt8], SystemError> = queue.sync {
            catchUpNow(to: end)
            if let failure { return .failure(failure) }
            if let from = writebackFrom, let file { file.startWriteback(from, position - from) }
            return .success(digest.finish())
        }
        return try result.get()
    }

    /// Stops hashing and returns once the queue is idle: for a transfer that ends without its digest
    /// (cut off, cancelled), so nothing reads the file or hashes behind the caller's back, down to the
    /// process's exit (a drain still running there aborted an agent stopped mid-download).
    public func abandon() {
        queue.sync {
            if failure == nil { failure = SystemError("hash", errno: ECANCELED, path: path) }
            file = nil
            buffer?.deallocate()
            buffer = nil
        }
    }

    /// Closes the file and frees the buffer once the queued work is done; the next `advance` takes them
    /// again. Called when a request ends, so an upload that waits for its next chunk holds neither.
    public func release() {
        queue.async { [self] in
            file = nil
            buffer?.deallocate()
            buffer = nil
        }
    }

    // MARK: On the queue

    /// Hashes what the writer reports until it has caught up, then goes idle.
    private func drain() {
        while true {
            takeMarkRequest()
            let end = shared.withLock { state -> Int64? in
                guard failure == nil, state.reported > position else {
                    state.scheduled = false
                    state.idleAt = position
                    return nil
                }
                return state.reported
            }
            guard let end else { return }
            catchUp(to: end)
        }
    }

    private func catchUpNow(to end: Int64) {
        takeMarkRequest()
        catchUp(to: end)
        shared.withLock { $0.idleAt = max($0.idleAt, position) }
    }

    private func takeMarkRequest() {
        guard let offset = shared.withLock({ state -> Int64? in
            defer { state.markRequest = nil }
            return state.markRequest
        }) else { return }
        marked = nil
        markAt = offset
        takeMark()
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
                if let from = writebackFrom, position - from >= Self.writebackStep {
                    file.startWriteback(from, position - from)
                    writebackFrom = position
                }
            }
        } catch {
            failure = error
        }
    }
}
