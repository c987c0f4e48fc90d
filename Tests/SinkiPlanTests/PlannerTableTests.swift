import SinkiPlan
import SinkiRecord
import Testing

/// The rows of docs/planner.md, one by one.
@Suite struct PlannerTableTests {
    let path = try! RecordPath(validating: "R/d/x.txt")
    let folder = try! RecordPath(validating: "R/d")
    let a = Node.file(ContentHash("a")), b = Node.file(ContentHash("b")), c = Node.file(ContentHash("c"))

    func remote(_ tag: Int64, _ node: Node?, at time: Int64 = 0, movedFrom: RecordPath? = nil) -> RemoteEntry {
        RemoteEntry(tag: ChangeTag(tag), node: node, modifiedAt: time, movedFrom: movedFrom)
    }

    func synced(_ tag: Int64, _ node: Node?) -> SyncedEntry { SyncedEntry(tag: ChangeTag(tag), node: node) }

    /// A state for `path` under an existing, synced folder `R/d`.
    func state(remote r: RemoteEntry?, local l: Node?, synced s: SyncedEntry?, localTime: Int64 = 0,
               rule: MergeRule = .keepBoth, below: Below = .nothing) -> PathState {
        let parent = PathEntries(path: folder, remote: remote(1, .folder), local: LocalEntry(.folder), synced: synced(1, .folder))
        return PathState(entries: PathEntries(path: path, remote: r, local: l.map { LocalEntry($0, modifiedAt: localTime) }, synced: s),
                         parent: parent, below: below, rule: rule)
    }

    @Test func agreementNeedsNothingOrOnlySynced() {
        #expect(Planner.plan(state(remote: remote(5, a), local: a, synced: synced(5, a))) == .nothing)
        #expect(Planner.plan(state(remote: nil, local: nil, synced: nil)) == .nothing)
        // Both sides made the same content: agree without moving a byte.
        #expect(Planner.plan(state(remote: remote(7, b), local: b, synced: synced(5, a))) == .advanceSynced(path, to: remote(7, b)))
        // Both deleted.
        #expect(Planner.plan(state(remote: remote(7, nil), local: nil, synced: synced(5, a))) == .advanceSynced(path, to: remote(7, nil)))
    }

    @Test func oneSideChanged() {
        #expect(Planner.plan(state(remote: remote(5, a), local: b, synced: synced(5, a)))
            == .upload(Upload(path: path, node: b, base: ChangeTag(5))))
        #expect(Planner.plan(state(remote: remote(5, a), local: nil, synced: synced(5, a))) == .sendDelete(path, base: ChangeTag(5)))
        #expect(Planner.plan(state(remote: remote(7, b), local: a, synced: synced(5, a)))
            == .download(Download(path: path, remote: remote(7, b), expecting: a)))
        #expect(Planner.plan(state(remote: remote(7, nil), local: a, synced: synced(5, a)))
            == .deleteLocal(path, expecting: a, agree: remote(7, nil)))
        // New on one side only.
        #expect(Planner.plan(state(remote: nil, local: a, synced: nil)) == .upload(Upload(path: path, node: a, base: .none)))
        #expect(Planner.plan(state(remote: remote(3, a), local: nil, synced: nil))
            == .download(Download(path: path, remote: remote(3, a), expecting: nil)))
    }

    /// Extended attributes (issue 25, item 2) sit beside the bytes as a mode does: a setfattr alone is a
    /// change each way, yields to an edit of the bytes on the other side, never beats a delete, and two
    /// of them take the server's set without a conflict copy.
    @Test func aSetfattrAloneIsAChangeThatNeverEarnsAConflictCopy() {
        let tagged = Node.file(ContentHash("a"), .regular, XattrDigest("x1")), other = Node.file(ContentHash("a"), .regular, XattrDigest("x2"))
        #expect(Planner.plan(state(remote: remote(5, a), local: tagged, synced: synced(5, a)))
            == .upload(Upload(path: path, node: tagged, base: ChangeTag(5))))
        #expect(Planner.plan(state(remote: remote(7, tagged), local: a, synced: synced(5, a)))
            == .download(Download(path: path, remote: remote(7, tagged), expecting: a)))
        // Against an edit of the bytes there, the attributes here yield: the edit comes down.
        #expect(Planner.plan(state(remote: remote(7, b), local: tagged, synced: synced(5, a)))
            == .download(Download(path: path, remote: remote(7, b), expecting: tagged)))
        #expect(Planner.plan(state(remote: remote(7, tagged), local: b, synced: synced(5, a)))
            == .upload(Upload(path: path, node: b, base: ChangeTag(7))))
        // Against a delete, attributes alone are no edit to keep.
        #expect(Planner.plan(state(remote: remote(7, nil), local: tagged, synced: synced(5, a)))
            == .deleteLocal(path, expecting: tagged, agree: remote(7, nil)))
        #expect(Planner.plan(state(remote: remote(7, tagged), local: nil, synced: synced(5, a))) == .sendDelete(path, base: ChangeTag(7)))
        // Two sets: the server's, in place.
        #expect(Planner.plan(state(remote: remote(7, other), local: tagged, synced: synced(5, a)))
            == .conflict(.overwriteLocal(Download(path: path, remote: remote(7, other), expecting: tagged))))
    }

    /// Row 1c: a version whose chunks the server lost (removed as damaged: the record says
    /// `incomplete`) is sent again by a device that holds its content, agreed on or not; a device
    /// without it waits for that version rather than fetch what cannot be fetched; a local edit still
    /// goes over it (issue 24 item 2).
    @Test func anIncompleteVersionIsSentAgainByItsHolderAndWaitedForByTheOthers() {
        var lost = remote(9, a)
        lost.incomplete = true
        #expect(Planner.plan(state(remote: lost, local: a, synced: synced(5, a))) == .upload(Upload(path: path, node: a, base: ChangeTag(9))))
        #expect(Planner.plan(state(remote: lost, local: a, synced: synced(9, a))) == .upload(Upload(path: path, node: a, base: ChangeTag(9))))
        #expect(Planner.plan(state(remote: lost, local: a, synced: nil)) == .upload(Upload(path: path, node: a, base: ChangeTag(9))))
        #expect(Planner.plan(state(remote: lost, local: nil, synced: nil)) == .wait(.contentFirst))
        #expect(Planner.plan(state(remote: lost, local: b, synced: synced(5, b))) == .wait(.contentFirst))
        #expect(Planner.plan(state(remote: lost, local: c, synced: synced(5, b))) == .wait(.contentFirst))
        #expect(Planner.plan(state(remote: lost, local: c, synced: synced(9, a))) == .upload(Upload(path: path, node: c, base: ChangeTag(9))))
        // Whole again, it is an ordinary version.
        #expect(Planner.plan(state(remote: remote(10, a), local: nil, synced: nil))
            == .download(Download(path: path, remote: remote(10, a), expecting: nil)))
    }

    @Test func anEditBeatsADelete() {
        // Edited here, deleted there: sent again over the tombstone.
        #expect(Planner.plan(state(remote: remote(7, nil), local: b, synced: synced(5, a)))
            == .upload(Upload(path: path, node: b, base: ChangeTag(7))))
        // Deleted here, edited there: the edit comes down.
        #expect(Planner.plan(state(remote: remote(7, b), local: nil, synced: synced(5, a)))
            == .download(Download(path: path, remote: remote(7, b), expecting: nil)))
    }

    @Test func bothEditedFollowsTheRule() {
        let r = remote(7, c, at: 200)
        let base = synced(5, a)
        #expect(Planner.plan(state(remote: r, local: b, synced: base)) == .conflict(.keepLocalAside(path, expecting: b)))
        #expect(Planner.plan(state(remote: r, local: b, synced: base, localTime: 300, rule: .newest(keepLoser: true)))
            == .conflict(.keepRemoteAside(path, remote: r, expecting: b)))
        #expect(Planner.plan(state(remote: r, local: b, synced: base, localTime: 100, rule: .newest(keepLoser: true)))
            == .conflict(.keepLocalAside(path, expecting: b)))
        #expect(Planner.plan(state(remote: r, local: b, synced: base, localTime: 300, rule: .newest(keepLoser: false)))
            == .conflict(.overwriteRemote(Upload(path: path, node: b, base: ChangeTag(7)))))
        #expect(Planner.plan(state(remote: r, local: b, synced: base, rule: .local(keepLoser: false)))
            == .conflict(.overwriteRemote(Upload(path: path, node: b, base: ChangeTag(7)))))
        #expect(Planner.plan(state(remote: r, local: b, synced: base, rule: .remote(keepLoser: false)))
            == .conflict(.overwriteLocal(Download(path: path, remote: r, expecting: b))))
        // Same time: the content hash decides, so both devices pick the same version ("c" > "b").
        #expect(Planner.plan(state(remote: r, local: b, synced: base, localTime: 200, rule: .newest(keepLoser: false)))
            == .conflict(.overwriteLocal(Download(path: path, remote: r, expecting: b))))
        // Two kinds cannot be picked between without dropping one: both kept, whatever the rule.
        #expect(Planner.plan(state(remote: r, local: .folder, synced: base, rule: .local(keepLoser: false)))
            == .conflict(.keepLocalAside(path, expecting: .folder)))
    }

    @Test func aParentComesFirst() {
        let missingFolder = PathEntries(path: folder, remote: remote(1, .folder), local: nil, synced: nil)
        let down = PathState(entries: PathEntries(path: path, remote: remote(3, a)), parent: missingFolder)
        #expect(Planner.plan(down) == .wait(.parentFirst))
        let notAtServer = PathEntries(path: folder, remote: nil, local: LocalEntry(.folder), synced: nil)
        let up = PathState(entries: PathEntries(path: path, local: LocalEntry(a)), parent: notAtServer)
        #expect(Planner.plan(up) == .wait(.parentFirst))
        // The folder's own row makes it.
        #expect(Planner.plan(PathState(entries: missingFolder)) == .makeLocalFolder(folder, agree: remote(1, .folder)))
        #expect(Planner.plan(PathState(entries: notAtServer)) == .makeRemoteFolder(folder, base: .none))
    }

    @Test func aFolderGoesAfterItsContentsAndStaysForAChangeBelow() {
        func folderState(remote r: RemoteEntry?, local l: Node?, below: Below) -> PathState {
            PathState(entries: PathEntries(path: folder, remote: r, local: l.map { LocalEntry($0) }, synced: synced(1, .folder)), below: below)
        }
        // Deleted at the server.
        #expect(Planner.plan(folderState(remote: remote(9, nil), local: .folder, below: Below(localLive: true)))
            == .wait(.childrenFirst))
        #expect(Planner.plan(folderState(remote: remote(9, nil), local: .folder, below: .nothing))
            == .deleteLocal(folder, expecting: .folder, agree: remote(9, nil)))
        #expect(Planner.plan(folderState(remote: remote(9, nil), local: .folder, below: Below(localLive: true, localKept: true)))
            == .makeRemoteFolder(folder, base: ChangeTag(9)))
        // Deleted here.
        #expect(Planner.plan(folderState(remote: remote(1, .folder), local: nil, below: Below(remoteLive: true)))
            == .wait(.childrenFirst))
        #expect(Planner.plan(folderState(remote: remote(1, .folder), local: nil, below: .nothing))
            == .sendDelete(folder, base: ChangeTag(1)))
        #expect(Planner.plan(folderState(remote: remote(1, .folder), local: nil, below: Below(remoteLive: true, remoteKept: true)))
            == .makeLocalFolder(folder, agree: remote(1, .folder)))
    }

    @Test func aTypeChangeIsADeleteThenACreate() {
        // At the server, a file became a folder: the unchanged local file makes way first.
        #expect(Planner.plan(state(remote: remote(7, .folder), local: a, synced: synced(5, a)))
            == .deleteLocal(path, expecting: a, agree: nil))
        // Then the folder is made.
        #expect(Planner.plan(state(remote: remote(7, .folder), local: nil, synced: synced(5, a)))
            == .makeLocalFolder(path, agree: remote(7, .folder)))
        // Here, a folder became a file: the server's contents of the folder go first.
        #expect(Planner.plan(state(remote: remote(5, .folder), local: a, synced: synced(5, .folder), below: Below(remoteLive: true)))
            == .wait(.childrenFirst))
        #expect(Planner.plan(state(remote: remote(5, .folder), local: a, synced: synced(5, .folder)))
            == .upload(Upload(path: path, node: a, base: ChangeTag(5))))
    }

    @Test func renames() throws {
        let old = try RecordPath(validating: "R/d/old.txt")
        let renamed = remote(8, a, movedFrom: old)
        var moved = state(remote: renamed, local: nil, synced: nil)
        moved.remoteMoveSource = PathEntries(path: old, remote: remote(9, nil), local: LocalEntry(a), synced: synced(4, a))
        #expect(Planner.plan(moved) == .renameLocal(from: old, to: path, remote: renamed))
        // The source still live at the server (a copy, or its delete not read yet): fetched, not moved.
        moved.remoteMoveSource?.remote = remote(4, a)
        #expect(Planner.plan(moved) == .download(Download(path: path, remote: renamed, expecting: nil)))
        // A local rename found by content goes up as a move.
        var local = state(remote: nil, local: a, synced: nil)
        local.localMoveSource = PathEntries(path: old, remote: remote(4, a), local: nil, synced: synced(4, a))
        #expect(Planner.plan(local) == .upload(Upload(path: path, node: a, base: .none, movedFrom: old)))
    }
}

/// The merge base takes in what Remote shows of the shared history that Synced missed.
@Suite struct PlannerBaseTests {
    let path = try! RecordPath(validating: "R/x")
    let a = Node.file(ContentHash("a")), b = Node.file(ContentHash("b"))

    @Test func ownSaveWhoseAnswerWasLost() {
        // Sent, answer lost, then deleted here: the delete goes up, nothing comes back down.
        let lost = PathEntries(path: path, remote: RemoteEntry(tag: ChangeTag(4), node: a), local: nil, synced: nil, sent: [a])
        #expect(Planner.plan(PathState(entries: lost)) == .sendDelete(path, base: ChangeTag(4)))
        // Without the note it is another device's new file.
        var unknown = lost
        unknown.sent = []
        #expect(Planner.plan(PathState(entries: unknown)) == .download(Download(path: path, remote: unknown.remote!, expecting: nil)))
        // Still here: agreement, no I/O.
        var here = lost
        here.local = LocalEntry(a)
        #expect(Planner.plan(PathState(entries: here)) == .advanceSynced(path, to: lost.remote!))
    }

    @Test func aTombstoneThatDeletedWhatIsHere() {
        let tombstone = RemoteEntry(tag: ChangeTag(9), node: nil, replaced: a)
        let seen = PathEntries(path: path, remote: tombstone, local: LocalEntry(a), synced: nil)
        #expect(Planner.plan(PathState(entries: seen)) == .deleteLocal(path, expecting: a, agree: tombstone))
        // Another version here is an edit the delete did not see: it goes up.
        var edited = seen
        edited.local = LocalEntry(b)
        #expect(Planner.plan(PathState(entries: edited)) == .upload(Upload(path: path, node: b, base: ChangeTag(9))))
    }

    @Test func theSameContentAgainIsNoRemoteChange() {
        // A rename there and back saves the same bytes at a new tag: a local edit goes over it.
        let again = PathEntries(path: path, remote: RemoteEntry(tag: ChangeTag(12), node: a), local: LocalEntry(b),
                                synced: SyncedEntry(tag: ChangeTag(3), node: a))
        #expect(Planner.plan(PathState(entries: again)) == .upload(Upload(path: path, node: b, base: ChangeTag(12))))
    }
}

extension PlannerBaseTests {
    @Test func aTombstoneAlreadyAgreedOnIsNoBase() {
        // This agent's own delete (moved away here), then the file put back: a new local version.
        let tombstone = RemoteEntry(tag: ChangeTag(5), node: nil, replaced: a)
        let back = PathEntries(path: path, remote: tombstone, local: LocalEntry(a), synced: SyncedEntry(tombstone))
        #expect(Planner.plan(PathState(entries: back)) == .upload(Upload(path: path, node: a, base: ChangeTag(5))))
    }
}

extension PlannerBaseTests {
    @Test func aVersionThatReplacedWhatIsHere() {
        // The same rename made here and by a peer, who then edited the file: its edit saw this file.
        let edit = RemoteEntry(tag: ChangeTag(15), node: b, replaced: a)
        let renamedHere = PathEntries(path: path, remote: edit, local: LocalEntry(a), synced: nil)
        #expect(Planner.plan(PathState(entries: renamedHere)) == .download(Download(path: path, remote: edit, expecting: a)))
    }
}
