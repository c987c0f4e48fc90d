import Testing
@testable import SinkiSupport

/// The folder digest both the server and the agent keep: its entry is fixed (a test vector, so a
/// change to it is seen as the wire change it is), XOR makes it independent of order, and the deltas of
/// a batch land on exactly the folders above each path.
@Suite struct TreeDigestTests {
    @Test func anEntryIsTheSHA256OfPathNulContentID() {
        // printf 'A/b.txt\0abc' | sha256sum
        #expect(TreeDigest.entry(path: "A/b.txt", contentID: "abc").hex
                == "a6b2ca7a2c3da2cb3dfa279d8563fbfd1a26682cda7a9e9f77aac4a9b9cac895")
        let entry = TreeDigest.entry(path: "A/b.txt", contentID: "abc")
        #expect(TreeDigest(hex: entry.hex) == entry)
        #expect(TreeDigest(bytes: entry.bytes) == entry)
        #expect(TreeDigest(signedWords: entry.signedWords) == entry)
        #expect(TreeDigest.entry(path: "A/b.txt", live: nil) == .empty)
    }

    @Test func xorIsIndependentOfOrderAndUndoesItself() {
        let x = TreeDigest.entry(path: "A/x", contentID: "1"), y = TreeDigest.entry(path: "A/y", contentID: "2")
        #expect(x ^ y == y ^ x)
        #expect(x ^ y ^ y == x)
        #expect((x ^ x).isEmpty)
    }

    @Test func foldersAreEveryProperPrefixRootFirst() {
        #expect(FolderDeltas.folders(of: "A/b/c") == ["A", "A/b"])
        #expect(FolderDeltas.folders(of: "A/b") == ["A"])
        #expect(FolderDeltas.folders(of: "A").isEmpty)
    }

    @Test func deltasLandOnEveryFolderAboveAndDirectOnTheParentOnly() {
        var deltas = FolderDeltas()
        deltas.change(path: "A/d/f", from: nil, to: "h1", tag: 7)
        deltas.change(path: "A/g", from: "h0", to: nil, tag: 9)
        let f = TreeDigest.entry(path: "A/d/f", contentID: "h1"), g = TreeDigest.entry(path: "A/g", contentID: "h0")
        #expect(deltas.folders["A"] == FolderDeltas.Delta(digest: f ^ g, direct: g, head: 9, parent: nil))
        #expect(deltas.folders["A/d"] == FolderDeltas.Delta(digest: f, direct: f, head: 7, parent: "A"))
        // A save with the content it had changes no digest, only the head.
        var same = FolderDeltas()
        same.change(path: "A/g", from: "h0", to: "h0", tag: 12)
        #expect(same.folders["A"] == FolderDeltas.Delta(digest: .empty, direct: .empty, head: 12, parent: nil))
    }
}
