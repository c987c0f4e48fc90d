import Foundation
import SinkiRecord
@testable import SinkiServer
import SinkiSupport
import SinkiTestSupport
import Testing

/// What only the SQLite store has: its schema version, and moving an older database to it.
@Suite struct SQLiteStoreTests {
    @Test func aSchemaTwoDatabaseGainsManifestsAndDigestsAndKeepsItsRecords() throws {
        let directory = TemporaryDirectory("sinki-sqlite-migration")
        let path = directory.child("records.db")
        // Schema 2 as a server of that version left it, with a record naming an upload.
        do {
            let db = try SQLiteDatabase(path: path)
            try db.execute("""
                CREATE TABLE meta (key TEXT PRIMARY KEY, value ANY NOT NULL) WITHOUT ROWID;
                CREATE TABLE records (change_tag INTEGER PRIMARY KEY, user TEXT NOT NULL, path TEXT NOT NULL, type TEXT NOT NULL,
                                      asset_id TEXT, asset_size INTEGER, asset_sha256 TEXT, deleted INTEGER NOT NULL, base_tag INTEGER NOT NULL,
                                      size INTEGER NOT NULL, sha256 TEXT NOT NULL, mode INTEGER NOT NULL, modified_at INTEGER NOT NULL,
                                      device TEXT NOT NULL, saved_at INTEGER NOT NULL, moved_from TEXT, data BLOB);
                CREATE UNIQUE INDEX records_path ON records(user, path);
                CREATE INDEX records_feed ON records(user, change_tag);
                INSERT INTO meta(key, value) VALUES ('store_id', 'two'), ('last_tag', 7), ('history_floor', 0);
                INSERT INTO records VALUES (7, 'u', 'A/upload', 'keep-both', '0123456789abcdef0123456789abcdef', 5, 'ab', 0, 0, 5, 'ab', 420, 1,
                                            'd', 1, NULL, NULL);
                """)
            try db.execute(SQLiteRecordStore.accountsSchema)
            try db.setUserVersion(2)
        }
        let store = try SQLiteRecordStore(path: path, readers: 1)
        defer { store.close() }
        #expect(store.storeID == "two")
        let limit = PageLimit(records: 10, dataBytes: 1 << 20)
        #expect(try store.changes(user: "u", after: 0, limit: limit).records.map(\.asset) == [Asset(id: "0123456789abcdef0123456789abcdef", size: 5, sha256: "ab")])
        // Schema 4's digests, computed from the record that was there.
        let entry = TreeDigest.entry(path: "A/upload", contentID: "ab").hex
        #expect(try store.digests(user: "u", folder: "A", children: false) == DigestReply(folder: FolderDigest(path: "A", digest: entry, direct: entry, head: 7)))
        let file = ChunkedFile.random([300_000])
        let saved = try store.modify(user: "u", items: checked([file.record("A/big")]))
        #expect(saved.count == 1)
        #expect(try store.changes(user: "u", after: 7, limit: limit).records.first?.asset == file.asset)
        store.close()
        let check = try SQLiteDatabase(path: path, readOnly: true)
        #expect(check.userVersion == SQLiteRecordStore.schemaVersion && SQLiteRecordStore.schemaVersion == 6)
        #expect(try check.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'records_asset'") == 1)
    }

    @Test func aNewerSchemaIsRefused() throws {
        let directory = TemporaryDirectory("sinki-sqlite-newer")
        let path = directory.child("records.db")
        try SQLiteRecordStore(path: path, readers: 1).close()
        try SQLiteDatabase(path: path).setUserVersion(SQLiteRecordStore.schemaVersion + 1)
        #expect { try SQLiteRecordStore(path: path, readers: 1) } throws: { error in
            (error as? RecordStoreError)?.message.contains("newer than this server's") == true
        }
    }
}
