import Testing
import SinkiSupport
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
