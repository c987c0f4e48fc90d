import SinkiPlan
import SinkiRecord

/// What the simulated server answers a save, as `RecordStore.modify` does.
enum SaveAnswer {
    case saved(ServerRecord)
    /// The baseTag was stale: the server's record (a tombstone at tag 0 for a path it never held).
    case conflict(RemoteEntry)
    /// A move whose source no longer holds that content.
    case refused
}

extension World {
    /// Saves a version if `base` is the current tag (0 when none); the tag then comes from one counter.
    func save(_ id: Int, node: Node?, base: ChangeTag, modifiedAt: Int64, movedFrom: RecordPath? = nil) -> SaveAnswer {
        let current = server[id]
        guard base.value == (current?.tag ?? 0) else { return .conflict(current?.remoteEntry ?? .absent) }
        if let source = movedFrom {
            guard let sourceID = index[source], let held = server[sourceID], held.node != nil, held.node == node else { return .refused }
        }
        serverHead += 1
        let record = ServerRecord(tag: serverHead, node: node, modifiedAt: modifiedAt, movedFrom: movedFrom,
                                  replaced: current?.node)
        server[id] = record
        return .saved(record)
    }

    /// Remote takes a record read at the server. The agent's own save coming back (`sent`) is the
    /// answer it lost: its outcome is recorded now, as the save's transaction would have.
    func ingest(_ entry: RemoteEntry, at id: Int) {
        remote[id] = entry
        owed.read(entry, at: id)
        if let node = entry.node, sent[id].contains(node) {
            synced[id] = SyncedEntry(entry)
            sent[id] = []
        }
    }

    /// Reads up to `limit` records of the change feed, oldest first, into Remote (nil: all of them).
    func readFeed(limit: Int? = nil) {
        var pending = paths.indices.filter { (server[$0]?.tag ?? 0) > feedToken }
        pending.sort { server[$0]!.tag < server[$1]!.tag }
        if let limit, pending.count > limit { pending = Array(pending.prefix(limit)) }
        for id in pending {
            ingest(server[id]!.remoteEntry, at: id)
            feedToken = server[id]!.tag
        }
        if limit == nil { feedToken = serverHead }
    }

    // Another device's edits. It is always up to date with the server (its saves are based on the
    // current tag), so whatever it replaces it replaces knowingly: that version is no longer owed.

    private func otherSave(_ id: Int, _ node: Node?, movedFrom: RecordPath? = nil) {
        let current = server[id]
        if movedFrom == nil {
            owed.release(World.content(of: current?.node), at: id)
            owed.forbid(World.content(of: current?.node), at: id)
        }
        guard case .saved = save(id, node: node, base: ChangeTag(current?.tag ?? 0), modifiedAt: tick(), movedFrom: movedFrom) else {
            preconditionFailure("bug: a save based on the current tag was refused")
        }
        if movedFrom == nil { owed.owe(World.content(of: node), at: id) }
    }

    /// Makes the folders above `id` at the server, replacing a file on the way (a type change).
    private func otherMakeParents(_ id: Int) {
        let parent = parentOf[id]
        guard parent >= 0, server[parent]?.node != .folder else { return }
        otherMakeParents(parent)
        if server[parent]?.node != nil { otherDelete(parent) }
        otherSave(parent, .folder)
    }

    func otherDelete(_ id: Int) {
        for member in subtree(id) where server[member]?.node != nil { otherSave(member, nil) }
    }

    func otherWrite(_ id: Int, symlink: Bool = false) {
        otherMakeParents(id)
        if server[id]?.node == .folder { otherDelete(id) }
        let content = freshContent()
        note("other writes \(paths[id]) = \(content)")
        otherSave(id, symlink ? .symlink(content) : .file(content))
    }

    /// Another device's chmod: the same content saved with another mode. No version is replaced.
    func otherChmod(_ id: Int, random: inout SeededRandom) {
        guard let current = server[id], case let .file(content, mode, xattrs)? = current.node else { return }
        let other = World.otherMode(than: mode, &random)
        note("other chmods \(paths[id]) to \(other)")
        guard case .saved = save(id, node: .file(content, other, xattrs), base: ChangeTag(current.tag), modifiedAt: current.modifiedAt) else {
            preconditionFailure("bug: a save based on the current tag was refused")
        }
    }

    /// Another device's setfattr: the same content saved with other extended attributes.
    func otherSetXattrs(_ id: Int, random: inout SeededRandom) {
        guard let current = server[id], case let .file(content, mode, xattrs)? = current.node else { return }
        let other = World.otherXattrs(than: xattrs, &random)
        note("other sets \(other) on \(paths[id])")
        guard case .saved = save(id, node: .file(content, mode, other), base: ChangeTag(current.tag), modifiedAt: current.modifiedAt) else {
            preconditionFailure("bug: a save based on the current tag was refused")
        }
    }

    /// A set of extended attributes other than `xattrs`, from a few (none among them: a removal).
    static func otherXattrs(than xattrs: XattrDigest, _ random: inout SeededRandom) -> XattrDigest {
        let sets = [XattrDigest.none, XattrDigest("a1"), XattrDigest("b2"), XattrDigest("c3")].filter { $0 != xattrs }
        return sets[random.below(sets.count)]
    }

    /// A mode other than `mode`, from the few a user sets.
    static func otherMode(than mode: FileMode, _ random: inout SeededRandom) -> FileMode {
        let modes = [FileMode(0o644), FileMode(0o755), FileMode(0o600), FileMode(0o700)].filter { $0 != mode }
        return modes[random.below(modes.count)]
    }

    func otherMakeFolder(_ id: Int) {
        guard server[id]?.node != .folder else { return }
        otherMakeParents(id)
        if server[id]?.node != nil { otherDelete(id) }
        note("other makes folder \(paths[id])")
        otherSave(id, .folder)
    }

    /// A rename as an agent sends it: the new path first (`movedFrom`, the server copies the content),
    /// then the old path's tombstone; a folder's contents move one by one, the folder's tombstone last.
    func otherRename(_ from: Int, to: Int) {
        guard let node = server[from]?.node, server[to]?.node == nil, to != from, !isBelow(to, from) else { return }
        note("other renames \(paths[from]) -> \(paths[to])")
        otherMakeParents(to)
        if node == .folder {
            otherSave(to, .folder)
            for child in paths.indices where parentOf[child] == from && server[child]?.node != nil {
                otherRename(child, to: id(moved(child, from: from, to: to)))
            }
        } else {
            guard server[from]?.node == node else { return }
            otherSave(to, node, movedFrom: paths[from])
            owed.move(from: from, to: to)
            owed.allow(World.content(of: node), at: to)
            owed.forbid(World.content(of: node), at: from)
        }
        // The content lives on at the new path: the old path's tombstone replaces nothing owed.
        _ = save(from, node: nil, base: ChangeTag(server[from]!.tag), modifiedAt: tick())
    }

    /// A copy that names its source (`movedFrom`) but leaves it in place: a peer must not take it for
    /// a rename and move its own file away.
    func otherCopy(_ from: Int, to: Int) {
        guard let node = server[from]?.node, !node.isFolder, server[to]?.node == nil, to != from, !isBelow(to, from) else { return }
        note("other copies \(paths[from]) -> \(paths[to])")
        otherMakeParents(to)
        guard server[from]?.node == node else { return }
        otherSave(to, node, movedFrom: paths[from])
        owed.owe(World.content(of: node), at: to)
        owed.allow(World.content(of: node), at: to)
    }

    /// The path `id` would have if the folder `from` were renamed to `to`.
    func moved(_ id: Int, from: Int, to: Int) -> RecordPath {
        let suffix = paths[id].string.utf8.dropFirst(paths[from].string.utf8.count)
        return try! RecordPath(validating: paths[to].string + String(suffix)!)
    }
}
