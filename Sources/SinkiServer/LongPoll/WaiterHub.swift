import Dispatch
import Foundation
import CMicroHTTPDShim
import Glibc
import SinkiSupport
import Synchronization

/// Parked long-polls, keyed by user, and the one thread that times them out.
///
/// A waiting request holds no thread: its connection is suspended in libmicrohttpd and only an entry
/// here remembers it. Three things resume it, each exactly once, under the hub's lock:
/// - a commit that saved something for its user (`notify(user:)`),
/// - its deadline, kept in one heap that the hub's thread sleeps on,
/// - its client hanging up: while suspended, libmicrohttpd does not watch the socket, so the hub's thread
///   watches it for `EPOLLRDHUP` in an epoll set of its own and resumes the request early, letting
///   libmicrohttpd notice the closed socket and complete the request.
///
/// Missing a commit between "the store had nothing" and "parked" is impossible: the request reads its
/// user's generation before asking the store, and `park` refuses (`.changed`) when a commit has moved the
/// generation on since. libmicrohttpd's own locks are only taken inside the hub's lock (suspend and
/// resume), never the other way round.
final class WaiterHub: Sendable {
    enum WakeReason: Sendable, Equatable {
        /// A commit saved records for the user.
        case changed
        /// The deadline passed.
        case timeout
        /// The client closed its end.
        case hangup
        /// The server is stopping.
        case shutdown
        /// The token it waits under was revoked: it answers 401.
        case revoked

        fileprivate var code: UInt8 {
            switch self {
            case .changed: return 0
            case .timeout: return 1
            case .hangup: return 2
            case .shutdown: return 3
            case .revoked: return 4
            }
        }

        fileprivate init(code: UInt8) {
            self = [.changed, .timeout, .hangup, .shutdown, .revoked][Int(min(code, 4))]
        }
    }

    /// Where the hub leaves the reason for a resume, for the request to read when it runs again. Owned
    /// by the request, so nothing is left behind in the hub if libmicrohttpd closes a resumed connection
    /// without calling the request again.
    final class WakeSlot: Sendable {
        private let value = Atomic<UInt8>(0)

        init() {}

        fileprivate func set(_ reason: WakeReason) { value.store(reason.code, ordering: .releasing) }

        /// The reason of the last resume; `.changed` when the hub has not said.
        var reason: WakeReason { WakeReason(code: value.load(ordering: .acquiring)) }
    }

    enum ParkResult: Equatable {
        /// Parked until a resume; the id names the waiter.
        case parked(UInt64)
        /// A commit for the user came in since `seen`: ask the store again.
        case changed
        /// The server is stopping: answer now.
        case stopping
        /// The token was revoked: answer 401.
        case revoked
    }

    private struct Waiter {
        let user: String
        let token: String?
        let deadline: Int64
        let socket: Int32
        let slot: WakeSlot
        let resume: @Sendable () -> Void
    }

    private struct State {
        var generations: [String: UInt64] = [:]
        var waiters: [UInt64: Waiter] = [:]
        var byUser: [String: Set<UInt64>] = [:]
        var byToken: [String: Set<UInt64>] = [:]
        /// Tokens revoked while the server runs: a poll of one never parks.
        var revoked: Set<String> = []
        var deadlines = DeadlineHeap()
        var nextID: UInt64 = 1
        var stopping = false
    }

    private let state = Mutex(State())
    /// The hub thread's epoll set: the wake-up eventfd (data 0) and parked sockets (data = waiter id).
    private let epoll: Int32
    private let wakeup: Int32
    private let finished = DispatchSemaphore(value: 0)
    private let logger: Logger

    init(logger: Logger) throws(SystemError) {
        self.logger = logger
        epoll = try syscall("epoll_create1") { epoll_create1(Int32(EPOLL_CLOEXEC)) }
        let epollFD = epoll
        let made = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        guard made >= 0 else {
            let error = SystemError("eventfd", errno: errno)
            close(epollFD)
            throw error
        }
        wakeup = made
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.u64 = 0
        _ = epoll_ctl(epoll, EPOLL_CTL_ADD, wakeup, &event)
        let thread = Thread { [self] in run() }
        thread.name = "sinki-longpoll"
        thread.start()
    }

    /// How many commits for `user` the hub has seen; read it before asking the store.
    func generation(of user: String) -> UInt64 {
        state.withLock { $0.generations[user, default: 0] }
    }

    /// Parks a request unless the user's generation moved past `seen` or the hub is stopping. `suspend`
    /// runs inside the hub's lock, so that nothing can resume the connection before it is suspended;
    /// `resume` is called once, later, from any thread, after the reason is left in `slot`.
    func park(user: String, token: String? = nil, seen: UInt64, deadline: Int64, socket: Int32, slot: WakeSlot,
              suspend: () -> Void, resume: @escaping @Sendable () -> Void) -> ParkResult {
        state.withLock { state in
            if state.stopping { return .stopping }
            if let token, state.revoked.contains(token) { return .revoked }
            if state.generations[user, default: 0] != seen { return .changed }
            let id = state.nextID
            state.nextID += 1
            suspend()
            state.waiters[id] = Waiter(user: user, token: token, deadline: deadline, socket: socket, slot: slot, resume: resume)
            state.byUser[user, default: []].insert(id)
            if let token { state.byToken[token, default: []].insert(id) }
            let earliest = state.deadlines.minimum?.deadline
            state.deadlines.push(deadline: deadline, id: id)
            if state.deadlines.count > 1024, state.deadlines.count > 4 * state.waiters.count {
                state.deadlines.keepOnly(state.waiters.mapValues(\.deadline))
            }
            if socket >= 0 {
                var event = epoll_event()
                event.events = EPOLLRDHUP.rawValue
                event.data.u64 = id
                // Without the watch a hang-up is only noticed at the deadline; nothing else breaks.
                _ = epoll_ctl(epoll, EPOLL_CTL_ADD, socket, &event)
            }
            if earliest == nil || deadline < earliest! { poke() }
            return .parked(id)
        }
    }

    /// A commit saved records for `user`: resume every request of theirs that waits.
    func notify(user: String) {
        state.withLock { state in
            state.generations[user, default: 0] &+= 1
            guard let ids = state.byUser.removeValue(forKey: user) else { return }
            for id in ids { wake(&state, id, .changed) }
        }
    }

    /// Users with a parked request right now (the cross-server fallback asks the store for them).
    var waitingUsers: [String] { state.withLock { Array($0.byUser.keys) } }

    /// The tokens were revoked: resume their parked requests (which answer 401) and park none of theirs
    /// again. Other tokens of the same users wait on.
    func revoke(tokens: [String]) {
        state.withLock { state in
            state.revoked.formUnion(tokens)
            for token in tokens {
                guard let ids = state.byToken.removeValue(forKey: token) else { continue }
                for id in ids { wake(&state, id, .revoked) }
            }
        }
    }

    /// Answers every parked request and refuses new ones; stops the hub's thread. Idempotent.
    func shutdown() {
        let first = state.withLock { state -> Bool in
            let first = !state.stopping
            state.stopping = true
            for id in Array(state.waiters.keys) { wake(&state, id, .shutdown) }
            return first
        }
        guard first else { return }
        poke()
        finished.wait()
        close(epoll)
        close(wakeup)
    }

    /// Parked requests right now.
    var waitingCount: Int { state.withLock { $0.waiters.count } }

    // MARK: The hub's thread

    private func wake(_ state: inout State, _ id: UInt64, _ reason: WakeReason) {
        guard let waiter = state.waiters.removeValue(forKey: id) else { return }
        if var ids = state.byUser.removeValue(forKey: waiter.user) {
            ids.remove(id)
            if !ids.isEmpty { state.byUser[waiter.user] = ids }
        }
        if let token = waiter.token, var ids = state.byToken.removeValue(forKey: token) {
            ids.remove(id)
            if !ids.isEmpty { state.byToken[token] = ids }
        }
        if waiter.socket >= 0 { _ = epoll_ctl(epoll, EPOLL_CTL_DEL, waiter.socket, nil) }
        waiter.slot.set(reason)
        waiter.resume()
    }

    private func poke() {
        var one: UInt64 = 1
        _ = write(wakeup, &one, 8)
    }

    private func run() {
        var events = [epoll_event](repeating: epoll_event(), count: 64)
        while true {
            let timeout = state.withLock { state -> Int32? in
                if state.stopping && state.waiters.isEmpty { return nil }
                while let top = state.deadlines.minimum, state.waiters[top.id]?.deadline != top.deadline {
                    state.deadlines.popMinimum()
                }
                guard let top = state.deadlines.minimum else { return -1 }
                let nanoseconds = max(0, top.deadline - Clock.monotonic())
                return Int32(clamping: (nanoseconds + 999_999) / 1_000_000)
            }
            guard let timeout else { break }
            let count = events.withUnsafeMutableBufferPointer { epoll_wait(epoll, $0.baseAddress, Int32($0.count), timeout) }
            if count < 0 && errno != EINTR {
                logger.error("long-poll watcher: epoll_wait: \(String(cString: strerror(errno)))")
            }
            var hangups: [UInt64] = []
            for index in 0..<max(0, Int(count)) {
                let id = events[index].data.u64
                if id == 0 {
                    var value: UInt64 = 0
                    _ = read(wakeup, &value, 8)
                } else {
                    hangups.append(id)
                }
            }
            let now = Clock.monotonic()
            state.withLock { state in
                for id in hangups { wake(&state, id, .hangup) }
                while let top = state.deadlines.minimum, top.deadline <= now {
                    state.deadlines.popMinimum()
                    if state.waiters[top.id]?.deadline == top.deadline { wake(&state, top.id, .timeout) }
                }
            }
        }
        finished.signal()
    }
}

/// A binary min-heap of (deadline, waiter id). Entries of waiters woken early stay until they surface
/// (or a compaction drops them); the hub skips those.
struct DeadlineHeap {
    struct Entry: Equatable {
        let deadline: Int64
        let id: UInt64
    }

    private var entries: [Entry] = []

    var count: Int { entries.count }
    var minimum: Entry? { entries.first }

    mutating func push(deadline: Int64, id: UInt64) {
        entries.append(Entry(deadline: deadline, id: id))
        var child = entries.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard entries[child].deadline < entries[parent].deadline else { break }
            entries.swapAt(child, parent)
            child = parent
        }
    }

    @discardableResult
    mutating func popMinimum() -> Entry? {
        guard !entries.isEmpty else { return nil }
        let top = entries[0]
        let last = entries.removeLast()
        if entries.isEmpty { return top }
        entries[0] = last
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < entries.count, entries[left].deadline < entries[smallest].deadline { smallest = left }
            if right < entries.count, entries[right].deadline < entries[smallest].deadline { smallest = right }
            if smallest == parent { break }
            entries.swapAt(parent, smallest)
            parent = smallest
        }
        return top
    }

    /// Rebuilds the heap from the live waiters only.
    mutating func keepOnly(_ live: [UInt64: Int64]) {
        entries = []
        entries.reserveCapacity(live.count)
        for (id, deadline) in live { push(deadline: deadline, id: id) }
    }
}
