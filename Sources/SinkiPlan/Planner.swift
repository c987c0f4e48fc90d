import SinkiRecord

/// The pure planner: from one path's entries in the Remote, Local and Synced trees (and the few facts
/// about its neighbours in `PathState`) to the next operation that brings the three trees closer to
/// equal. Its table, with the reasons, is docs/planner.md.
public enum Planner {
    public static func plan(_ state: PathState) -> Operation {
        let entries = state.entries
        let remote = entries.remoteOrAbsent
        let local = entries.local?.node
        let synced = entries.base

        // Row 0: a change at the server below this path must come down, so the path must be a folder
        // here, whatever else it is; every version in the way is kept. It also serves a server that
        // holds no tree for a moment (a create there raced a delete or a type change of its folder).
        // An unchanged local file under a remote type change to a folder is row 5b's, deleted first.
        let typeChangeThere = remote.node == .folder && local != nil && local == synced.node
        if state.below.remoteKept, local?.isFolder != true, !typeChangeThere {
            return makeRoom(state, local: local, remote: remote, synced: synced)
        }
        // Row 1c: the server lost chunks of its version (removed as damaged) and this device holds the
        // content: it sends it again, as it is, over that version; the chunk upload brings the chunks
        // back. Devices without it wait for that version (`pull`, `settle`).
        if remote.incomplete, let node = remote.node, local == node {
            return .upload(Upload(path: state.path, node: node, base: remote.tag))
        }
        // Row 1: both sides hold the same thing; only Synced may lag.
        if local == remote.node {
            if entries.isSynced { return .nothing }
            return .advanceSynced(state.path, to: remote)
        }
        // A change is a different node, not a new tag: the same content saved again at the server (a
        // rename there and back) is no edit to conflict with, and a local change goes over it.
        let remoteChanged = remote.node != synced.node
        let localChanged = local != synced.node
        switch (localChanged, remoteChanged) {
        case (true, false):
            return push(state, base: remote.tag)
        case (false, _):
            return pull(state)
        case (true, true):
            // Rows 7-9: both changed. An edit always beats a delete.
            // A chmod or a setfattr alone is no edit to keep from a delete on the other side.
            guard let local else {
                if let base = synced.node, let remoteNode = remote.node, remoteNode.sameContent(as: base) { return push(state, base: remote.tag) }
                return pull(state)
            }
            guard let remoteNode = remote.node else {
                if let base = synced.node, local.sameContent(as: base) { return pull(state) }
                return push(state, base: remote.tag)
            }
            // A chmod or a setfattr alone yields to an edit of the content on the other side: no conflict
            // copy of bytes nobody changed.
            if let base = synced.node {
                let localAttributesOnly = local.sameContent(as: base), remoteAttributesOnly = remoteNode.sameContent(as: base)
                if localAttributesOnly && !remoteAttributesOnly { return pull(state) }
                if remoteAttributesOnly && !localAttributesOnly { return push(state, base: remote.tag) }
            }
            return settle(state, local: local, remote: remoteNode)
        }
    }

    /// The local side's version takes the path: it goes to the server, based on `base`.
    private static func push(_ state: PathState, base: ChangeTag) -> Operation {
        let path = state.path
        let remote = state.entries.remoteOrAbsent
        guard let local = state.entries.local?.node else {
            // Deleted here. A folder goes only once the server holds nothing below it (a remote
            // change below brings it back: row 0).
            if remote.node == .folder, state.below.remoteLive { return .wait(.childrenFirst) }
            return .sendDelete(path, base: base)
        }
        // The server keeps a tree too: a record's parent folder first.
        if let parent = state.parent, parent.remote?.node != .folder { return .wait(.parentFirst) }
        // A folder replaced here by a file: its remote contents go first (row 0 if one changed there).
        if remote.node == .folder, !local.isFolder, state.below.remoteLive { return .wait(.childrenFirst) }
        if local.isFolder { return .makeRemoteFolder(path, base: base) }
        return .upload(Upload(path: path, node: local, base: base, movedFrom: localMove(state, local: local)))
    }

    /// The remote side's version takes the path: it comes onto the disk.
    private static func pull(_ state: PathState) -> Operation {
        let path = state.path
        let remote = state.entries.remoteOrAbsent
        let local = state.entries.local?.node
        guard let remoteNode = remote.node else {
            // Deleted at the server, unchanged here (`local` is not nil: row 1 took that).
            guard let local else { return .nothing }
            if local.isFolder {
                // Something below that must stay keeps the folder: it goes back to the server.
                if state.below.localKept || state.below.remoteLive { return .makeRemoteFolder(path, base: remote.tag) }
                if state.below.localLive { return .wait(.childrenFirst) }
            }
            return .deleteLocal(path, expecting: local, agree: remote)
        }
        if let local, !local.sameKind(as: remoteNode) {
            // A type change at the server over an unchanged local path: a delete, then a create.
            if local.isFolder {
                // Something below that must stay (changed here, or live at the server under what is a
                // file there now, a save that raced the type change) keeps the folder, aside.
                if state.below.localKept || state.below.remoteLive { return .conflict(.keepLocalAside(path, expecting: local)) }
                if state.below.localLive { return .wait(.childrenFirst) }
            }
            return .deleteLocal(path, expecting: local, agree: nil)
        }
        if let parent = state.parent, parent.local?.node != .folder { return .wait(.parentFirst) }
        if remoteNode.isFolder { return .makeLocalFolder(path, agree: remote) }
        if local == nil, let source = remoteMove(state, remote: remote, node: remoteNode) {
            return .renameLocal(from: source, to: path, remote: remote)
        }
        if remote.incomplete { return .wait(.contentFirst) }
        return .download(Download(path: path, remote: remote, expecting: local))
    }

    /// Both sides changed the path to different live things: the merge rule decides.
    private static func settle(_ state: PathState, local: Node, remote remoteNode: Node) -> Operation {
        let path = state.path
        let remote = state.entries.remoteOrAbsent
        // Different kinds cannot be merged or picked without dropping a tree: both are kept.
        guard local.sameKind(as: remoteNode), !local.isFolder else {
            return .conflict(.keepLocalAside(path, expecting: local))
        }
        // The same bytes with two modes or two sets of extended attributes: no copy of the same content
        // to keep; the server's take the path, so every device settles alike.
        if local.sameContent(as: remoteNode) {
            if let parent = state.parent, parent.local?.node != .folder { return .wait(.parentFirst) }
            return .conflict(.overwriteLocal(Download(path: path, remote: remote, expecting: local)))
        }
        // A merge reads the remote version: it waits for one the server holds whole.
        if remote.incomplete { return .wait(.contentFirst) }
        let localWins: Bool
        let keepLoser: Bool
        switch state.rule {
        case .keepBoth:
            return .conflict(.keepLocalAside(path, expecting: local))
        case let .newest(keep):
            let localTime = state.entries.local?.modifiedAt ?? 0
            localWins = (localTime, hash(local)) > (remote.modifiedAt, hash(remoteNode))
            keepLoser = keep
        case let .local(keep):
            localWins = true
            keepLoser = keep
        case let .remote(keep):
            localWins = false
            keepLoser = keep
        case .engine:
            // Links hold a target, not content to merge: both are kept, as for `keep-both`.
            guard case .file = local else { return .conflict(.keepLocalAside(path, expecting: local)) }
            return .conflict(.resolve(path, remote: remote, expecting: local))
        }
        switch (localWins, keepLoser) {
        case (true, true): return .conflict(.keepRemoteAside(path, remote: remote, expecting: local))
        case (true, false): return .conflict(.overwriteRemote(Upload(path: path, node: local, base: remote.tag)))
        case (false, true): return .conflict(.keepLocalAside(path, expecting: local))
        case (false, false):
            if let parent = state.parent, parent.local?.node != .folder { return .wait(.parentFirst) }
            return .conflict(.overwriteLocal(Download(path: path, remote: remote, expecting: local)))
        }
    }

    /// Makes the path a folder here for what must come down below it, keeping every version on the
    /// way: a local file moves aside, a remote file not yet agreed on is written aside first.
    private static func makeRoom(_ state: PathState, local: Node?, remote: RemoteEntry, synced: SyncedEntry) -> Operation {
        let path = state.path
        if let local { return .conflict(.keepLocalAside(path, expecting: local)) }
        if let parent = state.parent, parent.local?.node != .folder { return .wait(.parentFirst) }
        if remote.node == .folder { return .makeLocalFolder(path, agree: remote) }
        if remote.node != nil, synced.tag != remote.tag || synced.node != remote.node {
            return .conflict(.keepRemoteAside(path, remote: remote, expecting: nil))
        }
        // A folder made here is a local change: row 3 sends it over whatever the server holds.
        return .makeLocalFolder(path, agree: nil)
    }

    /// The peer's rename source, if it can be renamed here: unchanged since Synced, holding exactly the
    /// remote content, and already deleted at the server (a copy elsewhere keeps its source, so an
    /// undeleted source is downloaded instead of moved).
    private static func remoteMove(_ state: PathState, remote: RemoteEntry, node: Node) -> RecordPath? {
        guard let sourcePath = remote.movedFrom, let source = state.remoteMoveSource, source.path == sourcePath,
              !node.isFolder, source.local?.node == node, source.synced?.node == node,
              source.remote?.isTombstone == true else { return nil }
        return sourcePath
    }

    /// The local rename source found by content, if the server can copy from it: gone from disk,
    /// and still at the server the very version Synced holds with this content.
    private static func localMove(_ state: PathState, local: Node) -> RecordPath? {
        guard let source = state.localMoveSource, source.path != state.path, source.local == nil,
              let synced = source.synced, synced.node == local,
              let remote = source.remote, remote.tag == synced.tag, remote.node == local else { return nil }
        return source.path
    }

    private static func hash(_ node: Node) -> ContentHash {
        switch node {
        case let .file(hash, _, _), let .symlink(hash): return hash
        case .folder: return ContentHash("")
        }
    }
}
