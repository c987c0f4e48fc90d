import CUV
import Glibc
import Synchronization

/// A libuv loop that is also a Swift serial executor, so an actor can run on it (design: one event
/// loop per agent owns the watcher, curl, timers and the control socket).
///
/// libuv handles are only touched on the loop's thread; other threads reach the loop through
/// `enqueue`/`execute`, which queue work under a mutex and wake the loop with `uv_async_send`.
// @unchecked: all libuv state is confined to the loop thread (checked by `checkIsolated`); the only
// members touched from other threads are the Mutex-guarded queue and the thread-safe uv_async handle.
public final class EventLoop: SerialExecutor, @unchecked Sendable {
    let raw: UnsafeMutablePointer<uv_loop_t>
    private let wakeup: UnsafeMutablePointer<uv_async_t>
    private let pending = Mutex<Pending>(Pending())
    private let owner = Mutex<pthread_t?>(nil)

    private struct Pending {
        var jobs: [UnownedJob] = []
        var closures: [@Sendable () -> Void] = []
        var stopRequested = false
        /// `run()` has returned, or is closing the loop: its wake-up fd is about to go or gone.
        var closed = false
    }

    public init() {
        raw = .allocate(capacity: 1)
        let status = uv_loop_init(raw)
        precondition(status == 0, "bug: uv_loop_init failed: \(String(cString: uv_strerror(status)))")
        wakeup = .allocate(capacity: 1)
        uv_async_init(raw, wakeup) { handle in
            guard let handle, let context = handle.pointee.data else { return }
            Unmanaged<EventLoop>.fromOpaque(context).takeUnretainedValue().drain()
        }
        wakeup.pointee.data = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit {
        raw.deallocate()
        wakeup.deallocate()
    }

    /// The raw loop, for handle wrappers in other modules.
    public var uvLoop: UnsafeMutablePointer<uv_loop_t> { raw }

    /// Whether the caller runs on this loop's thread.
    public var inLoop: Bool {
        owner.withLock { thread in thread.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        wake { $0.jobs.append(unowned) }
    }

    /// Queues work and wakes the loop, unless it has closed: a task that was not awaited before the
    /// loop stopped (its work on another thread ends while the process exits) may still hop back here,
    /// and waking a closed loop writes to a closed fd, which libuv answers with abort(). Such a task is
    /// never resumed: the process is on its way out. Sent under the lock, so `run()` cannot close the
    /// loop between the check and the send.
    private func wake(_ queue: (inout Pending) -> Void) {
        pending.withLock { state in
            guard !state.closed else { return }
            queue(&state)
            uv_async_send(wakeup)
        }
    }

    public func checkIsolated() {
        precondition(inLoop, "bug: expected to run on the event loop thread")
    }

    /// Runs `body` on the loop thread soon; callable from any thread.
    public func execute(_ body: @escaping @Sendable () -> Void) {
        wake { $0.closures.append(body) }
    }

    private func drain() {
        while true {
            let batch = pending.withLock { state -> Pending in
                let taken = state
                state.jobs.removeAll(keepingCapacity: true)
                state.closures.removeAll(keepingCapacity: true)
                return taken
            }
            if batch.stopRequested {
                uv_stop(raw)
                return
            }
            if batch.jobs.isEmpty && batch.closures.isEmpty { return }
            let executor = asUnownedSerialExecutor()
            for job in batch.jobs { job.runSynchronously(on: executor) }
            for closure in batch.closures { closure() }
        }
    }

    /// Claims the calling thread as the loop's before `run`, so code on it can check isolation.
    public func markOwner() { owner.withLock { $0 = pthread_self() } }

    /// Runs the loop on the calling thread until `stop()` (the wake-up handle keeps it alive while
    /// idle); then closes every handle still open and frees them.
    public func run() {
        owner.withLock { $0 = pthread_self() }
        uv_run(raw, UV_RUN_DEFAULT)
        pending.withLock { $0.closed = true }
        // Close what is left so that close callbacks free handle memory, then finish the loop.
        uv_walk(raw, { handle, _ in
            guard let handle, uv_is_closing(handle) == 0 else { return }
            uv_close(handle, nil)
        }, nil)
        uv_run(raw, UV_RUN_DEFAULT)
        uv_loop_close(raw)
        owner.withLock { $0 = nil }
    }

    /// Makes `run()` return after the current callbacks; callable from any thread.
    public func stop() {
        wake { $0.stopRequested = true }
    }
}

/// A libuv error code with the call that returned it.
public struct LoopError: Error, Sendable, CustomStringConvertible {
    public var call: String
    public var code: Int32
    public init(_ call: String, code: Int32) {
        self.call = call
        self.code = code
    }
    public var description: String { "\(call): \(String(cString: uv_strerror(code)))" }
}
