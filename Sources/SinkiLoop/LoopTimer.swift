import CUV

/// A one-shot or repeating timer on the loop. Loop-confined: create, start, stop and drop it on the
/// loop thread. The libuv handle is freed in its close callback, after `deinit` asks for the close.
public final class LoopTimer {
    private let handle: UnsafeMutablePointer<uv_timer_t>
    private var callback: (() -> Void)?

    public init(loop: EventLoop) {
        loop.checkIsolated()
        handle = .allocate(capacity: 1)
        uv_timer_init(loop.raw, handle)
        handle.pointee.data = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit {
        handle.pointee.data = nil
        uv_close(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self)) { closed in
            closed?.deallocate()
        }
    }

    /// Fires `callback` after `milliseconds` (then every `repeat` ms when that is not 0).
    public func start(after milliseconds: UInt64, repeat interval: UInt64 = 0, _ callback: @escaping () -> Void) {
        self.callback = callback
        uv_timer_start(handle, { raw in
            guard let raw, let context = raw.pointee.data else { return }
            let timer = Unmanaged<LoopTimer>.fromOpaque(context).takeUnretainedValue()
            timer.callback?()
        }, milliseconds, interval)
    }

    public func stop() {
        uv_timer_stop(handle)
        callback = nil
    }

    public var isActive: Bool {
        uv_is_active(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self)) != 0
    }
}
