import Glibc
import SinkiSupport

/// A file's extended attributes for the tests, as `setfattr` and `getfattr` would set and read them (the
/// agent's own `FileDescriptor` calls; the Glibc module has no <sys/xattr.h>).
public enum Xattrs {
    public static func set(_ path: String, _ name: String, _ value: String) throws { try set(path, name, Array(value.utf8)) }

    public static func set(_ path: String, _ name: String, _ value: [UInt8]) throws {
        try FileDescriptor.open(path, flags: O_RDONLY).setXattr(name, value)
    }

    public static func remove(_ path: String, _ name: String) throws { try FileDescriptor.open(path, flags: O_RDONLY).removeXattr(name) }

    /// The value of `name` as text; nil when the file has none (or is not there).
    public static func get(_ path: String, _ name: String) -> String? {
        guard let file = try? FileDescriptor.open(path, flags: O_RDONLY), let value = try? file.xattr(name) else { return nil }
        return String(decoding: value, as: UTF8.self)
    }

    /// The names of the file's attributes in the `user.` namespace, sorted.
    public static func userNames(_ path: String) -> [String] {
        guard let file = try? FileDescriptor.open(path, flags: O_RDONLY), let names = try? file.xattrNames() else { return [] }
        return names.map { String(decoding: $0, as: UTF8.self) }.filter { $0.hasPrefix("user.") }.sorted()
    }

    /// The file's inode and ctime (nanoseconds), or nil when it is not there.
    public static func identity(_ path: String) -> (inode: UInt64, ctime: Int64)? {
        guard let stat = try? FileDescriptor.open(path, flags: O_RDONLY).stat() else { return nil }
        return (stat.inode, stat.ctime)
    }
}
