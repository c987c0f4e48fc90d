import SinkiConfig
import SinkiMerge
import SinkiRecord

/// The `[merge PATTERNS]` sections as the replica asks them: which policy settles a conflict on a
/// path, and whether the path keeps its last shared version for a three-way rule.
public struct MergeRules: Sendable, Equatable {
    // A config holding only the merge sections, so that matching is `ConfigFile.ruleFor`'s own.
    private var file = ConfigFile()
    /// Whether any section's rule merges three ways; without one no base is ever kept.
    public private(set) var usesBases = false

    public init(sections: [MergeSection] = []) {
        file.mergeSections = sections
        usesBases = sections.contains { $0.policy.rule.needsBase }
    }

    public var sections: [MergeSection] { file.mergeSections }

    /// The first matching section's policy, else keep-both.
    public func policy(for path: RecordPath) -> MergePolicy { file.ruleFor(path: path) }

    /// Whether a conflict on `path` would merge against the last shared version.
    public func needsBase(_ path: String) -> Bool {
        guard usesBases, let checked = try? RecordPath(validating: path) else { return false }
        return policy(for: checked).rule.needsBase
    }
}
