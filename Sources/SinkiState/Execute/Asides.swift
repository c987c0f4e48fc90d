import CSystemShim
import Glibc
import SinkiMerge
import SinkiRecord
import SinkiSupport

/// Conflict copies: a version kept beside its path under a free `name.sync-conflict-…-DEVICE.ext` name,
/// after which the copy is an ordinary new local path (sent by the planner like any other).
struct Asides {
    let context: ReplicaContext
    var store: StateStore { context.store }

    /// Renames the local version at `path` (a folder with everything in it) to a free conflict-copy
    /// name, if it still is `expect`; the Local entries move with it. Returns the copy's record path.
    func keepLocal(_ path: LocalPath, expect: LocalFacts) throws -> String? {
        var made: [String] = []
        let safeRoot = context.safeRoots[path.root.index]
        let parent = try safeRoot.openParent(of: path.relative, create: false, made: &made)
        guard let now = try FileDescriptor.statEntry(parent: parent.raw, parentPath: parent.path, name: path.name),
              expect.kind == .directory ? now.kind == .directory : expect.sameFile(now) else { return nil }
        let time = Clock.now()
        for attempt in 0..<100 {
            let copyName = ConflictName.make(for: path.name, device: context.device, time: time, attempt: attempt)
            let copy = LocalPath(path.root, path.folderPrefix + copyName)
            let copyPath = context.recordPath(copy)
            if try store.row(copyPath) != nil { continue }
            // Our own rename: the watcher must not see it as the user moving the file away.
            context.watch?.expect(path, .movedAway)
            context.watch?.expect(copy, expect.kind == .directory ? .directoryMade : .fileIn)
            if sinki_rename_noreplace(parent.raw, path.name, parent.raw, copyName) == 0 {
                if expect.kind == .directory { context.watch?.moved(from: path, to: copy) }
                try syncFolder(path)
                let fromPath = context.recordPath(path)
                try store.transaction {
                    try store.moveUnkeptXattrs(from: fromPath, to: copyPath)
                    for row in try store.rows(under: fromPath) {
                        guard var local = row.local else { continue }
                        let newPath = copyPath + String(decoding: row.path.utf8.dropFirst(fromPath.utf8.count), as: UTF8.self)
                        if row.path == fromPath, let stat = try? safeRoot.stat(copy.relative), expect.kind == .directory || expect.sameFile(stat) {
                            local.observe(stat)
                        } else if row.path == fromPath {
                            // Written to between the check and the rename: read again when next looked at.
                            local.ctime = 0
                        }
                        if local.kind == .file { local.type = context.typeFor(newPath) }
                        try store.setLocal(newPath, local)
                        try store.setLocal(row.path, nil)
                    }
                }
                context.logger.warning("conflict on \(quoted(fromPath)): kept this machine's version as \(quoted(copyPath))")
                context.keptAside.insert(fromPath)
                return copyPath
            }
            let code = errno
            context.watch?.cancel(path, .movedAway)
            context.watch?.cancel(copy, expect.kind == .directory ? .directoryMade : .fileIn)
            if code == EEXIST { continue }
            throw SystemError("rename", errno: code, path: context.diskPath(path))
        }
        return nil
    }

    /// Writes the remote version `remote` of `path` beside it under a free conflict-copy name (its
    /// writer's device), recorded as a new local file; the remote version is then the merge base, so the
    /// local version goes over it. Returns the copy's record path.
    func keepRemote(_ path: LocalPath, remote: RemoteFacts, content: WriteContent) throws -> String? {
        let root = path.root.index
        let time = Clock.now()
        var made: [String] = []
        let parent = try context.safeRoots[root].openParent(of: path.relative, create: false, made: &made)
        for attempt in 0..<100 {
            let copyName = ConflictName.make(for: path.name, device: remote.device, time: time, attempt: attempt)
            let copy = LocalPath(path.root, path.folderPrefix + copyName)
            let copyPath = context.recordPath(copy)
            if try store.row(copyPath) != nil { continue }
            if try FileDescriptor.statEntry(parent: parent.raw, parentPath: parent.path, name: copyName) != nil { continue }
            context.watch?.expect(copy, .fileIn)
            let stat: FileStat
            do {
                switch content {
                case let .bytes(target) where remote.kind == .symlink:
                    stat = try DiskWriter.writeSymlink(parent: parent.raw, parentPath: parent.path, name: copyName, target: target, expect: nil)
                case let .bytes(bytes):
                    stat = try DiskWriter.writeFile(parent: parent.raw, parentPath: parent.path, name: copyName, bytes: bytes, mode: remote.mode,
                                                    modifiedAt: remote.mtime, expect: nil)
                case let .download(asset):
                    stat = try DiskWriter.placeFile(sourceDirectory: context.downloadsDirectory, sourceName: asset.sha256, move: false,
                                                    parent: parent.raw, parentPath: parent.path, name: copyName, mode: remote.mode,
                                                    modifiedAt: remote.mtime, expect: nil, willAppear: {})
                }
            } catch where error.errno == EEXIST || error.errno == EAGAIN {
                context.watch?.cancel(copy, .fileIn)
                continue
            } catch {
                context.watch?.cancel(copy, .fileIn)
                throw error
            }
            try context.safeRoots[root].syncFileSystem()
            var local = LocalFacts(stat, type: context.typeFor(copyPath))
            local.hash = remote.hash
            let recordPath = context.recordPath(path)
            try store.transaction {
                try store.setLocal(copyPath, local)
                try store.setSynced(recordPath, SyncedFacts(remote))
            }
            context.logger.warning("conflict on \(quoted(recordPath)): kept the version from \(remote.device) as \(quoted(copyPath))")
            return copyPath
        }
        return nil
    }

    private func syncFolder(_ path: LocalPath) throws {
        try context.safeRoots[path.root.index].syncFileSystem()
    }
}
