import SinkiSupport
import SinkiTestSupport
import Testing
@testable import SinkiState

/// The `tus_uploads` table: uploads in flight, kept across runs.
@Suite struct TusUploadTableTests {
    @Test func savesReplacesAndRemovesEntries() throws {
        let directory = TemporaryDirectory("sinki-tus-table")
        let store = try StateStore(path: directory.child("state.db"))
        #expect(try store.tusUpload(path: "/f", endpoint: "http://s/") == nil)
        var entry = TusUploadEntry(path: "/f", endpoint: "http://s/", size: 10, mtime: 5, inode: UInt64.max - 1, state: "v1 10 http://s/a")
        try store.saveTusUpload(entry)
        #expect(try store.tusUpload(path: "/f", endpoint: "http://s/") == entry)
        entry.state = "v1 10 http://s/b"
        try store.saveTusUpload(entry)
        try store.saveTusUpload(TusUploadEntry(path: "/f", endpoint: "http://other/", size: 1, mtime: 1, inode: 1, state: "v1 1 -"))
        #expect(try store.tusUpload(path: "/f", endpoint: "http://s/")?.state == "v1 10 http://s/b")
        #expect(try store.tusUploads().count == 2)
        #expect(entry.matches(size: 10, mtime: 5, inode: UInt64.max - 1))
        #expect(!entry.matches(size: 10, mtime: 6, inode: UInt64.max - 1))
        try store.removeTusUpload(path: "/f", endpoint: "http://s/")
        #expect(try store.tusUpload(path: "/f", endpoint: "http://s/") == nil)
    }

    @Test func aDatabaseOfTheFirstSchemaGetsTheTable() throws {
        let directory = TemporaryDirectory("sinki-tus-table")
        let path = directory.child("state.db")
        do {
            let old = try SQLiteDatabase(path: path)
            try old.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID; INSERT INTO meta VALUES('feed.token', 'x');")
            try old.setUserVersion(1)
        }
        let store = try StateStore(path: path)
        #expect(try store.meta("feed.token") == "x")
        try store.saveTusUpload(TusUploadEntry(path: "/f", endpoint: "e", size: 1, mtime: 1, inode: 1, state: "v1 1 -"))
        #expect(try store.tusUploads().count == 1)
    }
}
