import Glibc
import SinkiLoop
import SinkiSupport

/// One entry found on disk by a walk: its path below the root and what lstat says.
public struct DiskEntry: Sendable, Equatable {
    /// `/`-separated path below the root; never empty.
    public var relative: String
    public var stat: FileStat

    public init(relative: String, stat: FileStat) {
        self.relative = relative
        self.stat = stat
    }
}

/// What a walk found besides the entries: things it could not or would not sync.
public struct WalkReport: Sendable {
    public var entries: [DiskEntry] = []
    /// Names that are not valid UTF-8, as the bytes of their parent path and name.
    public var invalidNames: [String] = []
    /// fifos, sockets and devices (listed in status as skipped).
    public var special: [String] = []
    /// Directories that could not be read, with the error.
    public var errors: [String] = []
    /// Entries left out by ignore rules (an ignored directory counts once: it is not walked).
    public var ignored = 0
    /// sinkid's own temporary files (`.sinki-tmp-*`), never synced: a kill in the middle of a write can
    /// leave one, which the first walk after a start removes.
    public var temporaries: [String] = []
    public init() {}
}

/// Walks a directory tree with `openat`/`fstatat` relative to directory descriptors, never
/// following symlinks, so a walk cannot leave its root however the tree changes under it.
public struct TreeWalker: Sendable {
    /// Called for each directory before it is listed (with its open descriptor), so a watch can be
    /// placed before the listing and nothing created meanwhile is missed. Called from several
    /// threads at once: the subtrees of the starting directory are walked in parallel.
    public var beforeListing: (@Sendable (FileDescriptor, String) -> Void)?
    /// Whether a path below the root is ignored (it is neither listed nor descended into).
    public var isIgnored: (@Sendable (String, Bool) -> Bool)?

    public init(beforeListing: (@Sendable (FileDescriptor, String) -> Void)? = nil, isIgnored: (@Sendable (String, Bool) -> Bool)? = nil) {
        self.beforeListing = beforeListing
        self.isIgnored = isIgnored
    }

    /// Walks the directory `relative` below `root` (`""` for the whole root). The starting directory
    /// itself is not an entry. Its subdirectories are walked on Dispatch's threads: a walk is
    /// system calls, one `fstatat` per entry, and two cores halve it.
    public func walk(root: FileDescriptor, relative: String) throws(SystemError) -> WalkReport {
        var report = WalkReport()
        let start: FileDescriptor
        if relative.isEmpty {
            start = root
        } else {
            start = try FileDescriptor.open(relative, flags: O_RDONLY | O_DIRECTORY | O_NOFOLLOW, relativeTo: root,
                                            displayPath: root.path + "/" + relative)
        }
        var deferred: [Subdirectory]? = []
        walkDirectory(start, relative: relative, into: &report, deferring: &deferred)
        let subdirectories = deferred ?? []
        let parent = start.raw, parentPath = start.path
        let subreports = withExtendedLifetime(start) {
            Blocking.map(subdirectories) { sub -> WalkReport in
                var subreport = WalkReport()
                walkSubdirectory(sub.name, of: parent, parentPath: parentPath, relative: sub.relative, into: &subreport)
                return subreport
            }
        }
        for subreport in subreports {
            report.entries += subreport.entries
            report.invalidNames += subreport.invalidNames
            report.special += subreport.special
            report.errors += subreport.errors
            report.ignored += subreport.ignored
            report.temporaries += subreport.temporaries
        }
        return report
    }

    /// A directory found in the starting one, walked later on its own thread.
    struct Subdirectory: Sendable {
        var name: String
        var relative: String
    }

    /// Lists `directory` and stats its entries; a subdirectory is walked at once, or, when
    /// `deferring` is not nil, added to it for later.
    private func walkDirectory(_ directory: FileDescriptor, relative: String, into report: inout WalkReport,
                               deferring: inout [Subdirectory]?) {
        beforeListing?(directory, relative)
        let listing: (names: [String], invalid: [[UInt8]])
        do {
            listing = try directory.listDirectory()
        } catch {
            report.errors.append("\(error)")
            return
        }
        for bytes in listing.invalid {
            report.invalidNames.append((relative.isEmpty ? "" : relative + "/") + String(decoding: bytes, as: UTF8.self))
        }
        for name in listing.names {
            let path = relative.isEmpty ? name : relative + "/" + name
            if TempNames.isTemporary(name) {
                report.temporaries.append(path)
                continue
            }
            let stat: FileStat?
            do { stat = try directory.statEntry(name) } catch {
                report.errors.append("\(error)")
                continue
            }
            guard let stat else { continue } // removed while we listed
            if isIgnored?(path, stat.kind == .directory) == true {
                report.ignored += 1
                continue
            }
            switch stat.kind {
            case .special:
                report.special.append(path)
            case .file, .symlink:
                report.entries.append(DiskEntry(relative: path, stat: stat))
            case .directory:
                report.entries.append(DiskEntry(relative: path, stat: stat))
                if deferring != nil {
                    deferring!.append(Subdirectory(name: name, relative: path))
                    continue
                }
                walkSubdirectory(name, of: directory.raw, parentPath: directory.path, relative: path, into: &report)
            }
        }
    }

    /// Opens the directory `name` in `parent` (open for the whole call) and walks it whole. One
    /// replaced by something else since its stat is left out: its own event brings it back.
    private func walkSubdirectory(_ name: String, of parent: Int32, parentPath: String, relative: String, into report: inout WalkReport) {
        let fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            if errno != ENOENT && errno != ENOTDIR && errno != ELOOP {
                report.errors.append("\(SystemError("open", errno: errno, path: parentPath + "/" + name))")
            }
            return
        }
        var none: [Subdirectory]?
        walkDirectory(FileDescriptor(raw: fd, path: parentPath + "/" + name), relative: relative, into: &report, deferring: &none)
    }
}
