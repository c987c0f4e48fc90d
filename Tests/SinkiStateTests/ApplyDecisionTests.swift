import SinkiRecord
import SinkiSupport
import Testing
@testable import SinkiState

/// What to do with one remote record, decided from values alone (no disk, no database).
@Suite struct ApplyDecisionTests {
    static let here = LocalPath(RootID(0), "slot.save")

    static func file(_ sha: String = "aaa", tag: Int64 = 4, present: Bool = true, synced: String? = "aaa") -> KnownFile {
        KnownFile(path: "R/slot.save", kind: .file, present: present, size: 3, mtime: 1, inode: 7, sha256: present ? sha : "",
                  tag: tag, syncedSHA256: synced, syncedDeleted: synced == nil && tag > 0)
    }

    static func stat() -> FileStat { FileStat(kind: .file, size: 3, mtime: 1, ctime: 1, inode: 7, device: 1, mode: 0o644) }

    static func facts(_ record: Record, row: KnownFile? = file(), disk: FileStat? = stat(), _ change: (inout ApplyFacts) -> Void = { _ in }) -> ApplyFacts {
        var facts = ApplyFacts(record: record)
        facts.path = here
        facts.row = row
        facts.disk = disk
        facts.contentHere = true
        change(&facts)
        return facts
    }

    static func remote(_ sha: String = "bbb", tag: Int64 = 5, deleted: Bool = false, type: String = Record.defaultType) -> Record {
        Record(path: "R/slot.save", type: type, deleted: deleted, changeTag: tag, size: 3, sha256: deleted ? "" : sha)
    }

    @Test func aVersionAlreadyHereOrOlderIsSkipped() {
        #expect(ApplyDecision.decide(Self.facts(Self.remote("aaa", tag: 4))) == .skip)
        #expect(ApplyDecision.decide(Self.facts(Self.remote("zzz", tag: 3))) == .skip)
        // Not a root synced here.
        #expect(ApplyDecision.decide(Self.facts(Self.remote()) { $0.path = nil }) == .skip)
    }

    @Test func aRowThatDisagreesWithTheServerAboutItsOwnVersionIsNotTakenAsApplied() {
        // Same changeTag, other content: what a full comparison finds; the server's version is written.
        #expect(ApplyDecision.decide(Self.facts(Self.remote("bbb", tag: 4))) == .write(.write))
    }

    @Test func aCleanPathIsWrittenDeletedOrMade() {
        #expect(ApplyDecision.decide(Self.facts(Self.remote())) == .write(.write))
        #expect(ApplyDecision.decide(Self.facts(Self.remote(deleted: true))) == .write(.delete))
        #expect(ApplyDecision.decide(Self.facts(Self.remote(type: Record.directoryType))) == .write(.mkdir))
        #expect(ApplyDecision.decide(Self.facts(Self.remote(type: Record.symlinkType))) == .write(.symlink))
        #expect(ApplyDecision.decide(Self.facts(Self.remote(), row: nil, disk: nil)) == .write(.write))
    }

    @Test func theSameContentIsAdoptedWithoutWriting() {
        #expect(ApplyDecision.decide(Self.facts(Self.remote("aaa", tag: 9))) == .adopt)
    }

    @Test func aLocalChangeMeetsTheRemoteVersionAsAConflict() {
        let edited = Self.file("ccc")
        #expect(ApplyDecision.decide(Self.facts(Self.remote(), row: edited) { $0.queued = true }) == .conflict)
        // Both sides made the same edit: agreed.
        #expect(ApplyDecision.decide(Self.facts(Self.remote("ccc"), row: edited) { $0.queued = true }) == .adopt)
        // Our own save coming back with its answer lost: the base, not a conflict.
        #expect(ApplyDecision.decide(Self.facts(Self.remote(), row: edited) { $0.queued = true; $0.ownPush = true }) == .rebase)
        // A local delete against a remote edit is a conflict too (the edit wins, by the rules).
        let deleted = Self.file(present: false)
        #expect(ApplyDecision.decide(Self.facts(Self.remote(), row: deleted, disk: nil) { $0.queued = true }) == .conflict)
    }

    @Test func whatCannotBeAppliedNowIsHeldWithItsCause() {
        func cause(_ decision: ApplyDecision) -> ApplyFailure.Cause? {
            if case let .hold(failure) = decision { return failure.cause }
            return nil
        }
        #expect(cause(ApplyDecision.decide(Self.facts(Self.remote()) { $0.invalid = "refusing remote record: ../x" })) == .invalid)
        #expect(cause(ApplyDecision.decide(Self.facts(Self.remote()) { $0.blocked = ApplyFailure(.blocked, "a symlink") })) == .blocked)
        #expect(cause(ApplyDecision.decide(Self.facts(Self.remote()) { $0.busy = true })) == .busy)
        #expect(cause(ApplyDecision.decide(Self.facts(Self.remote()) {
            $0.contentHere = false
            $0.contentFailure = ApplyFailure(.downloadFailed, "SHA-256 mismatch")
        })) == .downloadFailed)
        // Content not here and not failed: fetched first.
        #expect(ApplyDecision.decide(Self.facts(Self.remote()) { $0.contentHere = false }) == .fetchContent)
    }

    @Test func aRenameIsTakenOnlyWhenNothingIsAtTheTarget() {
        let source = LocalPath(RootID(0), "old.save")
        #expect(ApplyDecision.decide(Self.facts(Self.remote(), row: nil, disk: nil) { $0.renameSource = source }) == .write(.rename))
        #expect(ApplyDecision.decide(Self.facts(Self.remote()) { $0.renameSource = source }) == .write(.write))
    }

    @Test func ignoredPathsStayOnTheServer() {
        #expect(ApplyDecision.decide(Self.facts(Self.remote()) { $0.ignored = true }) == .ignored)
    }
}
