import Glibc
import SinkiRecord

/// Which extended attributes of a file sync from this device (`[transfer] xattrs`, issue 25): names
/// in the `user.` namespace that match one of the patterns (shell globs, as `fnmatch` reads them).
/// An empty list turns them off: nothing is read from disk or written to it, and the attributes a
/// record brings are carried along unchanged in what this device sends.
public struct XattrPolicy: Sendable, Equatable {
    public var patterns: [String]

    /// `user.*`: every attribute a file's owner may set.
    public init(patterns: [String] = [ExtendedAttributes.namespace + "*"]) { self.patterns = patterns }

    public static let off = XattrPolicy(patterns: [])

    public var isOff: Bool { patterns.isEmpty }

    /// Whether `name` is one this device reads from disk and writes to it. Names outside the `user.`
    /// namespace never are, whatever the patterns say.
    public func covers(_ name: String) -> Bool {
        guard !isOff, ExtendedAttributes.nameProblem(name) == nil else { return false }
        return patterns.contains { fnmatch($0, name, 0) == 0 }
    }
}
