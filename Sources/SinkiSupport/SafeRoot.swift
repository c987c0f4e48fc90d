import CSystemShim
import Glibc

/// Why a path below a root could not be reached safely.
public enum SafeRootError: Error, Sendable, CustomStringConvertible {
    /// A component on the way is a symbolic link (or a `..`): following it could leave the root.
    case symlinkInPath(String)
    case system(SystemError)

    public var description: String {
        switch self {
        case let .symlinkInPath(path): return "\(path): a symbolic link in the path would lead outside the root; refused"
        case let .system(error): return error.description
        }
    }

    public var errno: Int32? {
        if case let .system(error) = self { return error.errno }
        return nil
    }
}

/// A synced folder opened once; every file below it is reached relative to this descriptor and
/// never through a symbolic link, whatever a peer's record or a racing rename says.
public final class SafeRoot: Sendable {
    public let path: String
    public let fd: Int32

    public init(path: String) throws(SystemError) {
        self.path = path
        fd = try syscall("open", path: path) { Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
    }

    deinit { close(fd) }

    /// The root as a borrowed FileDescriptor (the SafeRoot keeps ownership).
    public func descriptor() throws(SystemError) -> FileDescriptor {
        let copy = try syscall("dup", path: path) { fcntl(fd, F_DUPFD_CLOEXEC, 0) }
        return FileDescriptor(raw: copy, path: path)
    }

    /// Flushes the file system holding the root: one call makes a whole batch of writes durable.
    public func syncFileSystem() throws(SystemError) {
        try syscall("syncfs", path: path) { sinki_syncfs(fd) }
    }

    /// Opens `relative` (no `..`, no symlinks anywhere on the way, including the last component).
    public func open(_ relative: String, flags: Int32, mode: mode_t = 0o644) throws(SafeRootError) -> FileDescriptor {
        let shown = path + "/" + relative
        let fd = sinki_openat_beneath(self.fd, relative, flags | O_CLOEXEC | O_NOFOLLOW, mode)
        if fd >= 0 { return FileDescriptor(raw: fd, path: shown) }
        let code = Glibc.errno
        switch code {
        case ELOOP, EXDEV: throw .symlinkInPath(shown)
        case ENOSYS: return try walkOpen(relative, flags: flags, mode: mode)
        case ENOTDIR where symlinkOnTheWay(relative):
            // A symlink where a directory was expected reports ENOTDIR: say what it really is.
            throw .symlinkInPath(shown)
        default: throw .system(SystemError("open", errno: code, path: shown))
        }
    }

    /// Opens the entry at `relative` itself (`O_PATH`, never following a symlink, the last component
    /// included): enough for `fstat` and the calls through its `/proc/self/fd` name, and for a file this
    /// user may not read.
    public func openEntry(_ relative: String) throws(SafeRootError) -> FileDescriptor {
        try open(relative, flags: sinki_path_only_flag())
    }

    /// The components of `relative`, split on every `/` byte as the kernel splits it. `String`'s own
    /// `split(separator: "/")` and `lastIndex(of: "/")` see Characters, and a `/` followed by a combining
    /// mark (`a/\u{301}b`) is one Character that is not "/": the kernel would then walk a component, and
    /// follow a symlink in it, that these functions never saw.
    static func components(of relative: String, omittingEmpty: Bool = true) -> [String] {
        relative.utf8.split(separator: slash, omittingEmptySubsequences: omittingEmpty).map { String($0)! }
    }

    private static let slash = UInt8(ascii: "/")

    /// Whether a component of `relative` (the last one included) is a symbolic link.
    private func symlinkOnTheWay(_ relative: String) -> Bool {
        var built = ""
        for component in Self.components(of: relative) {
            built = built.isEmpty ? String(component) : built + "/" + component
            var info = Glibc.stat()
            guard fstatat(fd, built, &info, AT_SYMLINK_NOFOLLOW) == 0 else { return false }
            if info.st_mode & S_IFMT == S_IFLNK { return true }
        }
        return false
    }

    /// Component-by-component fallback for kernels without openat2.
    private func walkOpen(_ relative: String, flags: Int32, mode: mode_t) throws(SafeRootError) -> FileDescriptor {
        let components = Self.components(of: relative, omittingEmpty: false)
        var current: FileDescriptor
        do { current = try descriptor() } catch { throw .system(error) }
        for (index, component) in components.enumerated() {
            if component == ".." || component == "." || component.isEmpty { throw .symlinkInPath(path + "/" + relative) }
            let last = index == components.count - 1
            let stepFlags = last ? flags | O_NOFOLLOW : O_RDONLY | O_DIRECTORY | O_NOFOLLOW
            let fd = openat(current.raw, component, stepFlags | O_CLOEXEC, mode)
            if fd < 0 {
                let code = Glibc.errno
                if code == ELOOP || (code == ENOTDIR && !last) {
                    if let stat = try? current.statEntry(component), stat.kind == .symlink { throw .symlinkInPath(path + "/" + relative) }
                }
                throw .system(SystemError("open", errno: code, path: path + "/" + relative))
            }
            current = FileDescriptor(raw: fd, path: path + "/" + components[0...index].joined(separator: "/"))
        }
        return current
    }

    /// The last component of `relative`: the entry's name in the folder `openParent` opens.
    public static func name(of relative: String) -> String {
        relative.utf8.lastIndex(of: slash).map { String(relative.utf8[relative.utf8.index(after: $0)...])! } ?? relative
    }

    /// Everything of `relative` before its name, with the slash (`a/b/` for `a/b/c`; empty at the top).
    public static func folderPrefix(of relative: String) -> String {
        relative.utf8.lastIndex(of: slash).map { String(relative.utf8[...$0])! } ?? ""
    }

    /// Opens the directory holding `relative`; with `create`, makes missing directories on the way
    /// (mode 0755) and reports each one made, parent first. `willMake` runs right before a directory
    /// is made, and `didNotMake` when that mkdir then failed (someone else made it meanwhile, say).
    public func openParent(of relative: String, create: Bool, made: inout [String],
                           willMake: ((String) -> Void)? = nil, didNotMake: ((String) -> Void)? = nil) throws(SafeRootError) -> FileDescriptor {
        guard let slash = relative.utf8.lastIndex(of: Self.slash) else {
            do { return try descriptor() } catch { throw .system(error) }
        }
        let parent = String(relative.utf8[..<slash])!
        do {
            return try open(parent, flags: O_RDONLY | O_DIRECTORY)
        } catch let error where create && error.errno == ENOENT {
            var built = ""
            var current: FileDescriptor
            do { current = try descriptor() } catch { throw .system(error) }
            for component in Self.components(of: parent) {
                built = built.isEmpty ? component : built + "/" + component
                let exists = (try? current.statEntry(String(component))) ?? nil
                if exists == nil { willMake?(built) }
                if mkdirat(current.raw, String(component), 0o755) == 0 {
                    made.append(built)
                } else {
                    let code = Glibc.errno
                    if exists == nil { didNotMake?(built) }
                    if code != EEXIST { throw .system(SystemError("mkdir", errno: code, path: path + "/" + built)) }
                }
                let fd = openat(current.raw, String(component), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                if fd < 0 {
                    let code = Glibc.errno
                    if code == ELOOP || code == ENOTDIR {
                        if let stat = try? current.statEntry(String(component)), stat.kind == .symlink {
                            throw .symlinkInPath(path + "/" + built)
                        }
                    }
                    throw .system(SystemError("open", errno: code, path: path + "/" + built))
                }
                current = FileDescriptor(raw: fd, path: path + "/" + built)
            }
            return current
        }
    }

    /// `lstat` of `relative`; nil when it (or a parent) does not exist.
    public func stat(_ relative: String) throws(SafeRootError) -> FileStat? {
        var made: [String] = []
        let parent: FileDescriptor
        do {
            parent = try openParent(of: relative, create: false, made: &made)
        } catch let error where error.errno == ENOENT || error.errno == ENOTDIR {
            return nil
        }
        do { return try parent.statEntry(Self.name(of: relative)) } catch { throw .system(error) }
    }
}
