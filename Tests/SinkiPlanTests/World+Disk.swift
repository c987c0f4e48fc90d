import SinkiPlan
import SinkiRecord

extension World {
    /// The user's edits on this device's disk. The user sees what they replace or delete: it is no
    /// longer owed.

    private func diskMakeParents(_ id: Int) {
        let parent = parentOf[id]
        guard parent >= 0, disk[parent]?.node != .folder else { return }
        diskMakeParents(parent)
        if disk[parent] != nil { userDelete(parent) }
        disk[parent] = DiskItem(node: .folder, modifiedAt: tick())
    }

    /// A version the user removes from a path must stay removed only if the agent knew it was there
    /// (observed it, or agreed on it): one that arrived by a rename here and went before any look is,
    /// to the agent, a peer's file it never had, and comes down.
    private func forbidIfKnown(_ content: ContentHash?, at place: Int) {
        guard let content else { return }
        let known = World.content(of: local[place]?.node) == content || World.content(of: synced[place]?.node) == content
        if known { owed.forbid(content, at: place) }
    }

    func userDelete(_ id: Int) {
        guard disk[id] != nil else { return }
        note("user deletes \(paths[id])")
        for member in subtree(id) {
            owed.release(World.content(of: disk[member]?.node), at: member)
            forbidIfKnown(World.content(of: disk[member]?.node), at: member)
            disk[member] = nil
        }
    }

    func userWrite(_ id: Int, symlink: Bool = false) {
        diskMakeParents(id)
        if disk[id]?.node == .folder { userDelete(id) }
        owed.release(World.content(of: disk[id]?.node), at: id)
        forbidIfKnown(World.content(of: disk[id]?.node), at: id)
        let content = freshContent()
        note("user writes \(paths[id]) = \(content)")
        disk[id] = DiskItem(node: symlink ? .symlink(content) : .file(content), modifiedAt: tick())
        owed.owe(content, at: id)
    }

    /// A chmod: the same content with another mode (its mtime stays).
    func userChmod(_ id: Int, random: inout SeededRandom) {
        guard case let .file(content, mode, xattrs)? = disk[id]?.node else { return }
        let other = World.otherMode(than: mode, &random)
        note("user chmods \(paths[id]) to \(other)")
        disk[id]?.node = .file(content, other, xattrs)
    }

    /// A setfattr: the same content with other extended attributes (its mtime stays).
    func userSetXattrs(_ id: Int, random: inout SeededRandom) {
        guard case let .file(content, mode, xattrs)? = disk[id]?.node else { return }
        let other = World.otherXattrs(than: xattrs, &random)
        note("user sets \(other) on \(paths[id])")
        disk[id]?.node = .file(content, mode, other)
    }

    func userMakeFolder(_ id: Int) {
        guard disk[id]?.node != .folder else { return }
        diskMakeParents(id)
        if disk[id] != nil { userDelete(id) }
        note("user makes folder \(paths[id])")
        disk[id] = DiskItem(node: .folder, modifiedAt: tick())
    }

    func userRename(_ from: Int, to: Int) {
        guard disk[from] != nil, disk[to] == nil, to != from, !isBelow(to, from) else { return }
        note("user renames \(paths[from]) -> \(paths[to])")
        diskMakeParents(to)
        guard disk[from] != nil else { return }
        for (old, new) in moveOnDisk(from, to: to) {
            owed.move(from: old, to: new)
            forbidIfKnown(World.content(of: disk[new]?.node), at: old)
            owed.allow(World.content(of: disk[new]?.node), at: new)
        }
    }

    /// Moves a subtree on disk, interning the new paths; returns the pairs (old id, new id), shallow first.
    @discardableResult
    func moveOnDisk(_ from: Int, to: Int) -> [(Int, Int)] {
        let members = subtree(from).reversed().filter { disk[$0] != nil }
        var pairs: [(Int, Int)] = []
        for member in members {
            let target = member == from ? to : id(moved(member, from: from, to: to))
            pairs.append((member, target))
        }
        let items = pairs.map { disk[$0.0] }
        for (old, _) in pairs { disk[old] = nil }
        for ((_, new), item) in zip(pairs, items) { disk[new] = item }
        return pairs
    }

    /// The watcher's report of one path: Local takes the disk as it is; a path that is no folder now
    /// has nothing below it (a folder deleted or replaced reports its contents gone).
    func observe(_ id: Int) {
        local[id] = disk[id].map { LocalEntry($0.node, modifiedAt: $0.modifiedAt) }
        if disk[id]?.node != .folder {
            for other in paths.indices where local[other] != nil && isBelow(other, id) { local[other] = nil }
        }
    }

    /// A full rescan.
    func observeAll() {
        for id in paths.indices { local[id] = disk[id].map { LocalEntry($0.node, modifiedAt: $0.modifiedAt) } }
    }
}
