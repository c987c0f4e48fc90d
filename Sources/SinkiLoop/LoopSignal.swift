import CUV

/// Delivers a Unix signal on the loop thread instead of in a signal handler. Loop-confined.
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
