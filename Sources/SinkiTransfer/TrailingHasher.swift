import Dispatch
import Glibc
import SinkiLoop
import SinkiSupport
import Synchronization

/// Hashes a file while a download appends to it: a thread of the pool reads what has been written
/// (from the page cache, just after the loop wrote it) and feeds the digest, so the loop that writes
/// never hashes, and the hash is ready about when the last byte lands.
final class TrailingHasher: Sendable {
    private struct Progress {
        /// Bytes known to be in the file from the start: the hasher may read up to here.
        var written: Int64
        var finished = false
        /// Where the hasher stopped to wait for more, when it waits.
        var waitingAt: Int64?
    }

    let digest: SendableDigest
    private let path: String
    private let start: Int64
    private let progress: Mutex<Progress>
    private let wake = DispatchSemaphore(value: 0)

    /// Hashes `path` from `start` (the digest holds everything before it) as `advance` reports bytes.
    init(path: String, digest: SendableDigest, from start: Int64) {
        self.path = path
        self.digest = digest
        self.start = start
        progress = Mutex(Progress(written: start))
    }

    /// The file holds bytes up to `end` now (on the loop, after each write).
    func advance(to end: Int64) {
        let wakeUp = progress.withLock { state -> Bool in
            state.written = max(state.written, end)
            // One wake-up per megabyte that arrived, not one per write.
            guard let since = state.waitingAt, state.written - since >= 1 << 20 else { return false }
            state.waitingAt = nil
            return true
        }
        if wakeUp { wake.signal() }
    }

    /// No more bytes will come; the file ends at `end`. Always called, so the hasher's thread returns.
    func finish(at end: Int64) {
        let wakeUp = progress.withLock { state -> Bool in
            state.written = end
            state.finished = true
            defer { state.waitingAt = nil }
            return state.waitingAt != nil
        }
        if wakeUp { wake.signal() }
    }

    /// Runs on the thread pool until `finish`, then returns how far it hashed (the file's end).
    func run() async throws -> Int64 {
        try await Blocking.run { [self] in try follow() }
    }

    private func follow() throws -> Int64 {
        let file = try FileDescriptor.open(path, flags: O_RDONLY)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4 << 20, alignment: 16)
        defer { buffer.deallocate() }
        var position = start
        while true {
            let (written, finished) = progress.withLock { state -> (Int64, Bool) in
                if state.written <= position && !state.finished { state.waitingAt = position }
                return (state.written, state.finished)
            }
            if position >= written {
                if finished { return position }
                wake.wait()
                continue
            }
            let want = Int(min(Int64(buffer.count), written - position))
            let got = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]), at: position)
            // Shorter than reported: the file was cut back (a download that starts over); what is
            // there is checked against the expected hash at the end anyway.
            if got == 0 { return position }
            digest.update(UnsafeRawBufferPointer(rebasing: buffer[0..<got]))
            // The file is synced before its record is committed: what is hashed can start for the disk.
            file.startWriteback(position, Int64(got))
            position += Int64(got)
        }
    }
}
