import SinkiSupport
import Synchronization

/// How a store shared by several servers tells each of them about the others' commits (PostgreSQL's
/// `LISTEN`/`NOTIFY`): `start` delivers the user of every commit made elsewhere until `stop`.
/// Notifications are not durable, so a server also looks itself (`CrossServerWake`).
public protocol ChangeSignal: Sendable {
    func start(_ committed: @escaping @Sendable (_ user: String) -> Void) throws
    func stop()
}

/// Wakes this server's parked long-polls for commits other servers made on the shared store: at once
/// through the store's `ChangeSignal`, and, since a notification can be lost (a dropped connection,
/// a restart of the database), every `fallbackSeconds` by comparing each waiting user's newest change
/// tag with the one seen last.
final class CrossServerWake: Sendable {
    private let store: any RecordStore
    private let hub: WaiterHub
    private let signal: any ChangeSignal
    private let fallbackNanoseconds: Int64
    private let logger: Logger
    private let sweeper = Sweeper()
    private let heads = Mutex<[String: Int64]>([:])

    init(store: any RecordStore, hub: WaiterHub, signal: any ChangeSignal, fallbackSeconds: Double, logger: Logger) {
        self.store = store
        self.hub = hub
        self.signal = signal
        fallbackNanoseconds = Int64(fallbackSeconds * 1e9)
        self.logger = logger
    }

    func start() {
        do {
            try signal.start { [hub] user in hub.notify(user: user) }
        } catch {
            logger.warning("other servers' commits are seen only by polling every \(Double(fallbackNanoseconds) / 1e9) s: \(error)")
        }
        sweeper.start { [self] in
            look()
            return Clock.now() + fallbackNanoseconds
        }
    }

    func stop() {
        sweeper.stop()
        signal.stop()
    }

    /// The fallback: a waiting user whose newest tag moved since the last look is woken.
    private func look() {
        for user in hub.waitingUsers {
            guard let head = try? store.headTag(user: user) else { continue }
            let moved = heads.withLock { heads -> Bool in
                defer { heads[user] = head }
                // A user first seen here is woken once: a commit may have come before this look.
                return heads[user].map { head > $0 } ?? true
            }
            if moved { hub.notify(user: user) }
        }
    }
}
