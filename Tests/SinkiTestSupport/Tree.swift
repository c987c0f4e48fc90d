import Foundation
import Glibc
import SinkiSupport

/// What a folder holds, for comparing two synced roots: each path below it with its kind, content
/// and permission bits (sinkid's own temporary files left out).
public struct TreeSnapshot: Equatable, CustomStringConvertible {
    public var entries: [String: String]

    /// With `content: false`, files are described by size, mtime and mode only (cheap to poll);
    /// with `true`, by a hash of their bytes too.
    public init(_ root: String, content: Bool = true) {
        entries = [:]
        let manager = FileManager.default
        // A walk of our own: FileManager's enumerator follows symbolic links to directories.
        var pending = [""]
        while let relativeDirectory = pending.popLast() {
            let directory = relativeDirectory.isEmpty ? root : root + "/" + relativeDirectory
            guard let names = try? manager.contentsOfDirectory(atPath: directory) else { continue }
            for name in names where !name.hasPrefix(".sinki-tmp-") {
                let relative = relativeDirectory.isEmpty ? name : relativeDirectory + "/" + name
                let path = root + "/" + relative
                guard let attributes = try? manager.attributesOfItem(atPath: path) else { continue }
                let type = attributes[.type] as? FileAttributeType
                let mode = (attributes[.posixPermissions] as? Int).map { String($0, radix: 8) } ?? "?"
                switch type {
                case .typeDirectory?:
                    entries[relative] = "dir"
                    pending.append(relative)
                case .typeSymbolicLink?:
                    entries[relative] = "link:" + ((try? manager.destinationOfSymbolicLink(atPath: path)) ?? "?")
                case .typeRegular?:
                    if content {
                        let data = manager.contents(atPath: path) ?? Data()
                        let hash = Digest.sha256Hex(Array(data)).prefix(16)
                        entries[relative] = "file:\(data.count):\(hash):\(mode)"
                    } else {
                        let size = (attributes[.size] as? Int) ?? -1
                        let modified = (attributes[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0
                        entries[relative] = "file:\(size):\(modified):\(mode)"
                    }
                default: continue // fifos, sockets, devices: never synced
                }
            }
        }
    }

    public var description: String {
        entries.keys.sorted().map { "\($0) \(entries[$0]!)" }.joined(separator: "\n")
    }

    /// The paths that differ between two snapshots, for failure messages.
    public func difference(_ other: TreeSnapshot) -> [String] {
        let keys = Set(entries.keys).union(other.entries.keys)
        return keys.filter { entries[$0] != other.entries[$0] }.sorted().map { "\($0): \(entries[$0] ?? "-") vs \(other.entries[$0] ?? "-")" }
    }
}

/// Writes `text` to `path`, making parent folders.
public func writeFile(_ path: String, _ text: String) throws {
    try writeFile(path, Data(text.utf8))
}

public func writeFile(_ path: String, _ data: Data) throws {
    let url = URL(fileURLWithPath: path)
    try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
    // Written beside and renamed, as editors do, so a watcher never sees it half-done.
    try data.write(to: url, options: .atomic)
}

public func readFile(_ path: String) -> String? {
    FileManager.default.contents(atPath: path).map { String(decoding: $0, as: UTF8.self) }
}

/// Everything in a root with full SHA-256s, walked with lstat (no symbolic link followed): for the
/// fault suite's checks, which compare roots with each other, with the server's records and with
/// the versions the harness wrote. sinkid's temporary files are listed apart.
public struct RootContents: Equatable {
    public struct Entry: Equatable, CustomStringConvertible {
        public var kind: String // "dir", "file", "link" or "other"
        public var size: Int
        public var sha256: String
        public var mode: UInt32

        public init(kind: String, size: Int, sha256: String, mode: UInt32) {
            (self.kind, self.size, self.sha256, self.mode) = (kind, size, sha256, mode)
        }

        public var description: String {
            kind == "file" ? "file \(size) B \(sha256.prefix(12)) mode \(String(mode, radix: 8))" : kind
        }
    }

    public var entries: [String: Entry] = [:]
    /// `.sinki-tmp-*` entries, which a settled root must not hold.
    public var temporaryFiles: [String] = []

    public init(_ root: String) {
        var pending = [""]
        while let relative = pending.popLast() {
            for (name, _) in directoryEntries(relative.isEmpty ? root : root + "/" + relative) {
                let path = relative.isEmpty ? name : relative + "/" + name
                if name.hasPrefix(".sinki-tmp-") {
                    temporaryFiles.append(path)
                    continue
                }
                var info = stat()
                guard lstat(root + "/" + path, &info) == 0 else { continue }
                let mode = UInt32(info.st_mode) & 0o7777
                switch info.st_mode & S_IFMT {
                case S_IFDIR:
                    // A folder's mode is not synced (TreeSnapshot leaves it out too).
                    entries[path] = Entry(kind: "dir", size: 0, sha256: "", mode: 0)
                    pending.append(path)
                case S_IFREG:
                    let bytes = FileManager.default.contents(atPath: root + "/" + path).map { Array($0) } ?? []
                    entries[path] = Entry(kind: "file", size: bytes.count, sha256: ContentID.of(bytes), mode: mode)
                case S_IFLNK:
                    entries[path] = Entry(kind: "link", size: 0, sha256: "", mode: mode)
                default:
                    entries[path] = Entry(kind: "other", size: 0, sha256: "", mode: mode)
                }
            }
        }
        temporaryFiles.sort()
    }

    /// Paths whose entries differ, as `path: this vs other` lines.
    public func difference(_ other: RootContents) -> [String] {
        Set(entries.keys).union(other.entries.keys).filter { entries[$0] != other.entries[$0] }.sorted()
            .map { "\($0): \(entries[$0]?.description ?? "-") vs \(other.entries[$0]?.description ?? "-")" }
    }
}

/// A cheap description of a root for polling (kind, size and mode per path, and with `times` the
/// mtime; no reads; sinkid's temporary files left out).
public func quickListing(_ root: String, times: Bool = true) -> [String: String] {
    var out: [String: String] = [:]
    var pending = [""]
    while let relative = pending.popLast() {
        for (name, isDirectory) in directoryEntries(relative.isEmpty ? root : root + "/" + relative) where !name.hasPrefix(".sinki-tmp-") {
            let path = relative.isEmpty ? name : relative + "/" + name
            if isDirectory {
                out[path] = "dir"
                pending.append(path)
                continue
            }
            var info = stat()
            guard lstat(root + "/" + path, &info) == 0 else { continue }
            out[path] = "\(info.st_mode):\(info.st_size)" + (times ? ":\(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec)" : "")
        }
    }
    return out
}

/// The bytes of the files directly in `directory` whose names `counts` takes (a file gone while looked
/// at counts 0): what a server or a peer holds in an upload folder.
public func bytesOfFiles(in directory: String, where counts: (String) -> Bool = { _ in true }) -> Int {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
    return names.filter(counts).reduce(0) { total, name in
        total + (((try? FileManager.default.attributesOfItem(atPath: directory + "/" + name))?[.size] as? Int) ?? 0)
    }
}
