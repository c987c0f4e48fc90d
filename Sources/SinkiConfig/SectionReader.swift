import SinkiRecord
import SinkiSupport

/// The entries of one section, checked against the section's keys, with one typed getter per value
/// syntax. Every problem becomes a `ConfigError` at the entry's line.
struct SectionReader {
    let parser: ConfigParser
    let section: RawSection
    private var entries: [String: RawEntry] = [:]

    init(parser: ConfigParser, section: RawSection, kind: SectionKind) throws(ConfigError) {
        self.parser = parser
        self.section = section
        for entry in section.entries {
            guard kind.keys.contains(entry.key) else {
                var hint = didYouMean(entry.key, among: kind.keys)
                if hint.isEmpty, let home = SectionKind.allCases.first(where: { $0.keys.contains(entry.key) }) {
                    hint = "; \(quoted(entry.key)) belongs in [\(home.rawValue)]"
                }
                if hint.isEmpty { hint = "; keys are " + kind.keys.joined(separator: ", ") }
                throw parser.fail(.unknownKey, "unknown key \(quoted(entry.key)) in \(section.title)\(hint)", line: entry.line)
            }
            if let first = entries[entry.key] {
                throw parser.fail(.duplicateKey, "duplicate key \(quoted(entry.key)) in \(section.title) (first at line \(first.line))", line: entry.line)
            }
            entries[entry.key] = entry
        }
    }

    func has(_ key: String) -> Bool { entries[key] != nil }
    func line(of key: String) -> Int { entries[key]?.line ?? section.line }

    func badValue(_ key: String, _ message: String) -> ConfigError {
        parser.fail(.badValue, message, line: line(of: key))
    }

    /// A single value, unquoted and without its comment; nil when the key is absent; empty is refused.
    func string(_ key: String) throws(ConfigError) -> String? {
        guard let entry = entries[key] else { return nil }
        let value: String
        do { value = try ConfigValues.scalar(entry.value) } catch { throw badValue(key, "bad value for \(key): \(error.message)") }
        guard !value.isEmpty else { throw badValue(key, "no value for \(key) in \(section.title)") }
        return value
    }

    func list(_ key: String) throws(ConfigError) -> [String]? {
        guard let entry = entries[key] else { return nil }
        do { return try ConfigValues.list(entry.value) } catch { throw badValue(key, "bad value for \(key): \(error.message)") }
    }

    func size(_ key: String) throws(ConfigError) -> Int64? {
        guard let text = try string(key) else { return nil }
        guard let value = ConfigValues.size(text) else {
            throw badValue(key, "bad size \(quoted(text)) for \(key): expected bytes or a number with KB, KiB, MB, MiB, GB, GiB, TB or TiB")
        }
        return value
    }

    func duration(_ key: String, allowZero: Bool) throws(ConfigError) -> Duration? {
        guard let text = try string(key) else { return nil }
        guard let value = ConfigValues.duration(text) else {
            throw badValue(key, "bad duration \(quoted(text)) for \(key): expected a number with ms, s, m, h or d (50ms, 2s, 1h30m)")
        }
        if !allowZero, value == .zero { throw badValue(key, "\(key) must be longer than 0") }
        return value
    }

    func bool(_ key: String) throws(ConfigError) -> Bool? {
        guard let text = try string(key) else { return nil }
        guard let value = ConfigValues.bool(text) else {
            throw badValue(key, "bad boolean \(quoted(text)) for \(key): expected yes, no, true, false, on or off")
        }
        return value
    }

    func integer(_ key: String, in range: ClosedRange<Int>) throws(ConfigError) -> Int? {
        guard let text = try string(key) else { return nil }
        guard text.allSatisfy(\.isASCII), let value = Int(text), range.contains(value) else {
            throw badValue(key, "bad number \(quoted(text)) for \(key): expected a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return value
    }

    /// An absolute path: `~`, `$HOME` and `${HOME}` expanded, then cleaned.
    func path(_ key: String) throws(ConfigError) -> String? {
        guard let text = try string(key) else { return nil }
        let expanded: String
        do { expanded = try ConfigValues.expandHome(text, home: parser.environment.home) } catch {
            throw badValue(key, "bad path \(quoted(text)) for \(key): \(error.message)")
        }
        guard expanded.hasPrefix("/") else {
            throw badValue(key, "path \(quoted(text)) for \(key) must be absolute or start with ~ or $HOME")
        }
        return ConfigValues.absolute(expanded, from: "/")
    }

    /// A rule name; `what` names it in messages ("rule", "fallback rule").
    func rule(_ key: String, what: String) throws(ConfigError) -> MergeRule? {
        guard let text = try string(key) else { return nil }
        guard let rule = MergeRule(rawValue: text) else {
            let names = MergeRule.allCases.map(\.rawValue)
            var hint = didYouMean(text, among: names)
            if hint.isEmpty { hint = "; rules are " + names.joined(separator: ", ") }
            throw parser.fail(.unknownRule, "unknown \(what) \(quoted(text)) in \(section.title)\(hint)", line: line(of: key))
        }
        return rule
    }

    /// A command line: split into words, `~` expanded in the program, the program found on `PATH`.
    func command(_ key: String) throws(ConfigError) -> CommandTemplate? {
        guard let entry = entries[key] else { return nil }
        var words: [String]
        do { words = try ConfigValues.splitCommand(entry.value) } catch {
            throw parser.fail(.badCommand, "bad command for \(key): \(error.message)", line: entry.line)
        }
        guard !words.isEmpty else { throw parser.fail(.badCommand, "no command for \(key) in \(section.title)", line: entry.line) }
        do { words[0] = try ConfigValues.expandHome(words[0], home: parser.environment.home) } catch {
            throw parser.fail(.badCommand, "bad command for \(key): \(error.message)", line: entry.line)
        }
        let program = words[0]
        if program.contains("/"), !program.hasPrefix("/") {
            throw parser.fail(.badCommand, "command \(quoted(program)) must be a name on PATH or an absolute path", line: entry.line)
        }
        guard let executable = parser.environment.findExecutable(program) else {
            let why = program.contains("/") ? "does not exist or is not executable" : "not found on PATH"
            throw parser.fail(.commandNotFound, "command \(quoted(program)) \(why)", line: entry.line)
        }
        return CommandTemplate(argv: words, executable: executable)
    }
}
