import CUV
import Glibc

/// A Unix-domain socket listening on the loop (`uv_pipe_t`), handing out accepted connections.
/// Loop-confined. The libuv handle is freed in its close callback, after `close()` or `deinit`.
public final class LoopPipeListener {
    private let loop: EventLoop
    private let handle: UnsafeMutablePointer<uv_pipe_t>
    private var onConnection: ((Result<LoopPipeConnection, LoopError>) -> Void)?
    private var closed = false

    public init(loop: EventLoop) throws(LoopError) {
        loop.checkIsolated()
        self.loop = loop
        handle = .allocate(capacity: 1)
        let status = uv_pipe_init(loop.raw, handle, 0)
        guard status == 0 else {
            handle.deallocate()
            throw LoopError("uv_pipe_init", code: status)
        }
        handle.pointee.data = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit { close() }

    /// Binds to `path`, which must fit `sun_path` (107 bytes): libuv 1.44 cuts longer names short.
    public func bind(_ path: String) throws(LoopError) {
        guard path.utf8.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path) else {
            throw LoopError("uv_pipe_bind", code: -ENAMETOOLONG)
        }
        let status = uv_pipe_bind(handle, path)
        guard status == 0 else { throw LoopError("uv_pipe_bind", code: status) }
    }

    /// Starts accepting; each connection (or accept failure) reaches `onConnection` on the loop.
    public func listen(backlog: Int32 = 16, _ onConnection: @escaping (Result<LoopPipeConnection, LoopError>) -> Void) throws(LoopError) {
        self.onConnection = onConnection
        let status = uv_listen(stream, backlog) { server, status in
            guard let server, let context = server.pointee.data else { return }
            Unmanaged<LoopPipeListener>.fromOpaque(context).takeUnretainedValue().accept(status)
        }
        guard status == 0 else { throw LoopError("uv_listen", code: status) }
    }

    private var stream: UnsafeMutablePointer<uv_stream_t> {
        UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_stream_t.self)
    }

    private func accept(_ status: Int32) {
        guard status == 0 else {
            onConnection?(.failure(LoopError("uv_listen", code: status)))
            return
        }
        do throws(LoopError) {
            let connection = try LoopPipeConnection(loop: loop)
            let accepted = uv_accept(stream, connection.stream)
            guard accepted == 0 else { throw LoopError("uv_accept", code: accepted) }
            onConnection?(.success(connection))
        } catch {
            onConnection?(.failure(error))
        }
    }

    /// Stops listening and frees the handle (in its close callback). Idempotent.
    public func close() {
        guard !closed else { return }
        closed = true
        onConnection = nil
        handle.pointee.data = nil
        uv_close(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self)) { closed in
            closed?.deallocate()
        }
    }
}

/// One accepted connection of a `LoopPipeListener`: reads as they come, queued writes. Loop-confined.
public final class LoopPipeConnection {
    /// What a read produced.
    public enum ReadEvent {
        case data([UInt8])
        /// The peer closed its side.
        case end
        case failed(LoopError)
    }

    private let handle: UnsafeMutablePointer<uv_pipe_t>
    private var onRead: ((ReadEvent) -> Void)?
    public private(set) var isClosed = false

    init(loop: EventLoop) throws(LoopError) {
        handle = .allocate(capacity: 1)
        let status = uv_pipe_init(loop.raw, handle, 0)
        guard status == 0 else {
            handle.deallocate()
            throw LoopError("uv_pipe_init", code: status)
        }
        handle.pointee.data = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit { close() }

    var stream: UnsafeMutablePointer<uv_stream_t> {
        UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_stream_t.self)
    }

    /// The socket's descriptor (for `SO_PEERCRED`); nil once closed.
    public var fileDescriptor: Int32? {
        guard !isClosed else { return nil }
        var fd: uv_os_fd_t = -1
        let status = uv_fileno(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self), &fd)
        return status == 0 ? fd : nil
    }

    /// Bytes queued for writing that the peer has not taken yet.
    public var pendingWriteBytes: Int { isClosed ? 0 : uv_stream_get_write_queue_size(stream) }

    /// Delivers reads to `onRead` until `close()`, the end of the stream or an error.
    public func startReading(_ onRead: @escaping (ReadEvent) -> Void) {
        guard !isClosed else { return }
        self.onRead = onRead
        // Each read gets a fresh buffer, freed in the read callback: nothing outlives a callback.
        let status = uv_read_start(stream, { _, suggested, buffer in
            guard let buffer else { return }
            let size = min(max(suggested, 4096), 64 * 1024)
            buffer.pointee.base = malloc(size)?.assumingMemoryBound(to: CChar.self)
            buffer.pointee.len = buffer.pointee.base == nil ? 0 : size
        }, { stream, count, buffer in
            defer { free(buffer?.pointee.base) }
            guard let stream, let context = stream.pointee.data else { return }
            let connection = Unmanaged<LoopPipeConnection>.fromOpaque(context).takeUnretainedValue()
            if count > 0, let base = buffer?.pointee.base {
                let bytes = Array(UnsafeRawBufferPointer(start: base, count: count).bindMemory(to: UInt8.self))
                connection.onRead?(.data(bytes))
            } else if count == Int(UV_EOF.rawValue) {
                connection.onRead?(.end)
            } else if count < 0 {
                connection.onRead?(.failed(LoopError("read", code: Int32(count))))
            }
        })
        if status != 0 { onRead(.failed(LoopError("uv_read_start", code: status))) }
    }

    /// Queues `bytes` for writing; a failure shows up as a read error or the peer's end.
    public func write(_ bytes: [UInt8]) {
        guard !isClosed, !bytes.isEmpty else { return }
        // The request and its copy of the bytes live until the write callback frees them, which
        // libuv calls even when the handle is closed first (with UV_ECANCELED).
        let request = UnsafeMutablePointer<uv_write_t>.allocate(capacity: 1)
        let copy = UnsafeMutableRawPointer.allocate(byteCount: bytes.count, alignment: 1)
        bytes.withUnsafeBytes { copy.copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
        request.pointee.data = copy
        var buffer = uv_buf_init(copy.assumingMemoryBound(to: CChar.self), UInt32(bytes.count))
        let status = uv_write(request, stream, &buffer, 1) { request, _ in
            guard let request else { return }
            request.pointee.data?.deallocate()
            request.deallocate()
        }
        if status != 0 {
            copy.deallocate()
            request.deallocate()
        }
    }

    /// Closes the connection; queued writes are dropped. Idempotent.
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        onRead = nil
        handle.pointee.data = nil
        Self.closeHandle(stream)
    }

    /// Closes once the queued writes are out (a last answer before hanging up). Idempotent.
    public func closeAfterWriting() {
        guard !isClosed else { return }
        isClosed = true
        onRead = nil
        handle.pointee.data = nil
        let request = UnsafeMutablePointer<uv_shutdown_t>.allocate(capacity: 1)
        let status = uv_shutdown(request, stream) { request, _ in
            guard let request else { return }
            if let stream = request.pointee.handle { LoopPipeConnection.closeHandle(stream) }
            request.deallocate()
        }
        if status != 0 {
            request.deallocate()
            Self.closeHandle(stream)
        }
    }

    private static func closeHandle(_ stream: UnsafeMutablePointer<uv_stream_t>) {
        uv_close(UnsafeMutableRawPointer(stream).assumingMemoryBound(to: uv_handle_t.self)) { closed in
            closed?.deallocate()
        }
    }
}
