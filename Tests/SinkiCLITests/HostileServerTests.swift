import Foundation
import Glibc
import SinkiTestSupport
import Testing

/// A server whose change feed lies (Fixtures/hostile_server.py): paths that climb out of the root, moves
/// from outside it or from another root, symlinks on the way to a file, names that Unicode normalization
/// would merge or turn into `..`. The agent, with two roots, refuses what it must with an error line naming
/// the path, applies the rest exactly as their bytes say, keeps running, and writes nothing outside its
/// roots: the test's folder, the roots' parent and the state folder's siblings are listed before and after.
@Suite struct HostileServerTests {
    @Test func hostileFeedWritesNothingOutsideTheRoots() async throws {
        let cluster = Cluster("sinki-hostile")
        let root = cluster.root("a")
        let other = cluster.root("a", rootName: "Other")
        let state = cluster.directory.child("a/state")
        let outside = cluster.directory.child("outside")
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        try writeFile(outside + "/victim.txt", "a file outside")
        try writeFile(other + "/secret.txt", "the other root's secret")
        // Symlinked directories inside the root that point outside it.
        try FileManager.default.createSymbolicLink(atPath: root + "/link", withDestinationPath: outside)
        try FileManager.default.createSymbolicLink(atPath: root + "/link2", withDestinationPath: outside)
        let secretInode = try #require(Entry.at(other + "/secret.txt")).inode
        let before = Entry.tree(cluster.directory.path, skipping: [root, other, state])

        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/hostile_server.py").path
        let server = try ChildProcess("/usr/bin/env", ["python3", fixture, "SaveGames", "Other", outside, "SaveGames/link/x", "SaveGames/link/deeper/y"],
                                      logDirectory: cluster.directory.path, label: "hostile")
        defer { server.stop() }
        var port = 0
        try await waitUntil("the hostile server to listen", timeout: 10) {
            port = Int(server.output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
            return port > 0
        }
        let agent = try cluster.startAgent("a", server: "http://127.0.0.1:\(port)", extra: ["--root", other])
        // The last page holds one file; the pages are applied in order.
        try await waitUntil("the three pages to be applied", timeout: 15) {
            Entry.read(root + "/good.txt") == "fine" && Entry.read(root + "/an\u{303}o.txt") == "nfd page"
        }
        let refused = ["../x", "/etc/x", "SaveGames/a/../../x", "SaveGames/../x", "SaveGames/./x", "SaveGames\\\\..\\\\x", "x"]
        try await waitUntil("an error line naming each refused path", timeout: 5) {
            let log = agent.errors
            return log.contains("ERROR") && refused.allSatisfy { log.contains("\"\($0)\"") }
        }
        #expect(agent.isRunning)
        // Files the feed puts below a symlink of the root (`link`, made by the user; `d2`, made by the
        // feed's first page): the server holds a folder there, the disk a symlink. Never written through
        // the symlink: refused, or a conflict like any other (the symlink kept aside as a conflict copy,
        // a folder of the root made in its place, the file written in it).
        // By bytes: "/\u{301}" is one Character, so Swift's split would not cut there.
        func top(_ relative: String) -> String { String(decoding: relative.utf8.prefix { $0 != UInt8(ascii: "/") }, as: UTF8.self) }
        let belowLinks = ["link/x": "pwned", "link/z": "pwned", "link/\u{301}x": "pwned", "d2/y": "pwned"]
        try await waitUntil("each file below a symlink refused or written in a folder of the root", timeout: 15) {
            let log = agent.errors
            return belowLinks.allSatisfy { relative, content in
                log.contains("ERROR") && log.contains("\"SaveGames/\(relative)\"")
                    || (Entry.at(root + "/" + top(relative))?.kind == .directory && Entry.read(root + "/" + relative) == content)
            }
        }
        for link in ["link", "d2"] where Entry.at(root + "/" + link)?.kind == .directory {
            let copies = (try? FileManager.default.contentsOfDirectory(atPath: root))?.filter { $0.hasPrefix(link + ".sync-conflict-") } ?? []
            #expect(copies.contains { Entry.at(root + "/" + $0)?.kind == .symlink }, "the symlink \(link) is kept aside, not lost")
        }

        // Nothing was written outside the roots: not in the test's folder, not beside the roots or the
        // state folder, not in the folder the symlinks point at.
        let after = Entry.tree(cluster.directory.path, skipping: [root, other, state])
        #expect(after == before, "changed outside the roots: \(Entry.difference(before, after))")
        #expect(Entry.read(outside + "/victim.txt") == "a file outside")

        // Moves: each applied as its own content; none took the other root's file or read outside.
        for number in 1...4 { #expect(Entry.read(root + "/moved-\(number).txt") == "own \(number)") }
        #expect(Entry.read(other + "/secret.txt") == "the other root's secret")
        #expect(Entry.at(other + "/secret.txt")?.inode == secretInode, "the other root's file stays where it is")
        #expect(Entry.names(other) == [Array("secret.txt".utf8)])
        // Their content came without the record and the server has none: not applied rather than taken
        // from the other root or through the symlink.
        #expect(Entry.read(root + "/stolen.txt") == nil)
        #expect(Entry.read(root + "/from-link.txt") == nil)

        // `d` and `d/x` in one page: the folder made for `x` gives way to the symlink (it is empty when the
        // symlink is renamed over it), and `x`, written through the descriptor of that removed folder,
        // fails; or `d` stays a folder holding `x`. Either way nothing lands outside, and the next page's
        // `d/x2` is refused below the symlink or lands in the folder.
        switch Entry.at(root + "/d")?.kind {
        case .symlink?:
            // `d/x2` is refused below the symlink, or, when the folder already held `x` as the symlink
            // came (a conflict: the folder is kept aside as a conflict copy), it landed in that folder.
            try await waitUntil("SaveGames/d/x2 refused or in the folder kept aside", timeout: 10) {
                if agent.errors.contains("\"SaveGames/d/x2\"") { return true }
                let copies = (try? FileManager.default.contentsOfDirectory(atPath: root))?.filter { $0.hasPrefix("d.sync-conflict-") } ?? []
                return copies.contains { Entry.read(root + "/" + $0 + "/x2") == "d x2" }
            }
        case .directory?:
            #expect(Entry.read(root + "/d/x") == "d x")
            #expect(Entry.read(root + "/d/x2") == "d x2")
        default:
            Issue.record("SaveGames/d is neither the symlink nor a folder")
        }
        // `link2`, a symlink the feed calls a folder, is a conflict (kept aside as a conflict copy, the
        // folder made in its place); `link2/w` of the same page is refused below the symlink or lands in
        // that folder of the root.
        #expect(agent.errors.contains("\"SaveGames/link2/w\"") || Entry.read(root + "/link2/w") == "pwned")

        // Names that NFKC would turn into `..` or `/`, and a joiner after a `/` (which used to end the
        // agent): each lands exactly as its bytes say, inside the root.
        #expect(Entry.read(root + "/\u{2024}\u{2024}/x") == "one dot leaders")
        #expect(Entry.read(root + "/\u{2025}") == "two dot leader")
        #expect(Entry.read(root + "/a\u{FF0F}b") == "fullwidth solidus")
        #expect(Entry.read(root + "/\u{200D}x") == "joiner")
        // NFC and NFD spellings of one name in two pages: two files, each with its own content.
        #expect(Entry.read(root + "/a\u{F1}o.txt") == "nfc page")
        #expect(Entry.read(root + "/an\u{303}o.txt") == "nfd page")

        // In one page, the two spellings are taken for one path, because `Replica.apply` keeps one record
        // per path in a `Set<String>` (Swift compares Strings by canonical equivalence) and plans file
        // writes by folder in a `[String: FileDescriptor]`: the NFC café is dropped without a word, and
        // dire\u{301}/b.txt is written into the NFC folder. Both stay inside the root, and nothing is
        // overwritten; the lead's rewrite of Replica+Apply.swift keys these by bytes.
        let log = agent.errors
        func landedOrRefused(_ relative: String, _ content: String) -> Bool {
            Entry.read(root + "/" + relative) == content || log.contains("ERROR") && log.contains("\"SaveGames/\(relative)\"")
        }
        // One page with both spellings: each is its own path (bytes, not Swift's canonical equivalence).
        #expect(landedOrRefused("caf\u{E9}.txt", "nfc"))
        #expect(landedOrRefused("dire\u{301}/b.txt", "nfd folder"))
        #expect(landedOrRefused("cafe\u{301}.txt", "nfd"))
        #expect(landedOrRefused("dir\u{E9}/a.txt", "nfc folder"))
        // Whatever each spelling holds, it is its own record's content, never the other's.
        #expect(Entry.read(root + "/caf\u{E9}.txt") != "nfd")
        #expect(Entry.read(root + "/cafe\u{301}.txt") != "nfc")
    }
}

/// Directory entries seen through Glibc, byte for byte: Swift's String compares NFC and NFD spellings as
/// equal, and FileManager's enumerator follows symlinks, so neither can say what is on disk here.
private struct Entry: Equatable, CustomStringConvertible {
    enum Kind: Equatable { case file, directory, symlink, other }
    var kind: Kind
    var size: Int64
    var inode: UInt64
    var modified: Int64

    var description: String { "\(kind) \(size) bytes, inode \(inode), mtime \(modified)" }

    /// `lstat` of `path` (its UTF-8 bytes as they are); nil when nothing is there.
    static func at(_ path: String) -> Entry? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        let kind: Kind
        switch info.st_mode & S_IFMT {
        case S_IFREG: kind = .file
        case S_IFDIR: kind = .directory
        case S_IFLNK: kind = .symlink
        default: kind = .other
        }
        return Entry(kind: kind, size: Int64(info.st_size), inode: UInt64(info.st_ino),
                     modified: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec))
    }

    /// A regular file's text (not through a symlink); nil when there is none.
    static func read(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            bytes += buffer[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The names in a folder, as bytes, sorted.
    static func names(_ directory: String) -> [[UInt8]] {
        guard let handle = opendir(directory) else { return [] }
        defer { closedir(handle) }
        var out: [[UInt8]] = []
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix { $0 != 0 }) }
            if name != [0x2E] && name != [0x2E, 0x2E] { out.append(name) }
        }
        return out.sorted { $0.lexicographicallyPrecedes($1) }
    }

    /// Every entry below `base` by its relative bytes, without following symlinks. The folders in
    /// `skipping` (the roots, the state folder) count as themselves only, not what is in them; folders
    /// by kind only, since what is added to them shows up as an entry of its own; and the test's own logs
    /// (`*.out`, `*.err` at the top) not at all, since the processes write them as the test runs.
    static func tree(_ base: String, skipping: [String]) -> [[UInt8]: Entry] {
        var out: [[UInt8]: Entry] = [:]
        var pending: [[UInt8]] = [[]]
        let skipped = Set(skipping.map { Array($0.utf8) })
        let baseBytes = Array(base.utf8)
        while let relative = pending.popLast() {
            let directory = String(decoding: relative.isEmpty ? baseBytes : baseBytes + [0x2F] + relative, as: UTF8.self)
            for name in names(directory) {
                if relative.isEmpty, name.count > 4, [Array(".out".utf8), Array(".err".utf8)].contains(Array(name.suffix(4))) { continue }
                let child = relative.isEmpty ? name : relative + [0x2F] + name
                let full = baseBytes + [0x2F] + child
                guard var entry = at(String(decoding: full, as: UTF8.self)) else { continue }
                if entry.kind == .directory {
                    entry = Entry(kind: .directory, size: 0, inode: entry.inode, modified: 0)
                    if !skipped.contains(full) { pending.append(child) }
                }
                out[child] = entry
            }
        }
        return out
    }

    static func difference(_ before: [[UInt8]: Entry], _ after: [[UInt8]: Entry]) -> String {
        Set(before.keys).union(after.keys).filter { before[$0] != after[$0] }
            .map { "\(String(decoding: $0, as: UTF8.self)): \(before[$0].map(\.description) ?? "-") -> \(after[$0].map(\.description) ?? "-")" }
            .sorted().joined(separator: "; ")
    }
}
