import Synchronization

/// A fixed set of PostgreSQL connections shared by the server's threads: a call takes a free one
/// (or waits for one), uses it alone, and gives it back. A connection found broken is reconnected
/// before use, so a restarted database costs the calls in flight, not the server.
final class PGPool: Sendable {
    private final class Slot: Sendable {
        let connection: Mutex<PGConnection?>
        init(_ connection: sending PGConnection) { self.connection = Mutex(connection) }
    }

    private let slots: [Slot]
    private let next = Atomic<Int>(0)
    let database: String

    /// Opens `size` connections to `url` now, so that a wrong URL fails at start.
    init(url: String, size: Int) throws(PostgresError) {
        database = redactedPostgresURL(url)
        var slots: [Slot] = []
        for _ in 0..<max(1, size) { slots.append(Slot(try PGConnection(url: url))) }
        self.slots = slots
    }

    /// Runs `body` with a connection of its own for that time.
    func use<T: Sendable>(_ body: (PGConnection) throws -> T) throws -> T {
        let start = Int(UInt(bitPattern: next.wrappingAdd(1, ordering: .relaxed).oldValue) % UInt(slots.count))
        let database = database
        // A free connection if there is one; else wait for the round robin's, as SQLite's readers do.
        for offset in 0..<slots.count {
            let slot = slots[(start + offset) % slots.count]
            let done = try slot.connection.withLockIfAvailable { connection -> T in
                guard let connection else { throw PostgresError(kind: .closed, message: "the store is closed", database: database) }
                try Self.prepare(connection)
                return try body(connection)
            }
            if let done { return done }
        }
        return try slots[start].connection.withLock { connection -> T in
            guard let connection else { throw PostgresError(kind: .closed, message: "the store is closed", database: database) }
            try Self.prepare(connection)
            return try body(connection)
        }
    }

    /// A connection as a new call needs it: connected, and outside any transaction.
    private static func prepare(_ connection: PGConnection) throws(PostgresError) {
        if !connection.isHealthy { try connection.reset() }
        if !connection.isIdle { try connection.execute("ROLLBACK") }
    }

    /// Closes every connection, waiting for the calls that hold one.
    func close() {
        for slot in slots {
            slot.connection.withLock { connection in
                connection?.close()
                connection = nil
            }
        }
    }
}
