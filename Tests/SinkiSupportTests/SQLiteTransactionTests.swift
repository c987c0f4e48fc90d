import Testing
import Dispatch
import SinkiSupport
import Synchronization
import SinkiTestSupport

/// `SQLiteDatabase`'s two kinds of transaction on a real WAL database: a write transaction that nested
/// calls join, and a read-only one (`reading`) that plans a page on one snapshot.
@Suite struct SQLiteTransactionTests {
    func count(_ database: SQLiteDatabase) throws -> Int64 { try database.scalar("SELECT count(*) FROM t") ?? -1 }

    @Test func aReadingSeesOneSnapshotWhileAnotherConnectionCommits() throws {
        let directory = TemporaryDirectory("sinki-sqlite-reading")
        let path = directory.child("db.sqlite")
        let reader = try SQLiteDatabase(path: path)
        try reader.execute("CREATE TABLE t(x INTEGER)")
        let writer = try SQLiteDatabase(path: path)
        try writer.run("INSERT INTO t(x) VALUES(1)")
        let (before, during) = try reader.reading { () throws -> (Int64, Int64) in
            let before = try count(reader)
            try writer.run("INSERT INTO t(x) VALUES(2)") // commits on its own connection
            return (before, try count(reader))
        }
        #expect(before == 1 && during == 1, "one snapshot for the whole reading")
        #expect(try count(reader) == 2, "the commit is seen once the reading ends")
    }

    /// Connections that open a new database at once all open it, with readers beside them: switching
    /// it to WAL takes a lock that SQLite's busy timeout does not wait for (a server answered 500 when
    /// two uploads of a new user made the user's chunk index at the same moment, and a batch's first
    /// chunk was refused when the collection pass at start opened the index as the request made it).
    @Test func connectionsOpeningANewDatabaseAtOnceAllOpenIt() throws {
        for round in 0..<20 {
            let directory = TemporaryDirectory("sinki-sqlite-open-race")
            let path = directory.child("db.sqlite")
            let failures = Mutex<[String]>([])
            DispatchQueue.concurrentPerform(iterations: 12) { index in
                // Four read it as an operator's tool would (read-only, whatever state it is in).
                if index >= 8 {
                    for _ in 0..<20 { _ = try? SQLiteDatabase(path: path, readOnly: true).scalar("SELECT count(*) FROM sqlite_master") }
                    return
                }
                do {
                    let database = try SQLiteDatabase(path: path)
                    try database.execute("CREATE TABLE IF NOT EXISTS t(x INTEGER)")
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
            #expect(failures.withLock { $0 }.isEmpty, "round \(round): \(failures.withLock { $0 })")
        }
    }

    @Test func aReadingThatThrowsEndsAndTheDatabaseGoesOn() throws {
        struct Stop: Error {}
        let directory = TemporaryDirectory("sinki-sqlite-reading-throws")
        let database = try SQLiteDatabase(path: directory.child("db.sqlite"))
        try database.execute("CREATE TABLE t(x INTEGER)")
        #expect(throws: Stop.self) { try database.reading { _ = try count(database); throw Stop() } }
        try database.transaction { try database.run("INSERT INTO t(x) VALUES(1)") }
        #expect(try count(database) == 1)
    }

    @Test func aReadingInsideATransactionSeesItsWrites() throws {
        let directory = TemporaryDirectory("sinki-sqlite-reading-nested")
        let database = try SQLiteDatabase(path: directory.child("db.sqlite"))
        try database.execute("CREATE TABLE t(x INTEGER)")
        let seen = try database.transaction { () throws -> Int64 in
            try database.run("INSERT INTO t(x) VALUES(1)")
            return try database.reading { try count(database) }
        }
        #expect(seen == 1)
        #expect(try count(database) == 1, "the outer transaction committed")
    }
}
