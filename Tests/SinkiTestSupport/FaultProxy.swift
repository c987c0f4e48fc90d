import Foundation
import Glibc
import SinkiSupport
import Synchronization

/// What a fault proxy does to one connection, drawn from its seeded stream when the connection is
/// accepted. Byte counts are of what was forwarded in `direction` so far.
public enum ConnectionFault: Sendable, Equatable, CustomStringConvertible {
    public enum Direction: Int, Sendable { case up = 0, down = 1 } // up: agent to server
    case none
    /// Every chunk read is held this long before it is passed on.
    case delay(milliseconds: Int)
    /// After `after` bytes, nothing moves for `seconds`; then the connection goes on, or is closed.
    case stall(after: Int, direction: Direction, seconds: Double, thenClose: Bool)
    /// After `after` bytes, both sides get a RST (SO_LINGER 0).
    case reset(after: Int, direction: Direction)
    /// After exactly `after` bytes, both sides are closed in order (FIN): a message cut short.
    case truncate(after: Int, direction: Direction)

    public var description: String {
        switch self {
        case .none: "none"
        case let .delay(ms): "delay \(ms) ms per chunk"
        case let .stall(after, direction, seconds, thenClose):
            "stall \(direction) after \(after) B for \(String(format: "%.1f", seconds)) s\(thenClose ? ", then close" : "")"
        case let .reset(after, direction): "reset \(direction) after \(after) B"
        case let .truncate(after, direction): "truncate \(direction) after \(after) B"
        }
    }

    var kind: String {
        switch self {
        case .none: "none"
        case .delay: "delay"
        case .stall: "stall"
        case .reset: "reset"
        case .truncate: "truncate"
        }
    }

    /// The byte count and direction at which the fault fires, if it has one.
    var trigger: (after: Int, direction: Direction)? {
        switch self {
        case .none, .delay: nil
        case let .stall(after, direction, _, _), let .reset(after, direction), let .truncate(after, direction): (after, direction)
        }
    }

    /// One fault, drawn from `random` with the weights of `profile`.
    public static func draw(_ random: inout SeededRandom, profile: FaultProfile) -> ConnectionFault {
        // Byte counts spread over every scale, from the first header byte to deep inside a tus chunk.
        func bytes() -> Int { random.below(1 << random.int(in: 4...21)) }
        func direction() -> Direction { random.chance(0.5) ? .up : .down }
        switch random.weighted([profile.none, profile.delay, profile.stall, profile.reset, profile.truncate]) {
        case 0: return .none
        case 1: return .delay(milliseconds: random.int(in: 2...60))
        case 2: return .stall(after: bytes(), direction: direction(), seconds: 0.2 + 6 * random.unit() * random.unit(),
                              thenClose: random.chance(0.3))
        case 3: return .reset(after: bytes(), direction: direction())
        default: return .truncate(after: bytes(), direction: direction())
        }
    }
}

/// How often each fault is chosen, as weights.
public struct FaultProfile: Sendable {
    public var none, delay, stall, reset, truncate: Int
    public init(none: Int, delay: Int, stall: Int, reset: Int, truncate: Int) {
        (self.none, self.delay, self.stall, self.reset, self.truncate) = (none, delay, stall, reset, truncate)
    }
    public static let standard = FaultProfile(none: 55, delay: 12, stall: 9, reset: 12, truncate: 12)
}

/// A TCP proxy on 127.0.0.1 (its port picked by the kernel) in front of a target port, that spoils
/// connections on a seeded schedule: the n-th connection it accepts gets the n-th fault of its
/// stream. Which connection is the n-th depends on timing; the sequence of faults does not.
///
/// One accept thread, one thread per connection. Each socket belongs to the thread that made or
/// accepted it and is closed by that thread, once; other threads only set flags it polls.
public final class FaultProxy: @unchecked Sendable {
    // @unchecked: the mutable state is in `state` (a Mutex) and in atomics; sockets are confined to
    // the thread that owns them (see above).
    public let label: String
    public let port: Int
    private let listener: Int32
    private let target: Atomic<Int>
    private let healed = Atomic<Bool>(false)
    private let hidingServerCloses = Atomic<Bool>(false)
    /// Bytes forwarded from the agents to the server, and back, over every connection.
    private let countedUp = Atomic<Int>(0)
    private let countedDown = Atomic<Int>(0)
    /// Bytes a second each connection forwards toward the agent at most (0: no limit).
    private let downRate = Atomic<Int>(0)
    private let upRate = Atomic<Int>(0)
    private let stopping = Atomic<Bool>(false)
    private let threads = DispatchGroup()
    private let state: Mutex<State>

    private struct State {
        var random: SeededRandom
        var profile: FaultProfile
        var accepted = 0
        var drawn: [String: Int] = [:]
        var fired: [String: Int] = [:]
        var events: [String] = []
        /// Where every connection's story is written, one line per event (-1: nowhere).
        var log: Int32 = -1
        /// Faults given outright, for the first connections (tests of the proxy itself).
        var script: [ConnectionFault] = []
    }

    /// Listens at once; forwards to `targetPort` on 127.0.0.1. With `logPath`, each connection's
    /// events (accepted, fault fired, closed and why, bytes each way) are appended there. With
    /// `script`, the first connections get those faults instead of drawn ones.
    public init(label: String, targetPort: Int, seed: UInt64, profile: FaultProfile = .standard, logPath: String? = nil,
                script: [ConnectionFault] = []) throws {
        self.label = label
        target = Atomic(targetPort)
        var initial = State(random: SeededRandom(seed: seed), profile: profile)
        initial.script = script
        if let logPath { initial.log = open(logPath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644) }
        state = Mutex(initial)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ProxyError("socket: \(String(cString: strerror(errno)))") }
        var address = Self.loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                bind(fd, raw, length) == 0 && listen(fd, 128) == 0 && getsockname(fd, raw, &length) == 0
            }
        }
        guard bound else {
            let message = String(cString: strerror(errno))
            close(fd)
            throw ProxyError("bind/listen on 127.0.0.1: \(message)")
        }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        threads.enter()
        Thread { [self] in acceptLoop() }.start()
    }

    deinit {
        stop()
        state.withLock { if $0.log >= 0 { close($0.log) } }
    }

    public var url: String { "http://127.0.0.1:\(port)" }

    /// Bytes the proxy forwarded toward the server (requests: what an agent sent) and back (answers:
    /// what it received), counted on the wire, headers included.
    public var bytesUp: Int { countedUp.load(ordering: .sequentiallyConsistent) }
    public var bytesDown: Int { countedDown.load(ordering: .sequentiallyConsistent) }

    /// A proxy that spoils nothing: it only counts what crosses it.
    public static func counting(label: String, targetPort: Int) throws -> FaultProxy {
        try FaultProxy(label: label, targetPort: targetPort, seed: 0, profile: FaultProfile(none: 1, delay: 0, stall: 0, reset: 0, truncate: 0))
    }

    /// From now on no connection is spoilt: new ones get no fault, open ones drop theirs, and one
    /// that is stalled at this moment is cut (its peer retries), so nothing waits on a dead stall.
    public func heal() { healed.store(true, ordering: .sequentiallyConsistent) }

    /// Faults again, with the stream going on where it was.
    public func spoil() { healed.store(false, ordering: .sequentiallyConsistent) }

    /// From now on, a server that ends a connection (closes it, resets it, or dies) is not heard of by
    /// the agent: its side stays open and silent, as behind a middlebox that lost the connection or a
    /// server host that vanished. What the agent sends on it afterwards is answered with a RST, as a
    /// restarted server's host answers a connection it does not know; an agent that sends nothing
    /// hears nothing, ever. New connections are forwarded as before (refused while nothing listens).
    public func hideServerCloses() { hidingServerCloses.store(true, ordering: .sequentiallyConsistent) }

    /// From now on each connection forwards at most `bytesPerSecond` toward the agent (0: no limit): a
    /// slow link, for a download that must still be under way when something else happens.
    public func limitDown(bytesPerSecond: Int) { downRate.store(bytesPerSecond, ordering: .sequentiallyConsistent) }

    /// Paces what each connection sends toward the server to about `bytesPerSecond` (0: no limit).
    public func limitUp(bytesPerSecond: Int) { upRate.store(bytesPerSecond, ordering: .sequentiallyConsistent) }

    /// Forwards new connections to `port` (a server restarted elsewhere).
    public func retarget(_ port: Int) { target.store(port, ordering: .sequentiallyConsistent) }

    /// Closes the listener and every connection (with RST), and waits for the threads. Idempotent.
    public func stop() {
        stopping.store(true, ordering: .sequentiallyConsistent)
        threads.wait()
    }

    /// Connections accepted, faults drawn and fired by kind, and the last faults fired.
    public var summary: String {
        state.withLock { state in
            func counts(_ table: [String: Int]) -> String {
                table.isEmpty ? "none" : table.keys.sorted().map { "\($0) \(table[$0]!)" }.joined(separator: ", ")
            }
            return "proxy \(label): \(state.accepted) connection(s); faults drawn: \(counts(state.drawn)); fired: \(counts(state.fired))\n"
                + state.events.suffix(8).map { "  \($0)" }.joined(separator: "\n")
        }
    }

    /// Counts a fault and keeps it among the last events.
    private func note(_ fault: ConnectionFault, connection: Int, _ what: String) {
        state.withLock { state in
            state.fired[fault.kind, default: 0] += 1
            state.events.append("#\(connection) \(what)")
            if state.events.count > 200 { state.events.removeFirst(100) }
        }
        trace(connection, what)
    }

    /// One line of the connection log: the time as the agents log it, connection number, event.
    private func trace(_ connection: Int, _ what: String) {
        let line = Array("\(Clock.iso8601(Clock.now())) #\(connection) \(what)\n".utf8)
        state.withLock { state in
            guard state.log >= 0 else { return }
            _ = line.withUnsafeBytes { Glibc.write(state.log, $0.baseAddress, $0.count) }
        }
    }

    private func acceptLoop() {
        defer { close(listener); threads.leave() }
        while !stopping.load(ordering: .sequentiallyConsistent) {
            var entry = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 50) > 0 else { continue }
            let client = Self.accept4(listener, nil, nil, Int32(SOCK_CLOEXEC.rawValue))
            guard client >= 0 else { continue }
            let healedNow = healed.load(ordering: .sequentiallyConsistent)
            let (number, fault) = state.withLock { state in
                state.accepted += 1
                // Drawn even when healed, so a heal never shifts the faults of later spoilt phases.
                var drawn = ConnectionFault.draw(&state.random, profile: state.profile)
                if state.accepted <= state.script.count { drawn = state.script[state.accepted - 1] }
                if !healedNow && drawn != .none { state.drawn[drawn.kind, default: 0] += 1 }
                return (state.accepted, healedNow ? .none : drawn)
            }
            threads.enter()
            Thread { [self] in
                defer { threads.leave() }
                forward(client: client, fault: fault, number: number)
            }.start()
        }
    }

    /// Moves bytes both ways between `client` and a new connection to the target until both sides
    /// are done, a fault ends it, or the proxy stops. Owns and closes both sockets.
    private func forward(client: Int32, fault: ConnectionFault, number: Int) {
        var fault = fault
        var reset = false
        var why = "both sides closed"
        var forwarded = [0, 0]
        let opened = Self.now()
        let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer {
            if reset { Self.lingerZero(client); Self.lingerZero(upstream) }
            close(client)
            if upstream >= 0 { close(upstream) }
            trace(number, "closed\(reset ? " with RST" : ""): \(why); \(forwarded[0]) B up, \(forwarded[1]) B down in "
                  + String(format: "%.2f s", Self.now() - opened))
        }
        trace(number, "accepted; fault: \(fault)")
        guard upstream >= 0, Self.connect(upstream, port: target.load(ordering: .sequentiallyConsistent)) else {
            reset = true // nothing listens (the server is down): the agent sees its connection refused
            why = "target refused: \(String(cString: strerror(errno)))"
            return
        }
        for fd in [client, upstream] {
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        }
        let ends = [client, upstream]
        var readOpen = [true, true]
        var stalledUntil: Double?
        /// The server's side ended and the agent was not told (`hideServerCloses`).
        var serverGone = false
        var buffer = [UInt8](repeating: 0, count: 64 << 10)

        loop: while true {
            if stopping.load(ordering: .sequentiallyConsistent) { reset = true; why = "proxy stopped"; break }
            if healed.load(ordering: .sequentiallyConsistent) && fault != .none {
                if stalledUntil != nil { reset = true; why = "cut while stalled (healed)"; break }
                trace(number, "healed: \(fault) dropped")
                fault = .none
            }
            if let until = stalledUntil {
                // The stall is the fault: this connection moves nothing until then.
                if Self.now() < until { usleep(20_000); continue }
                stalledUntil = nil
                if case .stall(_, _, _, true) = fault { why = "closed after the stall"; break }
                trace(number, "stall over")
                fault = .none
            }
            if let trigger = fault.trigger, forwarded[trigger.direction.rawValue] >= trigger.after {
                note(fault, connection: number, "\(fault): fired after \(forwarded[0]) B up, \(forwarded[1]) B down")
                switch fault {
                case let .stall(_, _, seconds, _): stalledUntil = Self.now() + seconds; continue
                case .reset: reset = true; why = "reset (fault)"; break loop
                default: why = "truncated (fault)"; break loop // close both in order
                }
            }
            if !readOpen[0] && !readOpen[1] { break }
            var entries = (0..<2).map { pollfd(fd: ends[$0], events: readOpen[$0] ? Int16(POLLIN) : 0, revents: 0) }
            guard poll(&entries, 2, 50) > 0 else { continue }
            for side in 0..<2 where readOpen[side] && entries[side].revents != 0 {
                var limit = buffer.count
                if let trigger = fault.trigger, trigger.direction.rawValue == side { limit = min(limit, trigger.after - forwarded[side]) }
                let got = buffer.withUnsafeMutableBytes { read(ends[side], $0.baseAddress, limit) }
                if serverGone {
                    // Only the agent's side is read now: it either gives up the connection or learns it is dead.
                    if got < 0 && (errno == EAGAIN || errno == EINTR) { continue }
                    if got > 0 { reset = true; why = "the agent wrote to a connection whose server is gone" } else {
                        why = "the agent closed a connection whose server was gone"
                    }
                    break loop
                }
                if side == 1 && got <= 0 && !(got < 0 && (errno == EAGAIN || errno == EINTR))
                    && hidingServerCloses.load(ordering: .sequentiallyConsistent) {
                    serverGone = true
                    readOpen[1] = false
                    trace(number, "server side ended (\(got == 0 ? "closed" : String(cString: strerror(errno)))) after \(forwarded[0]) B up, "
                          + "\(forwarded[1]) B down; hidden from the agent")
                    continue
                }
                if got < 0 {
                    if errno == EAGAIN || errno == EINTR { continue }
                    reset = true // a RST from one side goes on to the other
                    why = "\(side == 0 ? "agent" : "server") side: \(String(cString: strerror(errno)))"
                    break loop
                }
                if got == 0 {
                    readOpen[side] = false
                    shutdown(ends[1 - side], Int32(SHUT_WR))
                    trace(number, "\(side == 0 ? "agent" : "server") closed its side after \(forwarded[0]) B up, \(forwarded[1]) B down")
                    continue
                }
                if let line = Self.messageStart(buffer, count: got, upward: side == 0) { trace(number, line) }
                if case let .delay(ms) = fault { usleep(UInt32(ms) * 1000) } // the injected latency
                guard writeAll(ends[1 - side], buffer, count: got) else {
                    reset = true
                    why = "cannot write to the \(side == 0 ? "server" : "agent"): \(String(cString: strerror(errno)))"
                    break loop
                }
                forwarded[side] += got
                if side == 0 {
                    countedUp.wrappingAdd(got, ordering: .sequentiallyConsistent)
                    let rate = upRate.load(ordering: .sequentiallyConsistent)
                    if rate > 0 { usleep(UInt32(min(1.0, Double(got) / Double(rate)) * 1e6)) }
                } else {
                    countedDown.wrappingAdd(got, ordering: .sequentiallyConsistent)
                    let rate = downRate.load(ordering: .sequentiallyConsistent)
                    if rate > 0 { usleep(UInt32(min(1.0, Double(got) / Double(rate)) * 1e6)) } // the slow link itself
                }
            }
        }
    }

    /// Writes `count` bytes of `buffer` to the non-blocking `fd`, waiting for room with a poll;
    /// false when the peer is gone or the proxy stops.
    private func writeAll(_ fd: Int32, _ buffer: [UInt8], count: Int) -> Bool {
        var offset = 0
        while offset < count {
            if stopping.load(ordering: .sequentiallyConsistent) { return false }
            let wrote = buffer.withUnsafeBytes { send(fd, $0.baseAddress!.advanced(by: offset), count - offset, Int32(MSG_NOSIGNAL)) }
            if wrote > 0 { offset += wrote; continue }
            guard wrote < 0, errno == EAGAIN || errno == EINTR else { return false }
            var entry = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            _ = poll(&entry, 1, 50)
        }
        return true
    }

    /// accept4(2), which the Glibc module hides (it wants _GNU_SOURCE): accepted sockets must be
    /// close-on-exec from the start, or a sinkid started meanwhile by another thread inherits one and
    /// keeps the connection open after the proxy closes it.
    private static let accept4: @convention(c) (Int32, UnsafeMutablePointer<sockaddr>?, UnsafeMutablePointer<socklen_t>?, Int32) -> Int32 = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "accept4") else { fatalError("no accept4 in libc") }
        return unsafeBitCast(symbol, to: (@convention(c) (Int32, UnsafeMutablePointer<sockaddr>?, UnsafeMutablePointer<socklen_t>?, Int32) -> Int32).self)
    }()

    /// The request line (upward) or status line (downward) when a chunk begins with one, for the
    /// connection log: which request a fault hit. A line split over two reads is missed; that is all.
    private static func messageStart(_ buffer: [UInt8], count: Int, upward: Bool) -> String? {
        let head = buffer.prefix(min(count, 160))
        let text = String(decoding: head.prefix { $0 != 13 && $0 != 10 }, as: UTF8.self)
        let starts = upward ? ["GET ", "HEAD ", "POST ", "PATCH ", "DELETE ", "PUT ", "OPTIONS "] : ["HTTP/1."]
        guard starts.contains(where: text.hasPrefix) else { return nil }
        return (upward ? "request: " : "response: ") + text
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    private static func connect(_ fd: Int32, port: Int) -> Bool {
        var address = loopback(port: port)
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    /// Makes the coming close send a RST instead of a FIN.
    private static func lingerZero(_ fd: Int32) {
        guard fd >= 0 else { return }
        var option = linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &option, socklen_t(MemoryLayout<linger>.size))
    }

    private static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}

public struct ProxyError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
