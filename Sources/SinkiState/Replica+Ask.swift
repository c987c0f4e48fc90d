import Glibc
import SinkiMerge
import SinkiRecord
import SinkiSupport

/// `sinkid resolve` could not settle a conflict; the message says why, for people.
public struct ResolveError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

extension Replica {
    /// The `ask` rule: both versions are copied aside into the state folder (`STATE/conflicts/ROOT/…`,
    /// named like conflict copies) and the conflict is recorded; the path is not touched, and its
    /// local change is held back from the server until `sinkid resolve`. A newer remote version
    /// replaces the remote side of a conflict already waiting. False when the local file changed
    /// while it was copied (nothing is recorded then).
    func keepWaiting(_ item: PreparedConflict, root: Int, relative: String) throws -> Bool {
        let remote = item.remote, row = item.row
        let existing = try store.conflict(remote.path)
        let now = Clock.now()
        var local: ConflictVersion
        if let existing {
            local = existing.local
        } else {
            local = ConflictVersion(device: device, deleted: !row.present, size: row.present ? row.size : 0, sha256: row.present ? row.sha256 : "",
                                 modifiedAt: row.mtime, copy: nil)
            if row.present && row.kind == .file {
                guard let copy = try copyLocalAside(item.path, root: root, relative: relative, sha256: row.sha256, time: now) else { return false }
                local.copy = copy
            }
        }
        var remoteSide = ConflictVersion(device: remote.device, deleted: remote.deleted, size: remote.deleted ? 0 : remote.size,
                                      sha256: remote.deleted ? "" : remote.sha256, modifiedAt: remote.modifiedAt, copy: nil)
        if !remote.deleted && remote.kind == .file {
            if Self.isAssetContent(remote) {
                // A large file's version is copied from its checked download, never read into memory.
                let source = try FileDescriptor.open(downloadPath(of: remote), flags: O_RDONLY | O_NOFOLLOW)
                remoteSide.copy = try createAside(item.path, device: remote.device, time: now) { try source.copyAll(to: $0) }
            } else {
                let bytes = try Self.content(of: remote)
                remoteSide.copy = try createAside(item.path, device: remote.device, time: now) { try $0.write(bytes) }
            }
        }
        let waiting = WaitingConflict(path: remote.path, detectedAt: existing?.detectedAt ?? now, local: local, remote: remoteSide,
                                      remoteTag: remote.changeTag, remoteType: remote.type, remoteMode: remote.mode)
        try store.saveConflict(waiting)
        // It waits in the conflicts table now, for sinkid resolve, where status shows it.
        try store.dropUnapplied(remote.path)
        if let old = existing?.remote.copy, old != remoteSide.copy { unlink(old) }
        let copies = [local.copy, remoteSide.copy].compactMap { $0 }.map(quoted).joined(separator: " and ")
        logger.warning("conflict on \(quoted(remote.path)) with \(remote.device) left for sinkid resolve"
            + (copies.isEmpty ? "" : "; both versions kept aside as \(copies)"))
        return true
    }

    /// Conflicts waiting for `sinkid resolve`, oldest first, and how many local changes they hold back.
    public func waitingConflicts() throws -> (conflicts: [WaitingConflict], held: Int) {
        let conflicts = try store.conflicts()
        if conflicts.isEmpty { return ([], 0) }
        let held = try store.database.scalar("SELECT count(*) FROM outbox WHERE path IN (SELECT path FROM conflicts)") ?? 0
        return (conflicts, Int(held))
    }

    /// `sinkid resolve PATH --keep local|remote|both` for a conflict the `ask` rule left: `local`
    /// sends the file as it is now over the remote version; `remote` writes the remote version over
    /// it (checked, like any apply, to still be what the database says); `both` keeps the local
    /// file as a conflict copy and writes the remote version at the path. Returns what was applied
    /// and a line for people; nil when no conflict waits at `path`.
    public func resolveWaiting(_ path: String, keep: KeepChoice) async throws -> (report: ApplyReport, message: String)? {
        guard let waiting = try store.conflict(path) else { return nil }
        guard let recordPath = try? RecordPath(validating: path), let local = locate(recordPath) else {
            throw ResolveError("\(quoted(path)) is not below a root synced here")
        }
        let (root, relative) = (local.root.index, local.relative)
        var row = try currentRow(root: root, relative: relative, path: path) ?? KnownFile(path: path, kind: .file, present: false)
        let remote = waiting.remoteRecord
        let localPath = roots[root].path + "/" + relative
        var report = ApplyReport()
        var choice = keep
        // With a delete on one side, keeping both is keeping the side that is not a delete.
        if choice == .both && remote.deleted { choice = .local }
        if choice == .both && !row.present { choice = .remote }
        let message: String
        switch choice {
        case .local:
            basedOn(remote, &row, path: recordPath)
            try store.transaction {
                try store.saveFile(row)
                try store.enqueue(row.path)
                try store.removeConflict(path)
            }
            message = "kept this machine's version of \(quoted(path)); it goes to the server over the one from \(remote.device)"
        case .remote, .both:
            var expect = entry(root: root, relative: relative)
            var copy: String?
            if choice == .both {
                guard let kept = try await keepAside(root: root, relative: relative, row: row) else {
                    throw ResolveError("cannot keep \(quoted(localPath)) aside (see the agent's log)")
                }
                copy = kept
                row.present = false
                expect = nil
            }
            if remote.deleted {
                if let expect { try removeLocal(root: root, relative: relative, expect: expect) }
                row.present = false
                row.sha256 = ""
            } else {
                let bytes = try readAside(waiting.remote)
                let stat = try writeLocal(root: root, relative: relative, bytes: bytes, mode: remote.mode, modifiedAt: remote.modifiedAt,
                                          expect: expect)
                row.observe(stat)
                row.sha256 = remote.sha256
            }
            do { try safeRoots[root].syncFileSystem() } catch { logger.warning("\(error)") }
            row.agree(with: remote)
            row.movedFrom = nil
            try store.transaction {
                try store.saveFile(row)
                try store.dequeue(row.path)
                try store.removeConflict(path)
            }
            keepBase(remote, at: local)
            let event: AppliedChange.Event = choice == .both ? .conflict : remote.deleted ? .deleted : .changed
            report.applied.append(AppliedChange(path: path, event: event, localPath: localPath, type: remote.type))
            message = copy.map { "took the version from \(remote.device) for \(quoted(path)); this machine's is kept as \(quoted($0))" }
                ?? "took the version from \(remote.device) for \(quoted(path))"
        }
        removeCopies(waiting)
        logger.info("sinkid resolve --keep \(keep.rawValue): \(message)")
        return (report, message)
    }

    /// Forgets a waiting conflict that settled itself (both sides came to hold the same version).
    func dropWaiting(_ path: String, why: String) throws {
        guard let waiting = try store.conflict(path) else { return }
        try store.removeConflict(path)
        removeCopies(waiting)
        logger.info("conflict on \(quoted(path)) settled: \(why)")
    }

    private func removeCopies(_ waiting: WaitingConflict) {
        for copy in [waiting.local.copy, waiting.remote.copy].compactMap({ $0 }) { unlink(copy) }
    }

    /// A kept-aside version's bytes, checked against the hash recorded with it.
    private func readAside(_ side: ConflictVersion) throws -> [UInt8] {
        guard let copy = side.copy else { throw ResolveError("the version from \(side.device) was not kept aside") }
        let bytes = try FileDescriptor.open(copy, flags: O_RDONLY | O_NOFOLLOW).readAll(sizeHint: Int(clamping: side.size))
        guard ContentID.of(bytes) == side.sha256 else {
            throw ResolveError("\(quoted(copy)) no longer holds the version from \(side.device) (it was changed)")
        }
        return bytes
    }

    /// Removes the file at `relative` if it still is `expect`, telling the watcher to expect it.
    private func removeLocal(root: Int, relative: String, expect: FileStat) throws {
        var made: [String] = []
        let parent = try safeRoots[root].openParent(of: relative, create: false, made: &made)
        let name = SafeRoot.name(of: relative)
        echoes?.expect(root: root, relative: relative, .fileGone)
        do {
            guard try DiskWriter.remove(parent: parent.raw, parentPath: parent.path, name: name, expect: expect) else {
                echoes?.cancel(root: root, relative: relative, .fileGone)
                throw ResolveError("\(quoted(parent.path + "/" + name)) changed meanwhile; nothing was removed")
            }
        } catch let error as SystemError {
            echoes?.cancel(root: root, relative: relative, .fileGone)
            throw error
        }
    }

    /// Copies the local file into the conflicts folder, hashing as it goes; nil (and no copy) when
    /// what was read is not the version `sha256` names.
    private func copyLocalAside(_ path: RecordPath, root: Int, relative: String, sha256: String, time: Int64) throws -> String? {
        let source = try safeRoots[root].open(relative, flags: O_RDONLY | O_NOCTTY | O_NONBLOCK)
        var hasher = ContentHasher(expectedSize: try source.stat().size)
        let copy = try createAside(path, device: device, time: time) { target in try source.copyAll(to: target) { hasher.feed($0) } }
        let named = hasher.finish()
        guard named.complete, named.id == sha256 else {
            unlink(copy)
            return nil
        }
        return copy
    }

    /// Makes a new file for a version of `path` kept aside, under `STATE/conflicts/` and the
    /// path's folders, named like a conflict copy of `device`'s version; fills and fsyncs it
    /// before the conflict is recorded. Returns its absolute path.
    private func createAside(_ path: RecordPath, device: String, time: Int64, _ fill: (FileDescriptor) throws -> Void) throws -> String {
        guard let top = conflictsDirectory else { throw ResolveError("bug: the conflicts folder is not open") }
        var folder = top
        let components = PathText.components(path.string)
        for component in [""] + components.dropLast() {
            if !component.isEmpty { folder += "/" + component }
            if mkdir(folder, 0o700) != 0 && errno != EEXIST { throw SystemError("mkdir", errno: errno, path: folder) }
        }
        for attempt in 0..<100 {
            let name = folder + "/" + ConflictName.make(for: path.name, device: device, time: time, attempt: attempt)
            let file: FileDescriptor
            do {
                file = try FileDescriptor.open(name, flags: O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o600)
            } catch {
                if error.errno == EEXIST { continue }
                throw error
            }
            do {
                try fill(file)
                try file.sync()
            } catch {
                unlink(name)
                throw error
            }
            return name
        }
        throw ResolveError("no free name for a copy of \(quoted(path.string)) in \(folder)")
    }
}
