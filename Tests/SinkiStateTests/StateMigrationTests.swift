import SinkiState
import SinkiSupport
import SinkiTestSupport
import Testing

/// A state database written by an older agent opens with what the newer one needs.
@Suite struct StateMigrationTests {
    @Test func aSchemaFiveOutboxGainsTheResendFlagAndKeepsItsEntries() throws {
        let directory = TemporaryDirectory("sinki-state-migration")
        let path = directory.child("state.db")
        do {
            let old = try SQLiteDatabase(path: path)
            try old.execute("""
                CREATE TABLE outbox(path TEXT PRIMARY KEY, queued_at INTEGER NOT NULL, generation INTEGER NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT, sent_sha256 TEXT,
                    sent_deleted INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;
                INSERT INTO outbox(path, queued_at, generation) VALUES('Saves/old.txt', 1, 1);
                """)
            try old.setUserVersion(5)
        }
        let store = try StateStore(path: path)
        let kept = try #require(try store.outboxEntry("Saves/old.txt"))
        #expect(kept.generation == 1 && !kept.resend)
        try store.enqueue("Saves/again.txt", resend: true)
        try store.enqueue("Saves/again.txt")
        #expect(try store.outboxEntry("Saves/again.txt")?.resend == true, "a later change keeps the flag")
        try store.dequeue("Saves/again.txt", unlessResend: true)
        #expect(try store.outboxEntry("Saves/again.txt") != nil)
        try store.dequeue("Saves/again.txt")
        #expect(try store.outboxEntry("Saves/again.txt") == nil)
    }
}
