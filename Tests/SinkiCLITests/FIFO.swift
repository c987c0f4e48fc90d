import Glibc
import SinkiTestSupport

/// A named pipe a test hands to `sinkid` as a file (a config): the agent blocks opening it until the
/// test writes it, which holds the agent at that point of its start.
struct FIFO {
    let path: String

    init(_ path: String) throws {
        guard mkfifo(path, 0o600) == 0 else { throw FIFOFailed(what: "mkfifo \(path): \(String(cString: strerror(errno)))") }
        self.path = path
    }

    /// Writes `text` once `process` has the pipe open for reading (open is tried without blocking:
    /// ENXIO until then), and closes it: the reader then sees the end.
    func write(_ text: String, to process: ChildProcess, _ what: String) async throws {
        var writer: Int32 = -1
        try await waitUntil("\(what) to open \(path)", timeout: 10) {
            writer = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
            return writer >= 0 || !process.isRunning
        }
        guard writer >= 0 else { throw FIFOFailed(what: "\(what) ended before it opened \(path):\n\(process.errors)") }
        defer { close(writer) }
        let bytes = Array(text.utf8)
        guard Glibc.write(writer, bytes, bytes.count) == bytes.count else { throw FIFOFailed(what: "write \(path): \(String(cString: strerror(errno)))") }
    }
}

struct FIFOFailed: Error, CustomStringConvertible {
    var what: String
    var description: String { what }
}
