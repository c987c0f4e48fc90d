import CMicroHTTPDShim
import CPQ
import Foundation
import Glibc
import SinkiSupport
import Synchronization

/// Other servers' commits on one PostgreSQL database, heard through `LISTEN`: every server's modify
/// sends `NOTIFY sinki_changes, USER` inside its transaction (so only a committed save is heard), and
/// each server wakes its long-polls for that user. A connection of its own, on a thread of its own,
/// sleeping in poll(2) on its socket; a lost connection is made again after a second, and what was
/// missed meanwhile the fallback look finds (`CrossServerWake`).
final class PGChangeSignal: ChangeSignal {
    static let channel = "sinki_changes"

    private let url: String
    private let logger: Logger
    /// An eventfd that ends the thread's poll(2) when the signal stops.
    private let stopper: Int32
    private let stopping = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    private let started = Atomic<Bool>(false)

    init(url: String, logger: Logger) {
        self.url = url
        self.logger = logger
        stopper = eventfd(0, Int32(EFD_CLOEXEC))
    }

    deinit { close(stopper) }

    func start(_ committed: @escaping @Sendable (String) -> Void) throws {
        let firstError = Mutex<String?>(nil)
        let ready = DispatchSemaphore(value: 0)
        started.store(true, ordering: .relaxed)
        let thread = Thread { [self] in
            var connection: PGConnection?
            do { connection = try Self.listening(url) } catch { firstError.withLock { $0 = "\(error)" } }
            ready.signal()
            while !stopping.load(ordering: .relaxed) {
                guard let open = connection else {
                    if wait(socket: -1, milliseconds: 1000) { break }
                    connection = try? Self.listening(url)
                    if connection != nil { logger.info("listening for other servers' commits again") }
                    continue
                }
                if wait(socket: open.socket, milliseconds: -1) { break }
                do {
                    for user in try open.takeNotifications() { committed(user) }
                } catch {
                    logger.warning("lost the connection that hears other servers' commits: \(error); making it again")
                    open.close()
                    connection = nil
                }
            }
            connection?.close()
            finished.signal()
        }
        thread.name = "sinki-listen"
        thread.start()
        // The first connection is made before the server says it serves, so a failure is said at start.
        ready.wait()
        if let error = firstError.withLock({ $0 }) {
            throw PostgresError(kind: .connect, message: "cannot LISTEN for other servers' commits (tried again every second): \(error)", database: redactedPostgresURL(url))
        }
    }

    func stop() {
        guard started.load(ordering: .relaxed), !stopping.exchange(true, ordering: .relaxed) else { return }
        var one: UInt64 = 1
        _ = write(stopper, &one, 8)
        finished.wait()
    }

    /// Waits for the socket to be readable (or `milliseconds`); true when the signal is stopping.
    private func wait(socket: Int32, milliseconds: Int32) -> Bool {
        var fds = [pollfd(fd: stopper, events: Int16(POLLIN), revents: 0)]
        if socket >= 0 { fds.append(pollfd(fd: socket, events: Int16(POLLIN), revents: 0)) }
        _ = poll(&fds, nfds_t(fds.count), milliseconds)
        return fds[0].revents != 0 || stopping.load(ordering: .relaxed)
    }

    private static func listening(_ url: String) throws -> PGConnection {
        let connection = try PGConnection(url: url)
        try connection.execute("LISTEN " + channel)
        return connection
    }
}

