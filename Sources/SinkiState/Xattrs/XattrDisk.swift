import CSystemShim
import Glibc
import SinkiRecord
import SinkiSupport

/// Reading and writing the extended attributes of a file below a root (issue 25). Only the names the
/// policy covers are ever read or written; every call goes through a descriptor of the file itself,
/// opened below its root without following a symlink.
enum XattrDisk {
    /// What a file holds of the attributes the policy covers, within the bounds, and what of them
    /// cannot be sent (each said for people: status lists them as skipped).
    struct Reading: Sendable, Equatable {
        var own = ExtendedAttributes.none
        var leftOut: [String] = []
    }

    /// Reads the covered attributes of the regular file `file` holds. A file system without extended
    /// attributes holds none.
    static func read(_ file: FileDescriptor, policy: XattrPolicy) throws(SystemError) -> Reading {
        var reading = Reading()
        if policy.isOff { return reading }
        var entries: [ExtendedAttributes.Entry] = []
        var total = 0
        let names = try file.xattrNames().compactMap { bytes -> String? in
            guard let name = String(validating: bytes, as: UTF8.self) else {
                // Never a name the policy covers: a record names attributes in UTF-8.
                if bytes.starts(with: ExtendedAttributes.namespace.utf8) {
                    reading.leftOut.append("an extended attribute whose name is not valid UTF-8 is not sent")
                }
                return nil
            }
            return policy.covers(name) ? name : nil
        }.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        for name in names {
            // The size first: a value past the bound is never read whole.
            guard let size = try file.xattrSize(name) else { continue }
            guard size <= ExtendedAttributes.Limits.valueBytes else {
                reading.leftOut.append("extended attribute \(name) is not sent: its value of \(size) bytes is over \(ExtendedAttributes.Limits.valueBytes)")
                continue
            }
            guard let value = try file.xattr(name) else { continue }
            let weight = name.utf8.count + value.count
            guard entries.count < ExtendedAttributes.Limits.count, total + weight <= ExtendedAttributes.Limits.totalBytes else {
                reading.leftOut.append("extended attribute \(name) is not sent: the file's attributes pass \(ExtendedAttributes.Limits.count) "
                                       + "or \(ExtendedAttributes.Limits.totalBytes) bytes")
                continue
            }
            entries.append(ExtendedAttributes.Entry(name: name, value: value))
            total += weight
        }
        reading.own = ExtendedAttributes(entries)
        return reading
    }

    /// Reads the covered attributes of the regular file at `relative`; nil when nothing, or no regular
    /// file, is there.
    static func read(_ root: SafeRoot, _ relative: String, policy: XattrPolicy) throws(SafeRootError) -> Reading? {
        if policy.isOff { return Reading() }
        let file: FileDescriptor
        do {
            file = try root.openEntry(relative)
        } catch where error.errno == ENOENT || error.errno == ENOTDIR {
            return nil
        }
        do throws(SystemError) {
            guard try file.stat().kind == .file else { return nil }
            return try read(file, policy: policy)
        } catch {
            throw .system(error)
        }
    }

    /// Makes the covered attributes of the regular file `file` holds those of `wanted` (the names it
    /// does not cover are left alone on both sides): values that differ are set, names `wanted` lacks
    /// removed. What the file system refuses is not an error of the write: it is returned, and the
    /// bytes stay written. `fresh`: a file just made, which holds no attribute to remove.
    static func apply(_ wanted: ExtendedAttributes, to file: FileDescriptor, policy: XattrPolicy, fresh: Bool) -> XattrShortfall? {
        if policy.isOff { return nil }
        let mine = wanted.entries.filter { policy.covers($0.name) }
        var failed: [String] = []
        var reasons: [Int32] = []
        var present = ExtendedAttributes.none
        if !fresh {
            do { present = try read(file, policy: policy).own } catch {
                return XattrShortfall(names: mine.map(\.name), reason: error.message)
            }
            for entry in present.entries where wanted[entry.name] == nil {
                do { try file.removeXattr(entry.name) } catch {
                    failed.append(entry.name)
                    reasons.append(error.errno)
                }
            }
        }
        for entry in mine where present[entry.name] != entry.value {
            do { try file.setXattr(entry.name, entry.value) } catch {
                failed.append(entry.name)
                reasons.append(error.errno)
            }
        }
        guard let first = reasons.first else { return nil }
        return XattrShortfall(names: failed, reason: reason(first))
    }

    /// Why a file system refused an attribute, for people.
    static func reason(_ code: Int32) -> String {
        switch code {
        case ENOTSUP: return "the file system here keeps no user extended attributes"
        case ENOSPC, E2BIG, ERANGE: return "too large for the file system here (\(SystemError("", errno: code).message))"
        case EPERM, EACCES: return "not permitted here (\(SystemError("", errno: code).message))"
        default: return SystemError("", errno: code).message
        }
    }
}
