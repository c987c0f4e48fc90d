import Glibc
import SinkiSupport

/// A secret written where only its owner can read it, whole or not at all: `serve token add --output`.
enum SecretFile {
    /// Writes `text` to `path` with mode 0600 through a temporary name beside it, so an agent reading
    /// the file never sees half a token; missing folders are made 0700.
    static func write(_ text: String, to path: String) throws(UsageError) {
        let parent = PathText.folder(of: path)
        let folder = parent.isEmpty ? (path.hasPrefix("/") ? "/" : ".") : parent
        do {
            try makeFolders(folder)
            let temporary = folder + "/.sinki-token-\(getpid())"
            let file = try FileDescriptor.open(temporary, flags: O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o600)
            do {
                try file.write(Array(text.utf8))
                try file.sync()
            } catch {
                unlink(temporary)
                throw error
            }
            guard rename(temporary, path) == 0 else {
                let code = errno
                unlink(temporary)
                throw SystemError("rename", errno: code, path: path)
            }
        } catch {
            throw UsageError("cannot write the token to \(path): \(error)", code: .ioError)
        }
    }

    private static func makeFolders(_ folder: String) throws(SystemError) {
        guard !folder.isEmpty, access(folder, F_OK) != 0 else { return }
        try makeFolders(PathText.folder(of: folder))
        if mkdir(folder, 0o700) != 0 && errno != EEXIST { throw SystemError("mkdir", errno: errno, path: folder) }
    }
}
