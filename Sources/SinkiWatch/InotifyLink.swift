import SinkiSupport

/// The watcher behind the state layer's `WatchLink`: notes of watches go to the inotify table,
/// notes of echoes to the filter that drops them.
public struct InotifyLink: WatchLink {
    public let inotify: Inotify
    public let echoes: EchoFilter

    public init(inotify: Inotify, echoes: EchoFilter) {
        self.inotify = inotify
        self.echoes = echoes
    }

    public func note(_ note: WatchNote) throws(SystemError) -> Bool {
        switch note {
        case let .watch(directory, path):
            try inotify.watch(directory, root: path.root.index, relative: path.relative)
            return true
        case let .moved(from, to):
            inotify.renameWatches(root: from.root.index, from: from.relative, to: to.relative)
            return inotify.isWatched(root: to.root.index, relative: to.relative)
        case let .expect(path, echo):
            echoes.expect(root: path.root.index, relative: path.relative, echo)
            return true
        case let .cancel(path, echo):
            echoes.cancel(root: path.root.index, relative: path.relative, echo)
            return true
        case let .isWatched(path):
            return inotify.isWatched(root: path.root.index, relative: path.relative)
        }
    }
}
