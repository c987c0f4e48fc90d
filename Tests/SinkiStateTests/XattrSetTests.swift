import SinkiRecord
import Testing
@testable import SinkiState

/// Which attributes a device reads and writes (`[transfer] xattrs`), and the set a file here stands for
/// (issue 25, item 2): its own within the patterns, and of the server's the names it never reads or could
/// not keep, so that neither is ever sent back as a removal.
@Suite struct XattrSetTests {
    static func set(_ pairs: [(String, String)]) -> ExtendedAttributes {
        ExtendedAttributes(pairs.map { .init(name: $0.0, value: Array($0.1.utf8)) })
    }

    @Test func thePatternsCoverOnlyUserNamesTheyMatch() {
        let all = XattrPolicy(), some = XattrPolicy(patterns: ["user.sync*", "user.mime_type"])
        #expect(all.covers("user.test") && all.covers("user.xdg.origin.url"))
        #expect(!all.covers("trusted.test") && !all.covers("security.selinux") && !all.covers("user."))
        #expect(some.covers("user.sync.note") && some.covers("user.mime_type") && !some.covers("user.other"))
        // Whatever a pattern says, no other namespace is ever covered.
        #expect(!XattrPolicy(patterns: ["*"]).covers("trusted.x") && XattrPolicy(patterns: ["*"]).covers("user.x"))
        #expect(XattrPolicy.off.isOff && !XattrPolicy.off.covers("user.test"))
    }

    @Test func aFileStandsForItsOwnAndWhatItCarriesOfTheServers() {
        let policy = XattrPolicy(patterns: ["user.sync*"])
        let remote = Self.set([("user.other", "theirs"), ("user.sync.a", "old"), ("user.sync.b", "big")])
        let own = Self.set([("user.sync.a", "new"), ("user.private", "never")])
        // user.other is outside the patterns: carried; user.sync.b was not kept here: the server's stands.
        let effective = XattrSet.effective(own: own, remote: remote, unkept: ["user.sync.b"], policy: policy)
        #expect(effective.set == Self.set([("user.other", "theirs"), ("user.sync.a", "new"), ("user.sync.b", "big")]))
        #expect(effective.leftOut.isEmpty)
        // A removal here of a name it reads is a removal; of one it carries, none.
        let removed = XattrSet.effective(own: .none, remote: remote, unkept: [], policy: policy)
        #expect(removed.set == Self.set([("user.other", "theirs")]))
        // With the policy off, everything of the server's is carried and nothing of its own read.
        #expect(XattrSet.effective(own: own, remote: remote, unkept: [], policy: .off).set == remote)
    }

    @Test func theServersCarriedNamesComeFirstWithinTheBounds() {
        let limit = ExtendedAttributes.Limits.count
        let remote = ExtendedAttributes((0..<limit).map { .init(name: "user.r\($0)", value: [1]) })
        let own = Self.set([("user.mine", "x")])
        let effective = XattrSet.effective(own: own, remote: remote, unkept: [], policy: XattrPolicy(patterns: ["user.mine"]))
        #expect(effective.set.entries.count == limit && effective.leftOut == ["user.mine"])
    }

    @Test func theDigestNamesTheSetWhateverItsOrder() {
        let one = Self.set([("user.a", "1"), ("user.b", "2")]), other = Self.set([("user.b", "2"), ("user.a", "1")])
        #expect(XattrSet.digest(one) == XattrSet.digest(other) && XattrSet.digest(one).count == 32)
        #expect(XattrSet.digest(.none).isEmpty)
        #expect(XattrSet.digest(one) != XattrSet.digest(Self.set([("user.a", "1"), ("user.b", "3")])))
    }
}
