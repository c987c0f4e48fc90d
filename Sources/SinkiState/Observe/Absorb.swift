import Glibc
import SinkiLoop
import SinkiRecord
import SinkiSupport

extension LocalObserver {
    /// Hashes what needs it (on every core), then records every observation in the Local tree in one
    /// transaction. `live`: seen by this agent while it runs (the watcher's paths; a look before an
    /// operation or a walk, but a root's first since the start), so a file gone is the user's delete and
    /// follows a peer's rename of it. Every way of seeing a delete must treat it alike: a look before an
    /// operation that finds it first leaves nothing for the watcher's event to find.
    func absorb(_ observations: [Observation], live: Bool) throws -> ObserveReport {
        var report = ObserveReport()
        if observations.isEmpty { return report }
        let started = Clock.monotonic()
        defer { logger.debug("absorb \(observations.count): \((Clock.monotonic() - started) / 1_000_000) ms, read \(report.hashed)") }
        var observations = observations
        let inlineLimit = context.inlineLimit
        // What a walk saw may have changed since (other calls run between its chunks). What is recorded
        // without being read (folders, files sent as chunks) must still be there as seen, or the tree
        // would say present for good with nothing on disk (the fault suite's seed 3: a folder renamed
        // away during the first scan after a start).
        for index in observations.indices {
            guard observations[index].stat.map({ $0.kind == .directory || ($0.kind == .file && $0.size > inlineLimit) }) ?? true else { continue }
            let now = context.entry(observations[index].path)
            if let now, now.kind != .special {
                observations[index].stat = now
            } else {
                observations[index].stat = nil
                if let facts = observations[index].known { moves.rememberGone(observations[index].recordPath, facts) }
            }
        }
        // A file sent as chunks is not read here: its upload reads it once, cutting and hashing chunks
        // as it sends them, and names its content when the last chunk is cut (docs/chunking.md).
        let toHash = observations.indices.filter { index in
            guard let stat = observations[index].stat, stat.kind != .directory else { return false }
            return !(stat.kind == .file && stat.size > inlineLimit)
        }
        let safeRoots = context.safeRoots
        // Small files are compressed in the same pass, the push that follows then reads nothing; but only
        // as many as the push cache has room for: the rest are read and compressed again by the push, so
        // compressing them here would be work thrown away (a walk of 10,000 new files outruns the push,
        // and the cache holds about 3,800 of them).
        let kept = pushCache.admits(toHash.map { observations[$0].stat!.size })
        let jobs = zip(toHash, kept).map { (observations[$0].path, $1) }
        // A file read here has its extended attributes read on the same descriptor, after its bytes
        // (none at all when the policy is off).
        let policy = context.xattrs
        let contents: [Result<(FileContent, [UInt8]?), SafeRootError>] = Blocking.map(jobs) { job in
            Result { () throws(SafeRootError) in
                var content = try ContentReader.read(safeRoots[job.0.root.index], job.0.relative, keepBytes: job.1, xattrs: policy)
                let compressed = content.bytes.map { Deflate.compressForSending($0) }
                content.bytes = nil
                return (content, compressed)
            }
        }
        report.hashed = contents.count
        // Extended attributes of every file, read after its content (a change after this read moves its
        // ctime past the stat recorded, so the next look sees it); never its bytes again. A file read
        // above has them already; the rest (large files, a file that became something else) are opened
        // for them here.
        var xattrReadings: [Int: XattrDisk.Reading] = [:]
        for (offset, index) in toHash.enumerated() {
            if case let .success((content, _)) = contents[offset], let reading = content.xattrs { xattrReadings[index] = reading }
        }
        let xattrJobs = policy.isOff ? [] : observations.indices.filter { observations[$0].stat?.kind == .file && xattrReadings[$0] == nil }
        let readings: [Result<XattrDisk.Reading?, SafeRootError>] = Blocking.map(xattrJobs.map { observations[$0].path }) { path in
            Result { () throws(SafeRootError) in try XattrDisk.read(safeRoots[path.root.index], path.relative, policy: policy) }
        }
        var read: [Int: FileContent] = [:]
        var compressed: [Int: [UInt8]] = [:]
        var vanished = Set<Int>()
        for (offset, index) in toHash.enumerated() {
            switch contents[offset] {
            case let .success((content, _)) where content.busy:
                // Still being written: nothing is recorded until it is closed or quiet.
                unstable.append(observations[index].path)
                report.busy += 1
                vanished.insert(index)
            case let .success((content, data)):
                read[index] = content
                if content.unstable { unstable.append(observations[index].path) }
                if let data, !content.unstable { compressed[index] = data }
            case let .failure(error):
                if error.errno != ENOENT { logger.warning("cannot read \(error)") }
                // Vanished (or unreadable) while read: its delete event follows, or the next look.
                vanished.insert(index)
            }
        }
        for (offset, index) in xattrJobs.enumerated() {
            switch readings[offset] {
            case let .success(reading?): xattrReadings[index] = reading
            case .success(nil):
                // Gone, or no longer a file: looked at again.
                unstable.append(observations[index].path)
                vanished.insert(index)
            case let .failure(error):
                if error.errno != ENOENT { logger.warning("cannot read the extended attributes of \(error)") }
                vanished.insert(index)
            }
        }
        try store.transaction {
            var deletedFiles: [String] = []
            for index in observations.indices where !vanished.contains(index) {
                let observation = observations[index]
                let local: LocalFacts?
                if let stat = observation.stat {
                    if stat.kind == .directory {
                        local = LocalFacts(kind: .directory, mtime: stat.mtime, ctime: stat.ctime, inode: stat.inode, mode: stat.mode,
                                           type: Record.directoryType)
                    } else {
                        let type = stat.kind == .symlink ? Record.symlinkType : context.typeFor(observation.recordPath)
                        if let content = read[index] {
                            var facts = LocalFacts(content.stat, type: type)
                            facts.hash = content.sha256
                            if facts.kind == .file { facts.xattrs = try localXattrs(observation, xattrReadings[index]) }
                            local = facts
                        } else {
                            var facts = LocalFacts(stat, type: type)
                            // Anything else about it changed: its upload reads it and names it (unchanged
                            // content then sends nothing).
                            if observation.known == nil, let hash = moves.takeGone(inode: stat.inode, size: stat.size, mtime: stat.mtime) {
                                // A large file is not read when it appears: the same inode, size and mtime as
                                // one that just vanished is that file renamed, with the content it had there.
                                facts.hash = hash
                            }
                            if facts.kind == .file { facts.xattrs = try localXattrs(observation, xattrReadings[index]) }
                            local = facts
                        }
                    }
                } else {
                    local = nil
                }
                if local == observation.known { continue }
                try store.setLocal(observation.recordPath, local)
                if local?.kind != .file { xattrsLeftOut.removeValue(forKey: observation.recordPath) }
                if live, local == nil, let known = observation.known, known.kind != .directory { deletedFiles.append(observation.recordPath) }
                context.touched(observation.recordPath)
                let synced = observation.row?.synced
                let changed = local?.node != synced?.node
                if observations.count <= 20 && logger.isEnabled(.debug) {
                    logger.debug("observe \(quoted(observation.recordPath)): \(local == nil ? "gone" : "present")\(changed ? ", changed" : "")")
                }
                if changed {
                    report.queued += 1
                    if let data = compressed[index], let content = read[index] {
                        pushCache.remember(observation.recordPath, CachedContent(stat: content.stat, sha256: content.sha256, data: data, xattrs: content.xattrs))
                    }
                }
            }
            for path in deletedFiles { try deleteFollowsRename(path) }
        }
        return report
    }
}

extension LocalObserver {
    /// The digest Local records of a file's extended attributes (`XattrSet.effective`): what the disk
    /// held (`reading`; nil with the policy off), with what it carries of its Remote record and the
    /// names it could not keep here. What of its own cannot be sent is noted for status.
    func localXattrs(_ observation: Observation, _ reading: XattrDisk.Reading?) throws -> String {
        try localXattrSet(observation.recordPath, reading, remote: observation.row?.remote).digest
    }

    /// The set a file at `recordPath` stands for, and its digest (`localXattrs`).
    func localXattrSet(_ recordPath: String, _ reading: XattrDisk.Reading?,
                       remote: RemoteFacts?) throws -> (set: ExtendedAttributes, digest: String) {
        let unkept = try store.unkeptXattrs(recordPath)
        let effective = XattrSet.effective(own: reading?.own ?? .none, remote: remote?.xattrs ?? .none, unkept: unkept, policy: context.xattrs)
        let leftOut = (reading?.leftOut ?? []) + effective.leftOut.map { "extended attribute \($0) is not sent: the file's attributes pass the bounds" }
        noteXattrsLeftOut(recordPath, leftOut)
        return (effective.set, XattrSet.digest(effective.set))
    }

    /// Keeps, for status, what of a file's own attributes is not sent (nothing: forgotten); logged once.
    func noteXattrsLeftOut(_ recordPath: String, _ reasons: [String]) {
        guard let first = reasons.first else {
            xattrsLeftOut.removeValue(forKey: recordPath)
            return
        }
        let reason = reasons.count == 1 ? first : first + " (and \(reasons.count - 1) more)"
        if xattrsLeftOut.updateValue(reason, forKey: recordPath) != reason { logger.warning("\(quoted(recordPath)): \(reason)") }
    }
}
