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
            try inotify.watch(directory, path)
            return true
        case let .moved(from, to):
            inotify.renameWatches(from: from, to: to)
            return inotify.isWatched(to)
        case let .expect(path, echo):
            // In a folder with no watch (yet) the event never comes: nothing to expect.
            guard let watch = inotify.watchOfParent(path) else { return false }
            echoes.expect(path, echo, watch: watch)
            return true
        case let .cancel(path, echo):
            if let watch = inotify.watchOfParent(path) { echoes.cancel(path, echo, watch: watch) }
            return true
        case let .isWatched(path):
            return inotify.isWatched(path)
        }
    }
}
