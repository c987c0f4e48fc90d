import Glibc
import SinkiLoop
import SinkiRecord
import SinkiSupport

extension Replica {
    /// Sets which extended attributes sync from this device (`[transfer] xattrs`). When Local's digests
    /// were read with other patterns (an upgraded database, a changed setting), every file's attributes
    /// are read again now, its bytes not (`rereadXattrs`).
    public func setXattrPolicy(_ policy: XattrPolicy) throws {
        context.xattrs = policy
        let patterns = policy.patterns.joined(separator: "\n")
        guard try store.meta(MetaKey.xattrPatterns) != patterns else { return }
        let changed = try rereadXattrs()
        try store.setMeta(MetaKey.xattrPatterns, patterns)
        if changed > 0 { logger.info("extended attributes read again with [transfer] xattrs = \(policy.patterns.joined(separator: ", ")): \(changed) file(s) differ") }
    }

    /// Reads the attributes of every file Local holds and records their digest where it differs, a page
    /// of rows at a time. A file whose stat is no longer Local's is left to the next look at it, which
    /// reads it whole. Returns how many digests changed.
    func rereadXattrs() throws -> Int {
        var changed = 0
        var after = ""
        while true {
            var page: [TreeRow] = []
            try store.database.query("SELECT \(StateStore.treeColumns) FROM tree WHERE path > ? AND l_kind = 0 ORDER BY path LIMIT 1000",
                                     after) { page.append(StateStore.readRow($0)) }
            guard let last = page.last else { return changed }
            after = last.path
            let located = page.map { context.locate($0.path) }
            let policy = context.xattrs, safeRoots = context.safeRoots
            let readings: [(stat: FileStat, reading: XattrDisk.Reading)?] = Blocking.map(located) { here in
                guard let here, let file = try? safeRoots[here.root.index].openEntry(here.relative),
                      let stat = try? file.stat(), stat.kind == .file, let reading = try? XattrDisk.read(file, policy: policy) else { return nil }
                return (stat, reading)
            }
            try store.transaction {
                for (row, found) in zip(page, readings) {
                    guard var local = row.local, let found, local.matches(found.stat) else { continue }
                    let digest = try observer.localXattrSet(row.path, found.reading, remote: row.remote).digest
                    guard digest != local.xattrs else { continue }
                    local.xattrs = digest
                    try store.setLocal(row.path, local)
                    changed += 1
                }
            }
        }
    }
}
