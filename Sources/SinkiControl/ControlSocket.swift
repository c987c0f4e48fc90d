import CSocketShim
import Glibc
import SinkiSupport

/// Where a running agent answers: `control.sock` in its state folder (design §1).
public enum ControlSocket {
    public static let fileName = "control.sock"

    /// `sun_path` holds 108 bytes with the terminating NUL.
    static let maxPath = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    /// The socket of the agent using `stateDirectory`.
    public static func path(stateDirectory: String) -> String { stateDirectory + "/" + fileName }

    /// A name that `bind` and `connect` take for `name` inside `directory`: the plain path when it
    /// fits `sun_path`, else the same file reached through the open directory (`/proc/self/fd/N/…`).
    static func address(of name: String, in directory: FileDescriptor, directoryPath: String) -> String {
        let plain = directoryPath + "/" + name
        return plain.utf8.count <= maxPath ? plain : "/proc/self/fd/\(directory.raw)/\(name)"
    }

    /// Opens a folder for `*at` calls and for reaching it through `/proc/self/fd`.
    static func openDirectory(_ path: String) throws(SystemError) -> FileDescriptor {
        try FileDescriptor.open(path, flags: O_RDONLY | O_DIRECTORY)
    }

    /// The process and user at the other end of a connected Unix socket.
    public static func peer(of fd: Int32) throws(SystemError) -> (pid: pid_t, uid: uid_t) {
        var pid: pid_t = 0
        var uid: uid_t = 0
        try syscall("getsockopt(SO_PEERCRED)") { sinki_peer_credentials(fd, &pid, &uid) }
        return (pid, uid)
    }

    /// Fills a `sockaddr_un` for `path` (a leading `@` names an abstract socket, as systemd writes
    /// `NOTIFY_SOCKET`); nil when it does not fit. Returns the address and its length.
    static func address(_ path: String) -> (sockaddr_un, socklen_t)? {
        var bytes = Array(path.utf8)
        let abstract = bytes.first == UInt8(ascii: "@")
        if abstract { bytes[0] = 0 }
        guard !bytes.isEmpty, bytes.count <= maxPath else { return nil }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        let base = MemoryLayout<sockaddr_un>.offset(of: \sockaddr_un.sun_path)!
        // An abstract name is exactly its bytes; a path also counts its NUL.
        return (address, socklen_t(base + bytes.count + (abstract ? 0 : 1)))
    }
}
