import Dispatch
import Glibc
import SinkiSupport
import Synchronization

/// The deadline for a whole request head (issue 24 item 5): a connection whose request line and
/// headers are not all in within `seconds` of its accept, or of the end of its previous request on a
/// kept-alive connection, is shut before any of its token is read. libmicrohttpd's own timeout is an
/// idle one (every byte read restarts it), so a header line every few seconds held a connection for
/// as long as the client liked.
///
/// Connections are known by libmicrohttpd's `struct MHD_Connection *`, from its start notice to its
/// close notice, never by socket number. libmicrohttpd sends the close notice before it closes the
/// socket (0.9.75, `MHD_cleanup_connections`), and both the notice and the cut take `state`'s lock: a
/// socket this shuts is always still that connection's, never a number reused since. The shut socket
/// ends the connection through libmicrohttpd's own path (its read sees the end and closes).
final class HeadDeadlines: Sendable {
    private struct Entry {
        let socket: Int32
        /// Monotonic nanoseconds; nil while a request's head is in and the request runs.
        var deadline: Int64?
        /// A request ended on it: a cut with nothing of the next head in is an idle keep-alive close.
        var served = false
        /// The request line of the head now due is in.
        var lineIn = false
    }

    private struct State {
        var connections: [UInt: Entry] = [:]
        /// When the one pending sweep runs; nil when none is scheduled.
        var sweepAt: Int64?
    }

    private let interval: Int64
    private let state = Mutex(State())
    private let queue = DispatchQueue(label: "sinki.head-deadlines", qos: .utility)
    private let lines = LogThrottle()
    private let logger: Logger
    private let cutCount = Atomic<Int>(0)

    /// `seconds` 0 or less: no deadline (the connections are still followed, never cut).
    init(seconds: Double, logger: Logger) {
        interval = seconds > 0 ? Int64(seconds * 1e9) : 0
        self.logger = logger
    }

    /// Connections cut so far (for tests).
    var cut: Int { cutCount.load(ordering: .relaxed) }

    /// Connections followed now (for tests).
    var followed: Int { state.withLock { $0.connections.count } }

    /// libmicrohttpd accepted `connection` on `socket`: its first head is due.
    func opened(_ connection: OpaquePointer, socket: Int32) {
        state.withLock { state in
            state.connections[Self.key(connection)] = Entry(socket: socket, deadline: nil)
            arm(Self.key(connection), in: &state)
        }
    }

    /// The request line of the connection's next request is in (its headers may still be coming).
    func lineArrived(_ connection: OpaquePointer) {
        state.withLock { $0.connections[Self.key(connection)]?.lineIn = true }
    }

    /// The head of the connection's request is in: no deadline while the request runs.
    func headArrived(_ connection: OpaquePointer) {
        state.withLock { $0.connections[Self.key(connection)]?.deadline = nil }
    }

    /// The connection's request ended; on a kept-alive connection the next head is due.
    func requestEnded(_ connection: OpaquePointer) {
        state.withLock { state in
            state.connections[Self.key(connection)]?.served = true
            state.connections[Self.key(connection)]?.lineIn = false
            arm(Self.key(connection), in: &state)
        }
    }

    /// libmicrohttpd is about to close `connection`'s socket: forget it first.
    func closed(_ connection: OpaquePointer) {
        _ = state.withLock { $0.connections.removeValue(forKey: Self.key(connection)) }
    }

    private static func key(_ connection: OpaquePointer) -> UInt { UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(connection))) }

    /// Sets a followed connection's deadline and makes sure a sweep will look at it. A deadline set now
    /// is never earlier than one set before, so a sweep already scheduled comes first.
    private func arm(_ key: UInt, in state: inout State) {
        guard interval > 0, state.connections[key] != nil else { return }
        let deadline = Clock.monotonic() + interval
        state.connections[key]?.deadline = deadline
        if state.sweepAt == nil { schedule(at: deadline, in: &state) }
    }

    private func schedule(at deadline: Int64, in state: inout State) {
        state.sweepAt = deadline
        let delay = max(0, deadline - Clock.monotonic())
        queue.asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: delay))) { [weak self] in self?.sweep() }
    }

    /// Shuts every connection past its deadline, and schedules the next sweep for the earliest left.
    private func sweep() {
        // Cuts worth a line: a head begun and not finished, or none at all on a new connection. A
        // kept-alive connection idle past the deadline is closed without a word, as servers do.
        let cut = state.withLock { state -> Int in
            state.sweepAt = nil
            let now = Clock.monotonic()
            var cut = 0
            var next: Int64?
            for (key, entry) in state.connections {
                guard let deadline = entry.deadline else { continue }
                if deadline <= now {
                    // Counted first, so that whoever sees the connection end sees it counted.
                    cutCount.add(1, ordering: .relaxed)
                    // Under the lock: libmicrohttpd cannot close this socket before `closed` has run.
                    shutdown(entry.socket, Int32(SHUT_RDWR))
                    state.connections[key]?.deadline = nil
                    if entry.lineIn || !entry.served { cut += 1 }
                } else {
                    next = min(next ?? deadline, deadline)
                }
            }
            if let next { schedule(at: next, in: &state) }
            return cut
        }
        guard cut > 0 else { return }
        // One line a minute however many are cut: each one is a client's doing, not news.
        let message = "closed a connection whose request head was not in within \((Double(interval) / 1e9).formatted2) s"
        for _ in 0..<cut {
            if let line = lines.line(for: message) { logger.info(line) }
        }
    }
}
