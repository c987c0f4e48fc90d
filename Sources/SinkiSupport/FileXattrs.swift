import CSystemShim
import Glibc

/// The extended attributes of the inode a descriptor holds (issue 25), through `CSystemShim`'s
/// `/proc/self/fd` calls, so that an `O_PATH` descriptor of the entry itself serves too: a file is
/// reached below its root without following a symlink, then its attributes are read or set on that
/// very inode. Only for regular files (the caller checks the kind with `fstat` first).
extension FileDescriptor {
    /// The names of its attributes, every namespace, as the kernel lists them (bytes: a name need not
    /// be UTF-8). Empty where the file system keeps none (`ENOTSUP`).
    public func xattrNames() throws(SystemError) -> [[UInt8]] {
        for _ in 0..<8 {
            let size = sinki_list_xattrs(raw, nil, 0)
            if size < 0 {
                if errno == ENOTSUP { return [] }
                throw SystemError("listxattr", errno: errno, path: path)
            }
            if size == 0 { return [] }
            var list = [UInt8](repeating: 0, count: Int(size))
            let got = list.withUnsafeMutableBytes { sinki_list_xattrs(raw, $0.baseAddress!.assumingMemoryBound(to: CChar.self), UInt(size)) }
            if got < 0 {
                // Grown since its size was asked: asked again.
                if errno == ERANGE { continue }
                if errno == ENOTSUP { return [] }
                throw SystemError("listxattr", errno: errno, path: path)
            }
            return list[0..<Int(got)].split(separator: 0).map(Array.init)
        }
        throw SystemError("listxattr", errno: ERANGE, path: path)
    }

    /// The size of attribute `name`'s value; nil when the file has none of that name.
    public func xattrSize(_ name: String) throws(SystemError) -> Int? {
        let size = sinki_get_xattr(raw, name, nil, 0)
        if size >= 0 { return Int(size) }
        if errno == ENODATA { return nil }
        throw SystemError("getxattr", errno: errno, path: path)
    }

    /// The value of attribute `name`; nil when the file has none of that name.
    public func xattr(_ name: String) throws(SystemError) -> [UInt8]? {
        for _ in 0..<8 {
            guard let size = try xattrSize(name) else { return nil }
            var value = [UInt8](repeating: 0, count: size)
            let got = value.withUnsafeMutableBytes { sinki_get_xattr(raw, name, $0.baseAddress, UInt(size)) }
            if got >= 0 { return Array(value[0..<Int(got)]) }
            if errno == ENODATA { return nil }
            // Grown since its size was asked: asked again.
            if errno != ERANGE { throw SystemError("getxattr", errno: errno, path: path) }
        }
        throw SystemError("getxattr", errno: ERANGE, path: path)
    }

    /// Sets attribute `name` to `value` (made or replaced).
    public func setXattr(_ name: String, _ value: [UInt8]) throws(SystemError) {
        let status = value.withUnsafeBytes { sinki_set_xattr(raw, name, $0.baseAddress, UInt($0.count)) }
        if status != 0 { throw SystemError("setxattr", errno: errno, path: path) }
    }

    /// Removes attribute `name`; one that is not there is no error.
    public func removeXattr(_ name: String) throws(SystemError) {
        if sinki_remove_xattr(raw, name) != 0 && errno != ENODATA { throw SystemError("removexattr", errno: errno, path: path) }
    }
}
