import CUV

/// Watches a file descriptor for readiness on the loop (inotify, curl's sockets). Loop-confined.
public final class LoopPoll {
    /// Readiness bits passed to the callback.
    public struct Events: OptionSet, Sendable {
        public let rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }
        public static let readable = Events(rawValue: Int32(UV_READABLE.rawValue))
        public static let writable = Events(rawValue: Int32(UV_WRITABLE.rawValue))
    }

    private let handle: UnsafeMutablePointer<uv_poll_t>
    private var callback: ((Int32, Events) -> Void)?
    public let fd: Int32

    public init(loop: EventLoop, fd: Int32) throws(LoopError) {
        loop.checkIsolated()
        self.fd = fd
        handle = .allocate(capacity: 1)
        let status = uv_poll_init(loop.raw, handle, fd)
        guard status == 0 else {
            handle.deallocate()
            throw LoopError("uv_poll_init", code: status)
        }
        handle.pointee.data = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit {
        handle.pointee.data = nil
        uv_close(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self)) { closed in
            closed?.deallocate()
        }
    }

    /// Calls `callback(status, events)` whenever `events` are ready; status < 0 is a libuv error.
    public func start(_ events: Events, _ callback: @escaping (Int32, Events) -> Void) {
        self.callback = callback
        uv_poll_start(handle, events.rawValue, { raw, status, ready in
            guard let raw, let context = raw.pointee.data else { return }
            let poll = Unmanaged<LoopPoll>.fromOpaque(context).takeUnretainedValue()
            poll.callback?(status, Events(rawValue: ready))
        })
    }

    public func stop() {
        uv_poll_stop(handle)
    }
}
