/// A command from the config (`command =`, `exec =`): its argv as written, split with shell-like
/// quoting but never run through a shell, and the executable found when the config was read.
/// Placeholders such as `%local` stay in the words until `arguments(substituting:)`.
public struct CommandTemplate: Sendable, Hashable, CustomStringConvertible {
    /// The words as split from the config; `argv[0]` is the program as written (with `~` expanded).
    public var argv: [String]
    /// The absolute path of the program: `argv[0]` itself when it holds a `/`, else where it was
    /// found on `PATH`.
    public var executable: String

    public init(argv: [String], executable: String) {
        precondition(!argv.isEmpty, "bug: a command needs at least a program")
        self.argv = argv
        self.executable = executable
    }

    /// The words substituted in: every `%name` for a placeholder given in `values` is replaced by its
    /// value (also inside a longer word), `%%` is one `%`, and any other `%` stays as written.
    /// Substituted text is never scanned again, so a value holding `%local` stays as it is.
    public func arguments(substituting values: [Placeholder: String]) -> [String] {
        argv.map { Placeholder.substitute(in: $0, values) }
    }

    /// The placeholders that the words use.
    public var placeholders: Set<Placeholder> {
        var found = Set<Placeholder>()
        for word in argv {
            _ = Placeholder.substitute(in: word, [:]) { found.insert($0) }
        }
        return found
    }

    public var description: String { argv.joined(separator: " ") }
}

/// The names that `%name` in a command stands for.
public enum Placeholder: String, Sendable, Hashable, CaseIterable {
    /// The local version of the file.
    case local
    /// The version that came from the server.
    case remote
    /// The last version both sides shared (three-way merges).
    case base
    /// Where a merge command writes its result.
    case out
    /// The record path (`SaveGames/player1.save`).
    case path
    /// What happened, for observers: `changed`, `deleted`, `merged` or `conflict`.
    case event

    /// Longest names first, so that no name is taken for the start of a longer one.
    private static let byLength = allCases.sorted { $0.rawValue.count > $1.rawValue.count }

    static func substitute(in word: String, _ values: [Placeholder: String], seen: (Placeholder) -> Void = { _ in }) -> String {
        guard word.contains("%") else { return word }
        var out = ""
        var rest = Substring(word)
        while let percent = rest.firstIndex(of: "%") {
            out += rest[..<percent]
            let after = rest[rest.index(after: percent)...]
            if after.hasPrefix("%") {
                out += "%"
                rest = after.dropFirst()
                continue
            }
            if let name = byLength.first(where: { after.hasPrefix($0.rawValue) }) {
                seen(name)
                out += values[name] ?? "%" + name.rawValue
                rest = after.dropFirst(name.rawValue.count)
            } else {
                out += "%"
                rest = after
            }
        }
        return out + rest
    }
}
