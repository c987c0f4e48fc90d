import Glibc

/// A failed system call: which call, on what, and the errno it returned.
public struct SystemError: Error, Sendable, Equatable, CustomStringConvertible {
    public var call: String
    public var errno: Int32
    public var path: String?

    public init(_ call: String, errno: Int32, path: String? = nil) {
        self.call = call
        self.errno = errno
        self.path = path
    }

    public var message: String { String(cString: strerror(errno)) }

    public var description: String {
        if let path { return "\(call) \(path): \(message)" }
        return "\(call): \(message)"
    }
}

/// Runs a system call, retrying on EINTR; a -1 result throws a SystemError naming the call.
@discardableResult
public func syscall<T: FixedWidthInteger>(_ call: String, path: String? = nil, _ body: () -> T) throws(SystemError) -> T {
    while true {
        let result = body()
        if result != -1 { return result }
        let code = Glibc.errno
        if code == EINTR { continue }
        precondition(code != EBADF && code != EFAULT, "bug: \(call) got \(code == EBADF ? "EBADF" : "EFAULT")")
        throw SystemError(call, errno: code, path: path)
    }
}
