import SinkiRecord
import SinkiSupport

/// How the trees see a file's extended attributes (issue 25): as a short digest of the whole set a
/// record carries, so that Local, Synced and Remote compare them in one column each, and a set
/// changed alone is a change of its own.
public enum XattrSet {
    /// 32 hex digits of the SHA-256 of the set's `encoded` form; empty for none.
    public static func digest(_ set: ExtendedAttributes) -> String {
        set.isEmpty ? "" : String(Digest.sha256Hex(set.encoded).prefix(32))
    }

    /// The set a file here stands for, as the record it would send: its own attributes the policy
    /// covers, and of the server's record (`remote`) those the policy does not cover (this device never
    /// reads them, and carries them along) and those it could not keep here (`unkept`: the server's
    /// value stands for them). The server's come first within the bounds; what of the file's own does
    /// not fit is left out, by name.
    static func effective(own: ExtendedAttributes, remote: ExtendedAttributes, unkept: Set<String>,
                          policy: XattrPolicy) -> (set: ExtendedAttributes, leftOut: [String]) {
        let carried = remote.entries.filter { !policy.covers($0.name) || unkept.contains($0.name) }
        let mine = own.entries.filter { policy.covers($0.name) && !unkept.contains($0.name) }
        var kept = carried
        var total = carried.reduce(0) { $0 + $1.name.utf8.count + $1.value.count }
        var leftOut: [String] = []
        for entry in mine {
            let size = entry.name.utf8.count + entry.value.count
            if kept.count >= ExtendedAttributes.Limits.count || total + size > ExtendedAttributes.Limits.totalBytes {
                leftOut.append(entry.name)
                continue
            }
            kept.append(entry)
            total += size
        }
        return (ExtendedAttributes(kept), leftOut)
    }
}

/// Attributes a write could not keep on this file system, and why (shown in status as skipped).
public struct XattrShortfall: Sendable, Equatable {
    public var names: [String]
    public var reason: String

    public init(names: [String], reason: String) {
        self.names = names
        self.reason = reason
    }

    /// The line status shows for it.
    public var description: String { "extended attributes \(names.joined(separator: ", ")) not kept here: \(reason)" }
}
