import Foundation
import Glibc
import Testing
@testable import SinkiSupport

/// `SafeRoot` splits relative paths on `/` bytes, as the kernel does.
@Suite struct SafeRootTests {
    /// `link/\u{301}x`: to `String` the `/` and the combining mark are one Character, so `name(of:)` was the
    /// whole path and `folderPrefix(of:)` empty; the agent then created `link/\u{301}x` in the root's own
    /// descriptor, and the kernel followed `link` out of the root (a hostile feed wrote outside it).
    @Test(arguments: [("link/\u{301}x", "link/", "\u{301}x"), ("a/b\u{200D}/\u{200D}", "a/b\u{200D}/", "\u{200D}"), ("top", "", "top")])
    func nameAndFolderSplitOnTheLastSlashByte(_ relative: String, _ folder: String, _ name: String) {
        #expect(Array(SafeRoot.folderPrefix(of: relative).utf8) == Array(folder.utf8))
        #expect(Array(SafeRoot.name(of: relative).utf8) == Array(name.utf8))
    }

    @Test func aSymlinkBeforeACombiningMarkStopsTheWrite() throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("sinki-saferoot-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
        let root = base + "/root", outside = base + "/outside"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: base) }
        try FileManager.default.createSymbolicLink(atPath: root + "/link", withDestinationPath: outside)
        let safe = try SafeRoot(path: root)
        var made: [String] = []
        #expect(throws: SafeRootError.self) { try safe.openParent(of: "link/\u{301}x", create: true, made: &made) }
        #expect(throws: SafeRootError.self) { try safe.open("link/\u{301}x", flags: O_WRONLY | O_CREAT) }
        #expect(throws: SafeRootError.self) { try safe.stat("link/\u{301}x/y") }
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside).isEmpty)
    }
}
