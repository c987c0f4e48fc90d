import SinkiRecord
@testable import SinkiServer
import SinkiSupport
import SinkiTestSupport
import Testing

/// What only the PostgreSQL store has: its schema version and its connection's errors.
@Suite struct PostgresStoreTests {
    @Test func aSchemaNewerThanTheServerIsRefusedAndOneServerMakesItOnce() throws {
        let database = try PostgresCluster.shared().createDatabase()
        let first = try PostgresStore(url: database.url, connections: 1)
        let id = first.storeID
        first.close()
        // Opened again: the same store, the schema not made twice.
        let again = try PostgresStore(url: database.url, connections: 1)
        #expect(again.storeID == id)
        again.close()
        let admin = try PGConnection(url: database.url)
        defer { admin.close() }
        #expect(try admin.scalar("SELECT count(*) FROM schema_version") == 1)
        try admin.execute("UPDATE schema_version SET version = $1", [PostgresStore.schemaVersion + 1])
        #expect { try PostgresStore(url: database.url, connections: 1) } throws: { error in
            (error as? RecordStoreError)?.message.contains("newer than this server's") == true
        }
    }

    @Test func aSchemaOneDatabaseMovesToTheTagSequenceAndGoesOnAboveItsLastTag() throws {
        let database = try PostgresCluster.shared().createDatabase()
        // Schema 1 as a server of that version left it: the counter row at 41, one record at tag 41.
        let admin = try PGConnection(url: database.url)
        defer { admin.close() }
        try admin.execute(PostgresStore.schema)
        try admin.execute("INSERT INTO store(store_id) VALUES ('old'); INSERT INTO schema_version(version) VALUES (1); UPDATE meta SET value = 41 WHERE key = 'last_tag'")
        try admin.execute("""
            INSERT INTO records (change_tag, owner, path, type, deleted, base_tag, size, sha256, mode, modified_at, device, saved_at)
            VALUES (41, 'u', 'A/old', 'keep-both', false, 0, 0, '', 420, 1, 'd', 1)
            """)
        let store = try PostgresStore(url: database.url, connections: 1)
        defer { store.close() }
        #expect(store.storeID == "old")
        #expect(try admin.scalar("SELECT max(version) FROM schema_version") == 6)
        #expect(try admin.scalar("SELECT count(*) FROM meta WHERE key = 'last_tag'") == 0)
        let outcomes = try store.modify(user: "u", items: checked([fileRecord("A/new", Array("new".utf8)), fileRecord("A/old", Array("edited".utf8), baseTag: 41)]))
        let tags = outcomes.compactMap { outcome -> Int64? in if case let .saved(record) = outcome { record.changeTag } else { nil } }
        // Above the old counter, in order (tags are the saves' times since issue 24: far above).
        #expect(tags.count == 2 && tags[0] > 41 && tags[1] == tags[0] + 1)
        #expect(try store.changes(user: "u", after: 0, limit: PageLimit(records: 10, dataBytes: 1 << 20)).records.map(\.path) == ["A/new", "A/old"])
    }

    @Test func aSchemaTwoDatabaseGainsManifestsAndDigestsAndKeepsItsRecords() throws {
        let database = try PostgresCluster.shared().createDatabase()
        // Schema 2 as a server of that version left it, with a record naming an upload.
        let admin = try PGConnection(url: database.url)
        defer { admin.close() }
        try admin.execute(PostgresStore.schema)
        try admin.execute("""
            INSERT INTO store(store_id) VALUES ('two'); INSERT INTO schema_version(version) VALUES (2);
            CREATE SEQUENCE change_tags AS BIGINT CACHE 1; SELECT setval('change_tags', 8, false); DELETE FROM meta WHERE key = 'last_tag';
            INSERT INTO records (change_tag, owner, path, type, asset_id, asset_size, asset_sha256, deleted, base_tag, size, sha256, mode,
                                 modified_at, device, saved_at)
            VALUES (7, 'u', 'A/upload', 'keep-both', '0123456789abcdef0123456789abcdef', 5, 'ab', false, 0, 5, 'ab', 420, 1, 'd', 1);
            """)
        let store = try PostgresStore(url: database.url, connections: 1)
        defer { store.close() }
        #expect(try admin.scalar("SELECT max(version) FROM schema_version") == 6)
        #expect(try admin.scalar("SELECT count(*) FROM pg_indexes WHERE indexname = 'records_asset'") == 1)
        let old = try store.changes(user: "u", after: 0, limit: PageLimit(records: 10, dataBytes: 1 << 20)).records
        #expect(old.map(\.asset) == [Asset(id: "0123456789abcdef0123456789abcdef", size: 5, sha256: "ab")])
        // Schema 4's digests, computed from the record that was there.
        let entry = TreeDigest.entry(path: "A/upload", contentID: "ab").hex
        #expect(try store.digests(user: "u", folder: "A", children: false) == DigestReply(folder: FolderDigest(path: "A", digest: entry, direct: entry, head: 7)))
        let file = ChunkedFile.random([300_000])
        _ = try store.modify(user: "u", items: checked([file.record("A/big")]))
        #expect(try store.changes(user: "u", after: 7, limit: PageLimit(records: 10, dataBytes: 1 << 20)).records.first?.asset == file.asset)
        #expect(try store.assetIDs() == ["0123456789abcdef0123456789abcdef"])
    }

    @Test func theDigestRebuildReadsPastItsFirstPage() throws {
        let database = try PostgresCluster.shared().createDatabase()
        try PostgresStore(url: database.url, connections: 1).close()
        // Schema 3 with more records than a page of the rebuild, two users' interleaved, tombstones among them.
        let admin = try PGConnection(url: database.url)
        defer { admin.close() }
        try admin.execute("""
            DROP TABLE folder_digests; \(StoreKind.forgetHistory) UPDATE schema_version SET version = 3;
            INSERT INTO records (change_tag, owner, path, type, deleted, base_tag, size, sha256, mode, modified_at, device, saved_at)
            SELECT n, CASE WHEN n % 3 = 0 THEN 'v' ELSE 'u' END, 'R/' || (n % 7) || '/' || n, 'keep-both', n % 11 = 0, 0, 1,
                   CASE WHEN n % 11 = 0 THEN '' ELSE md5(n::text) END, 420, 1, 'd', 1
            FROM generate_series(1, 25000) AS n;
            SELECT setval('change_tags', 25001, false);
            """)
        #expect(PostgresStore.rebuildPage < 25_000)
        let store = try PostgresStore(url: database.url, connections: 1)
        defer { store.close() }
        for user in ["u", "v"] { try expectStoredDigestsMatchRecords(store, user: user, "rebuilt:") }
        #expect(try store.digests(user: "u", folder: "R", children: false).folder.head == 25_000)
    }

    @Test func preparedStatementsSurviveAReconnectAndManyDistinctOnesStillRun() throws {
        let database = try PostgresCluster.shared().createDatabase()
        let connection = try PGConnection(url: database.url)
        defer { connection.close() }
        #expect(try connection.scalar("SELECT $1::bigint + 1", Int64(41)) == 42)
        // A new session knows none of the old one's statements: they are prepared again.
        try connection.reset()
        #expect(try connection.scalar("SELECT $1::bigint + 1", Int64(1)) == 2)
        // Past the cache's limit statements run unprepared, with the same results.
        for index in 0..<300 {
            #expect(try connection.scalar("SELECT $1::bigint + \(index)", Int64(1)) == Int64(index + 1))
        }
        #expect(try connection.scalar("SELECT count(*) FROM pg_prepared_statements") == 256)
    }

    @Test func errorsCarryTheSQLStateAndNoPassword() throws {
        let database = try PostgresCluster.shared().createDatabase()
        let connection = try PGConnection(url: database.url)
        defer { connection.close() }
        #expect { try connection.execute("SELECT * FROM no_such_table") } throws: { error in
            guard let error = error as? PostgresError else { return false }
            return error.kind == .statement && error.sqlState == "42P01" && error.sql == "SELECT * FROM no_such_table"
        }
        let secret = "postgresql://sinki:hunter2@127.0.0.1:\(database.cluster.port)/no_such_database"
        #expect { try PGConnection(url: secret) } throws: { error in
            guard let error = error as? PostgresError else { return false }
            return error.kind == .connect && !"\(error)".contains("hunter2") && "\(error)".contains("no_such_database")
        }
        // Bytes of every value come back as sent.
        let bytes = (0...255).map { UInt8($0) }
        let back = try connection.query("SELECT $1::bytea, $2::bigint, $3::text, $4::text IS NULL", [bytes, Int64.min, "é/\u{0}x".replacingOccurrences(of: "\u{0}", with: ""), String?.none])
        #expect(try back.optionalBytes(0, 0) == bytes)
        #expect(try back.int64(0, 1) == Int64.min)
        #expect(try back.text(0, 2) == "é/x")
        #expect(try back.bool(0, 3))
    }
}
