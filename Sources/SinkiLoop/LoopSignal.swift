import CUV
import Glibc

/// Delivers a Unix signal on the loop thread instead of in a signal handler. Loop-confined.
///
/// The agent's process starts with its signals blocked (`SinkidCommand`), so that one sent before
/// anything watches it waits instead of killing the process with the default action: watching a
/// signal unblocks it on the loop thread, and a signal that came early is delivered then.
public final class LoopSignal {
    private let handle: UnsafeMutablePointer<uv_signal_t>
    private var callback: (() -> Void)?

    public init(loop: EventLoop, signal: Int32, _ callback: @escaping () -> Void) {
        loop.checkIsolated()
        handle = .allocate(capacity: 1)
        uv_signal_init(loop.raw, handle)
        handle.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        self.callback = callback
        uv_signal_start(handle, { raw, _ in
            guard let raw, let context = raw.pointee.data else { return }
            Unmanaged<LoopSignal>.fromOpaque(context).takeUnretainedValue().callback?()
        }, signal)
        var mask = sigset_t()
        sigemptyset(&mask)
        sigaddset(&mask, signal)
        pthread_sigmask(SIG_UNBLOCK, &mask, nil)
        // A pending signal watcher must not keep the loop alive by itself.
        uv_unref(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self))
    }

    deinit {
        handle.pointee.data = nil
        uv_close(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self)) { closed in
            closed?.deallocate()
        }
    }
}
