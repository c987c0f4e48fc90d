import SinkiSupport

extension SQLiteRecordStore {
    /// Tombstones are found by their save time without reading the table (made at every open, so a
    /// store from before retention gets it without a schema change).
    static let retentionIndex = "CREATE INDEX IF NOT EXISTS records_tombstones ON records(saved_at) WHERE deleted = 1"

    /// Folder digests stay as they are: a tombstone counts for nothing in them, and a head is never
    /// lowered.
    public func sweepTombstones(savedBefore cutoff: Int64, limit: Int) throws -> TombstoneSweep {
        let swept = try writer.use { db in
            try db.transaction {
                var highest: Int64 = 0
                var tags: [Int64] = []
                try db.query("SELECT change_tag FROM records WHERE deleted = 1 AND saved_at < ? ORDER BY saved_at LIMIT ?", cutoff, limit) { row in
                    let tag = row.int64(0)
                    tags.append(tag)
                    highest = max(highest, tag)
                }
                if tags.isEmpty { return TombstoneSweep(removed: 0, floor: try db.scalar("SELECT value FROM meta WHERE key = 'history_floor'") ?? 0, more: false) }
                let statement = try db.prepare("DELETE FROM records WHERE change_tag = ?")
                for tag in tags {
                    try statement.bind([tag])
                    while try statement.step() {}
                    statement.reset()
                }
                // A change token at or above the highest tag removed has seen every removed tombstone.
                let floor = max(try db.scalar("SELECT value FROM meta WHERE key = 'history_floor'") ?? 0, highest)
                try db.run("UPDATE meta SET value = ? WHERE key = 'history_floor'", floor)
                return TombstoneSweep(removed: tags.count, floor: floor, more: tags.count == limit)
            }
        }
        return swept
    }

    public func assetIDs() throws -> Set<String> {
        try reader().use { db in
            var ids = Set<String>()
            try db.query("""
                SELECT DISTINCT asset_id FROM records WHERE asset_id IS NOT NULL AND asset_chunks IS NULL
                UNION SELECT DISTINCT asset_id FROM versions WHERE asset_id IS NOT NULL AND asset_chunks IS NULL
                """) { ids.insert($0.text(0)) }
            return ids
        }
    }
}
