import Foundation
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
