import Dispatch
import Foundation
import Glibc
import SinkiSupport
import Synchronization

/// What a running server does the moment a token is revoked or expires (docs/tokens.md): every new
/// request is refused already (the authenticator reads the store each time); this cuts what the token
/// holds open. Its parked long-polls answer `401` (through the hub), and its uploads in progress stop
/// taking bytes and have their connection shut, which ends the request as if the client had gone (the
/// bytes that arrived stay; the upload's lock is released).
final class Revocations: Sendable {
    private struct State {
        /// Tokens revoked while this server runs (a token revoked earlier is refused at authentication).
        var revoked: Set<String> = []
        /// Requests streaming a body, by token: their connection's socket.
        var streams: [String: [UInt64: Int32]] = [:]
        var nextID: UInt64 = 1
        /// Tokens with an expiry whose cut is scheduled (one timer each, armed by their first request).
        var expiring: Set<String> = []
    }

    private let state = Mutex(State())
    private let hub: WaiterHub

    init(hub: WaiterHub) { self.hub = hub }

    func isRevoked(_ token: String) -> Bool { state.withLock { $0.revoked.contains(token) } }

    /// `ids` were revoked: cut what they hold open.
    func revoke(_ ids: [String]) {
        guard !ids.isEmpty else { return }
        state.withLock { state in
            state.revoked.formUnion(ids)
            for id in ids {
                // Under the lock, so that the request cannot complete (and libmicrohttpd close and reuse
                // the descriptor) in between: `unregister` takes the same lock first.
                guard let sockets = state.streams.removeValue(forKey: id) else { continue }
                for socket in sockets.values { shutdown(socket, Int32(SHUT_RDWR)) }
            }
        }
        hub.revoke(tokens: ids)
    }

    /// `token` expires at `expiresAt` (wall clock, ns): from then its open requests are cut as a
    /// revocation's are, within the timer's slack. Armed once per token, by the first request that could
    /// outlive it; a server that sees no expiring token arms nothing.
    func cutAtExpiry(token: String, expiresAt: Int64) {
        guard state.withLock({ $0.expiring.insert(token).inserted }) else { return }
        let delay = max(0, expiresAt - Clock.now())
        DispatchQueue.global(qos: .utility).asyncAfter(wallDeadline: .now() + .nanoseconds(Int(clamping: delay))) { [weak self] in
            self?.revoke([token])
        }
    }

    /// A request of `token` streams a body over `socket`; nil when the token is revoked already.
    func register(token: String, socket: Int32) -> UInt64? {
        state.withLock { state in
            guard !state.revoked.contains(token) else { return nil }
            let id = state.nextID
            state.nextID += 1
            state.streams[token, default: [:]][id] = socket
            return id
        }
    }

    /// The streaming request completed: its socket is libmicrohttpd's to close from here.
    func unregister(token: String, id: UInt64) {
        state.withLock { state in
            state.streams[token]?.removeValue(forKey: id)
            if state.streams[token]?.isEmpty == true { state.streams.removeValue(forKey: token) }
        }
    }
}

/// Looks at the store's revocation count every `interval` (a revocation made by another process, such
/// as `sinkid serve token revoke`, is noticed within that) and hands newly revoked ids to `Revocations`.
final class RevocationWatcher: Sendable {
    private let stopping = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)

    init(accounts: any AccountStore, revocations: Revocations, interval: Double, logger: Logger) {
        // A revocation before this start is refused at authentication already: only later ones count.
        let start = (try? accounts.revocationCount()) ?? 0
        let stopping = self.stopping, finished = self.finished
        let thread = Thread {
            var seen = start
            while stopping.wait(timeout: .now() + interval) == .timedOut {
                do {
                    guard try accounts.revocationCount() > seen else { continue }
                    let (ids, count) = try accounts.revokedSince(seen)
                    seen = count
                    revocations.revoke(ids)
                } catch {
                    logger.warning("revocation watcher: cannot read the store: \(error)")
                }
            }
            finished.signal()
        }
        thread.name = "sinki-revocations"
        thread.start()
    }

    /// Stops the thread and waits for it (before the store closes).
    func stop() {
        stopping.signal()
        finished.wait()
    }
}
