import CCurl
import CCurlShim
import SinkiLoop
import SinkiSupport

/// libcurl's multi handle, driven by the agent's libuv loop. Loop-confined and not Sendable.
///
/// libcurl says which sockets to watch (`CURLMOPT_SOCKETFUNCTION`: one `LoopPoll` per socket, freed on
/// `CURL_POLL_REMOVE`) and when it next needs a call without socket activity
/// (`CURLMOPT_TIMERFUNCTION`: one one-shot `LoopTimer`, dropped when libcurl says -1 or when it fired
/// and libcurl did not ask again). Readiness and timeouts
/// go back to libcurl through `curl_multi_socket_action`, after which finished transfers are collected
/// from `curl_multi_info_read`. With nothing in flight libcurl asks for no socket and no timer, so the
/// loop holds no handle for curl at all: idle costs no wake-up. Connections that finished cleanly stay
/// in the multi handle's cache, unwatched, for the next request to the same host.
final class MultiHandle {
    let raw: UnsafeMutableRawPointer
    private let loop: EventLoop
    private let logger: Logger
    /// Transfers added to libcurl, by easy handle; the strong reference that keeps each alive while
    /// libcurl may call back into it.
    private var transfers: [UnsafeMutableRawPointer: EasyHandle] = [:]
    private var polls: [curl_socket_t: LoopPoll] = [:]
    private var timer: LoopTimer?

    init(loop: EventLoop, logger: Logger) {
        precondition(Self.curlReady, "bug: curl_global_init failed")
        guard let raw = curl_multi_init() else { fatalError("bug: curl_multi_init failed (out of memory)") }
        self.raw = raw
        self.loop = loop
        self.logger = logger
        let me = Unmanaged.passUnretained(self).toOpaque()
        check(sinki_curl_multi_setopt_ptr(raw, CURLMOPT_SOCKETDATA, me))
        check(sinki_curl_multi_setopt_socket_cb(raw) { _, socket, what, user, _ in
            guard let user else { return -1 }
            return Unmanaged<MultiHandle>.fromOpaque(user).takeUnretainedValue().watch(socket, what)
        })
        // Idle connections kept for reuse. libcurl's default, 4 per transfer in flight *at the time*,
        // shrinks as parallel transfers finish and closes connections the next burst wants again.
        check(sinki_curl_multi_setopt_long(raw, CURLMOPT_MAXCONNECTS, Self.cachedConnections))
        check(sinki_curl_multi_setopt_ptr(raw, CURLMOPT_TIMERDATA, me))
        check(sinki_curl_multi_setopt_timer_cb(raw) { _, milliseconds, user in
            guard let user else { return -1 }
            Unmanaged<MultiHandle>.fromOpaque(user).takeUnretainedValue().schedule(milliseconds)
            return 0
        })
    }

    deinit {
        // Each `send` keeps the client, and so this handle, alive until its transfer is over; so
        // normally nothing is in flight and libcurl holds no socket or timer of ours here.
        precondition(loop.inLoop || (polls.isEmpty && timer == nil),
                     "bug: HTTPClient released off its loop with transfers in flight (\(transfers.count) transfers, \(polls.count) sockets, timer \(timer == nil ? "off" : "set"))")
        // Detach the callbacks: libcurl must not call back into an object being torn down.
        _ = sinki_curl_multi_setopt_socket_cb(raw, nil)
        _ = sinki_curl_multi_setopt_timer_cb(raw, nil)
        for poll in polls.values { poll.stop() }
        polls.removeAll()
        timer = nil
        for easy in transfers.values {
            curl_multi_remove_handle(raw, easy.raw)
            easy.finish(.failure(.cancelled))
        }
        curl_multi_cleanup(raw)
    }

    /// libcurl's process-wide setup, once, before the first handle (thread-safe in 7.84+, and a
    /// Swift global is initialized once anyway).
    private static let curlReady: Bool = curl_global_init(Int(CURL_GLOBAL_ALL)) == CURLE_OK

    private func check(_ code: CURLMcode) {
        precondition(code == CURLM_OK, "bug: curl_multi_setopt failed: \(String(cString: curl_multi_strerror(code)))")
    }

    /// Connections the cache keeps: above the agent's parallel transfers plus its long-poll.
    static let cachedConnections = 32

    var activeTransfers: Int { transfers.count }
    var watchedSockets: Int { polls.count }
    var timerArmed: Bool { timer?.isActive ?? false }

    // MARK: Transfers

    /// Hands `easy` to libcurl; `continuation` is resumed once, when it ends.
    func start(_ easy: EasyHandle, _ continuation: CheckedContinuation<Result<HTTPResponse, TransferError>, Never>) {
        easy.attach(continuation)
        transfers[easy.raw] = easy
        let code = curl_multi_add_handle(raw, easy.raw)
        guard code == CURLM_OK else {
            transfers.removeValue(forKey: easy.raw)
            let message = "curl_multi_add_handle: " + String(cString: curl_multi_strerror(code))
            easy.finish(.failure(.curl(code: Int(code.rawValue), message: message, url: easy.url)))
            return
        }
        // libcurl asked for a 0 ms timeout: the transfer starts on the next loop iteration.
    }

    /// Removes `easy` from libcurl if it is still in flight (its connection is closed, since it
    /// stopped mid-exchange) and completes it as cancelled.
    func cancel(_ easy: EasyHandle) {
        guard transfers.removeValue(forKey: easy.raw) != nil else { return }
        curl_multi_remove_handle(raw, easy.raw)
        easy.finish(.failure(.cancelled))
    }

    /// Tells libcurl about readiness on `socket` (or a timeout), then completes what finished.
    private func act(_ socket: curl_socket_t, _ events: Int32) {
        var running: Int32 = 0
        let code = curl_multi_socket_action(raw, socket, events, &running)
        if code != CURLM_OK {
            logger.error("curl_multi_socket_action: \(String(cString: curl_multi_strerror(code)))")
        }
        collectFinished()
    }

    private func collectFinished() {
        var left: Int32 = 0
        while let message = curl_multi_info_read(raw, &left) {
            guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle else { continue }
            // Read the result before removing the handle: that frees the message.
            let code = sinki_curl_msg_result(message)
            guard let easy = transfers.removeValue(forKey: handle) else { continue }
            let result = easy.outcome(code)
            curl_multi_remove_handle(raw, handle)
            easy.finish(result)
        }
    }

    // MARK: libcurl's socket and timer requests

    /// CURLMOPT_SOCKETFUNCTION: start, change or stop watching `socket`.
    private func watch(_ socket: curl_socket_t, _ what: Int32) -> Int32 {
        if what == CURL_POLL_REMOVE {
            // Stop before libcurl closes the descriptor; the handle's memory goes in its close callback.
            polls.removeValue(forKey: socket)?.stop()
            return 0
        }
        let poll: LoopPoll
        if let existing = polls[socket] {
            poll = existing
        } else {
            do {
                poll = try LoopPoll(loop: loop, fd: socket)
            } catch {
                logger.error("cannot watch a libcurl socket: \(error)")
                return -1
            }
            polls[socket] = poll
        }
        var events: LoopPoll.Events = []
        if what & CURL_POLL_IN != 0 { events.insert(.readable) }
        if what & CURL_POLL_OUT != 0 { events.insert(.writable) }
        if events.isEmpty {
            poll.stop()
        } else {
            poll.start(events) { [unowned self] status, ready in
                var flags: Int32 = 0
                if status < 0 {
                    flags = CURL_CSELECT_ERR
                } else {
                    if ready.contains(.readable) { flags |= CURL_CSELECT_IN }
                    if ready.contains(.writable) { flags |= CURL_CSELECT_OUT }
                }
                self.act(socket, flags)
            }
        }
        return 0
    }

    /// CURLMOPT_TIMERFUNCTION: call libcurl back in `milliseconds`; -1: no timeout wanted. Never
    /// calls libcurl from here (it may be inside libcurl): a 0 ms timer runs on the next iteration.
    private func schedule(_ milliseconds: Int) {
        guard milliseconds >= 0 else {
            timer?.stop()
            timer = nil
            return
        }
        let timer = self.timer ?? LoopTimer(loop: loop)
        self.timer = timer
        timer.start(after: UInt64(milliseconds)) { [unowned self] in
            self.act(CURL_SOCKET_TIMEOUT, 0)
            // The timer is one-shot, and libcurl does not say -1 for a timeout that already fired:
            // unless it asked again from inside `act`, drop the handle now.
            if self.timer?.isActive == false { self.timer = nil }
        }
    }
}

@available(*, unavailable)
extension MultiHandle: Sendable {}
