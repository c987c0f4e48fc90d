import Glibc
import SinkiRecord
import SinkiSupport

/// The remote records a batch is about to write, kept until the batch's rows are committed.
///
/// Between a rename into place and the commit that records it, a killed agent would find on restart
/// a file its database does not know, and take the agent's own write for a local edit (a deleted
/// file could then come back everywhere). With the journal, such a file is recognised by its hash as
/// the record it was written from.
extension StateStore {
    static let applyJournalSchema = """
        CREATE TABLE IF NOT EXISTS applying(
            path TEXT PRIMARY KEY,
            change_tag INTEGER NOT NULL,
            kind INTEGER NOT NULL,
            deleted INTEGER NOT NULL,
            sha256 TEXT NOT NULL,
            type TEXT NOT NULL
        ) WITHOUT ROWID;
        """

    /// Notes the records about to be written (one transaction, before any of them is).
    public func journal(_ records: [Record]) throws {
        try transaction {
            for record in records {
                try database.run("""
                    INSERT INTO applying(path, change_tag, kind, deleted, sha256, type) VALUES(?, ?, ?, ?, ?, ?)
                    ON CONFLICT(path) DO UPDATE SET change_tag = excluded.change_tag, kind = excluded.kind,
                        deleted = excluded.deleted, sha256 = excluded.sha256, type = excluded.type
                    """, record.path, record.changeTag, record.kind.code, record.deleted, record.sha256, record.type)
            }
        }
    }

    /// Forgets journal entries (inside the transaction that records their outcome).
    public func clearJournal(_ paths: [String]) throws(SQLiteError) {
        for path in paths { try database.run("DELETE FROM applying WHERE path = ?", path) }
    }

    /// The records a killed agent was writing.
    public func journalEntries() throws -> [Record] {
        var out: [Record] = []
        try database.query("SELECT path, change_tag, kind, deleted, sha256, type FROM applying") { row in
            out.append(Record(path: row.text(0), type: row.text(5), deleted: row.bool(3), changeTag: row.int64(1), sha256: row.text(4)))
        }
        return out
    }

    public func clearAllJournal() throws(SQLiteError) { try database.run("DELETE FROM applying") }
}

extension Replica {
    /// Notes records about to be written (see `StateStore.journal`).
    func journal(_ records: [Record]) throws {
        if !records.isEmpty { try store.journal(records) }
    }

    /// After a kill in the middle of an apply: what reached the disk from the journal's records is
    /// recorded as synced (checked by hash), so it is not mistaken for a local change. The rest is
    /// left to the usual scan and the feed, which delivers those records again.
    public func recoverInterruptedApply() throws {
        let entries = try store.journalEntries()
        if entries.isEmpty { return }
        var recovered = 0
        try store.transaction {
            for record in entries {
                guard let recordPath = try? RecordPath(validating: record.path), let path = locate(recordPath) else { continue }
                let (root, relative) = (path.root.index, path.relative)
                let stat = try? safeRoots[root].stat(relative)
                var row = try store.file(record.path) ?? KnownFile(path: record.path, kind: record.kind, present: false)
                if record.deleted {
                    guard stat == nil else { continue }
                    row.present = false
                    row.sha256 = ""
                } else if let stat {
                    guard KnownFile.kind(of: stat.kind) == record.kind else { continue }
                    if record.kind == .directory {
                        row.observe(stat)
                        row.sha256 = ""
                    } else {
                        guard let content = try? ContentReader.read(safeRoots[root], relative, keepBytes: false),
                              content.sha256 == record.sha256 else { continue }
                        row.observe(content.stat)
                        row.sha256 = content.sha256
                    }
                    row.type = record.type
                } else {
                    continue
                }
                if row.tag < record.changeTag { row.agree(with: record) }
                try store.saveFile(row)
                if !row.hasLocalChange { try store.dequeue(row.path) }
                recovered += 1
            }
            try store.clearAllJournal()
        }
        logger.info("an apply was interrupted: \(recovered) of \(entries.count) remote change(s) had reached the disk and are recorded as such")
    }
}
