/// What one of the agent's own writes shows up as to the watcher: its echo, dropped there once.
public enum WriteEcho: Sendable, Hashable {
    case fileIn, fileGone, directoryMade, directoryGone
    /// The writes and close of an anonymous (O_TMPFILE) file, reported under the name `#INODE`.
    case anonymous
    /// A file or directory renamed away by the agent itself.
    case movedAway
}

/// One thing the replica tells the watcher about its own doings on disk, or asks it.
public enum WatchNote {
    /// Watch this open directory, known as `path` (a walk opened it, or a write made it).
    case watch(FileDescriptor, LocalPath)
    /// A directory moved inside its root: its watches, and those below it, now stand for `to`.
    case moved(from: LocalPath, to: LocalPath)
    /// A write is about to cause `echo` at the path (answers false, expecting nothing, when the path's
    /// folder has no watch: its event will not come).
    case expect(LocalPath, WriteEcho)
    /// The write announced with `expect` did not happen.
    case cancel(LocalPath, WriteEcho)
    /// Only asks: is the directory watched?
    case isWatched(LocalPath)
}

/// The watcher as the state layer reaches it: one call, so the replica neither knows inotify nor how
/// echoes are matched, and the agent plugs in the real watcher (or none, for a one-off look).
public protocol WatchLink: Sendable {
    /// Carries out `note`; true when the note's directory is watched afterwards (for `watch`,
    /// `moved` and `isWatched`; the echo notes answer true).
    @discardableResult
    func note(_ note: WatchNote) throws(SystemError) -> Bool
}

/// The notes by name, for callers that need no answer (an echo note cannot fail).
extension WatchLink {
    public func watch(_ directory: FileDescriptor, _ path: LocalPath) throws(SystemError) { try note(.watch(directory, path)) }
    public func moved(from: LocalPath, to: LocalPath) { _ = try? note(.moved(from: from, to: to)) }
    public func expect(_ path: LocalPath, _ echo: WriteEcho) { _ = try? note(.expect(path, echo)) }
    public func cancel(_ path: LocalPath, _ echo: WriteEcho) { _ = try? note(.cancel(path, echo)) }
    public func isWatched(_ path: LocalPath) -> Bool { (try? note(.isWatched(path))) ?? false }
}
