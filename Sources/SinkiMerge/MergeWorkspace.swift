import Glibc
import SinkiSupport

/// A fresh private folder (mode 0700) where a merge command runs, holding copies of its inputs; the
/// folder and whatever the command left in it go with the object.
final class MergeWorkspace: Sendable {
    /// Workspaces are named `merge-XXXXXX` inside the engine's folder, so leftovers from a crash can
    /// be recognised and removed.
    static let prefix = "merge-"

    let path: String

    init(in parent: String) throws(SystemError) {
        try Self.makeFolder(parent)
        var template = Array((parent + "/" + Self.prefix + "XXXXXX").utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        guard made != nil else { throw SystemError("mkdtemp", errno: errno, path: parent) }
        path = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    deinit { Self.removeTree(path) }

    /// Writes `bytes` as `name` in the folder (mode 0600); returns its path.
    func write(_ name: String, _ bytes: [UInt8]) throws(SystemError) -> String {
        let file = try FileDescriptor.open(path + "/" + name, flags: O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o600)
        try file.write(bytes)
        return file.path
    }

    /// Copies the file at `source` (not following a symlink at its end) into the folder as `name`.
    func copy(_ source: String, as name: String) throws(SystemError) -> String {
        let input = try FileDescriptor.open(source, flags: O_RDONLY | O_NOFOLLOW)
        let output = try FileDescriptor.open(path + "/" + name, flags: O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o600)
        try input.copyAll(to: output)
        return output.path
    }

    /// Creates `path` and its missing parents, mode 0700.
    static func makeFolder(_ path: String) throws(SystemError) {
        var built = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            built += "/" + component
            if mkdir(built, 0o700) != 0, errno != EEXIST { throw SystemError("mkdir", errno: errno, path: built) }
        }
    }

    /// Removes the workspaces a crashed run left in `parent`.
    static func removeLeftovers(in parent: String) throws(SystemError) {
        guard let folder = try? FileDescriptor.open(parent, flags: O_RDONLY | O_DIRECTORY) else { return }
        for name in try folder.listDirectory().names where name.hasPrefix(prefix) {
            removeTree(parent + "/" + name)
        }
    }

    /// Removes a folder and everything below it without following symlinks; errors are ignored
    /// (what cannot be removed is left for the next start).
    static func removeTree(_ path: String) {
        if let folder = try? FileDescriptor.open(path, flags: O_RDONLY | O_DIRECTORY | O_NOFOLLOW),
           let listing = try? folder.listDirectory() {
            for name in listing.names {
                let child = path + "/" + name
                if let stat = try? folder.statEntry(name), stat.kind == .directory {
                    removeTree(child)
                } else {
                    unlinkat(folder.raw, name, 0)
                }
            }
        }
        rmdir(path)
    }
}
