import Glibc
import SinkiRecord
import SinkiSupport

extension ConfigFile {
    /// Largest config file read: a mistake (a log named as the config) fails fast instead of slowly.
    static let maxBytes = 1 << 20

    /// Reads and checks a config file. `source` names the file in errors (default: `path` as given).
    public static func load(path: String, environment: ProcessEnvironment, source: String? = nil) throws(ConfigError) -> ConfigFile {
        let shown = source ?? path
        let bytes: [UInt8]
        do {
            let file = try FileDescriptor.open(path, flags: O_RDONLY | O_CLOEXEC)
            // Read as a stream: `--config <(...)` and FIFOs work; one byte past the most taken is
            // enough to refuse a file too large.
            bytes = try file.readStream(limit: maxBytes + 1)
        } catch {
            throw ConfigError(.unreadable, "cannot read: \(error.message)", source: shown, line: nil)
        }
        return try parse(bytes: bytes, source: shown, environment: environment)
    }

    /// Checks the bytes of a config file as `load` read them (the fuzz target feeds this directly).
    public static func parse(bytes: [UInt8], source shown: String, environment: ProcessEnvironment) throws(ConfigError) -> ConfigFile {
        guard bytes.count <= maxBytes else {
            throw ConfigError(.unreadable, "larger than \(maxBytes) bytes: is this a config file?", source: shown, line: nil)
        }
        var lines: [String] = []
        for (number, line) in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).enumerated() {
            guard let text = String(validating: line, as: UTF8.self) else {
                throw ConfigError(.unreadable, "not valid UTF-8 text", source: shown, line: number + 1)
            }
            lines.append(text)
        }
        return try ConfigParser(source: shown, environment: environment).parse(lines: lines)
    }

    /// Checks config text that is already in memory; `source` names it in errors.
    public static func parse(_ text: String, source: String, environment: ProcessEnvironment) throws(ConfigError) -> ConfigFile {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        return try ConfigParser(source: source, environment: environment).parse(lines: lines)
    }
}

/// One `key = value` line; the value is kept raw until its key says how to read it (comments too).
struct RawEntry {
    var key: String
    var value: String
    var line: Int
}

/// One section with its lines, as written.
struct RawSection {
    var name: String
    var arguments: [String]
    var line: Int
    var entries: [RawEntry] = []

    /// The header as it is shown in messages: `[merge *.txt *.md]`.
    var title: String { "[" + ([name] + arguments).joined(separator: " ") + "]" }
    /// The kind of section for the key tables: the plain `[merge]` differs from `[merge PATTERNS]`.
    var kind: SectionKind? {
        if name == "merge" { return arguments.isEmpty ? .mergeSettings : .mergeRule }
        return SectionKind(rawValue: name)
    }
}

/// The sections the file may hold, each with its keys.
enum SectionKind: String, CaseIterable {
    case server, agent, root, transfer, watch, mergeSettings = "merge", observe
    case mergeRule = "merge PATTERNS"

    var keys: [String] {
        switch self {
        case .server: return ["url", "token-file", "listen", "ca-file"]
        case .agent: return ["device", "log-level", "verify-interval"]
        case .root: return ["path", "ignore"]
        case .transfer: return ["inline-max", "chunk-size", "parallel", "attempts", "max-rate", "xattrs"]
        case .watch: return ["delay", "rescan"]
        case .mergeSettings: return ["timeout", "base-cache"]
        case .mergeRule: return ["rule", "command", "fallback", "keep-loser"]
        case .observe: return ["exec"]
        }
    }

    /// Section names as written in headers.
    static let names = ["server", "agent", "root", "transfer", "watch", "merge", "observe"]
    /// Sections that may appear once.
    var isSingle: Bool { ![.root, .mergeRule, .observe].contains(self) }
}

/// Turns lines into a `ConfigFile`, stopping at the first problem.
struct ConfigParser {
    let source: String
    let environment: ProcessEnvironment

    func fail(_ code: ConfigError.Code, _ message: String, line: Int?) -> ConfigError {
        ConfigError(code, message, source: source, line: line)
    }

    /// Problems are reported in line order as far as it can be known: a line that cannot be read
    /// stops the reading, and the sections before it are checked first.
    func parse(lines: [String]) throws(ConfigError) -> ConfigFile {
        var (sections, problem, cutShort) = read(lines)
        if cutShort {
            // The problem is inside the last section: its own checks would miss the keys after it.
            sections.removeLast()
        }
        var config = ConfigFile()
        var firstLine: [String: Int] = [:]
        for section in sections {
            guard let kind = section.kind else { preconditionFailure("bug: unknown section passed the reader") }
            if kind.isSingle {
                if let first = firstLine[section.title] {
                    throw fail(.badSection, "duplicate section \(section.title) (first at line \(first))", line: section.line)
                }
                firstLine[section.title] = section.line
            }
            let reader = try SectionReader(parser: self, section: section, kind: kind)
            switch kind {
            case .server: config.server = try reader.server()
            case .agent: config.agent = try reader.agent()
            case .root: config.roots.append(try reader.root(after: config.roots))
            case .transfer: config.transfer = try reader.transfer()
            case .watch: config.watch = try reader.watch()
            case .mergeSettings: config.merge = try reader.mergeSettings()
            case .mergeRule: config.mergeSections.append(try reader.mergeSection())
            case .observe: config.observers.append(try reader.observer())
            }
        }
        if let problem { throw problem }
        return config
    }

    /// Splits lines into sections of raw entries; checks headers, section names and line syntax.
    /// Stops at the first line it cannot read and returns that problem with the sections so far,
    /// and whether it stopped inside the last of them (a header problem ends the section before it).
    private func read(_ lines: [String]) -> (sections: [RawSection], problem: ConfigError?, cutShort: Bool) {
        var sections: [RawSection] = []
        var inHeader = false
        do {
            try read(lines, into: &sections, inHeader: &inHeader)
            return (sections, nil, false)
        } catch {
            return (sections, error, !inHeader && !sections.isEmpty)
        }
    }

    private func read(_ lines: [String], into sections: inout [RawSection], inHeader: inout Bool) throws(ConfigError) {
        for (index, original) in lines.enumerated() {
            let number = index + 1
            var line = Substring(original)
            if index == 0, line.hasPrefix("\u{FEFF}") { line = line.dropFirst() }
            if line.hasSuffix("\r") { line = line.dropLast() }
            let trimmed = line.drop { $0 == " " || $0 == "\t" }
            if trimmed.isEmpty || trimmed.hasPrefix("#") || trimmed.hasPrefix(";") { continue }
            if trimmed.hasPrefix("[") {
                inHeader = true
                sections.append(try header(trimmed, line: number))
                inHeader = false
                continue
            }
            guard let equals = trimmed.firstIndex(of: "=") else {
                throw fail(.syntax, "expected KEY = VALUE or [SECTION], found \(quoted(String(trimmed)))", line: number)
            }
            let key = String(trimmed[..<equals]).trimmingSpaces
            guard !key.isEmpty, !key.contains(where: { $0 == " " || $0 == "\t" }) else {
                throw fail(.syntax, "expected KEY = VALUE, found \(quoted(String(trimmed)))", line: number)
            }
            guard !sections.isEmpty else {
                throw fail(.syntax, "key \(quoted(key)) comes before any [section]", line: number)
            }
            sections[sections.count - 1].entries.append(RawEntry(key: key, value: String(trimmed[trimmed.index(after: equals)...]), line: number))
        }
    }

    /// `[name arguments…]`, then nothing but an optional comment. The header ends at the first `]`
    /// that is followed only by spaces or a comment, so patterns may hold `[…]` classes.
    private func header(_ text: Substring, line: Int) throws(ConfigError) -> RawSection {
        var end: Substring.Index?
        var cursor = text.startIndex
        while let close = text[cursor...].firstIndex(of: "]") {
            let rest = text[text.index(after: close)...].drop { $0 == " " || $0 == "\t" }
            if rest.isEmpty || rest.hasPrefix("#") || rest.hasPrefix(";") {
                end = close
                break
            }
            cursor = text.index(after: close)
        }
        guard let end else { throw fail(.syntax, "section header \(quoted(String(text))) does not end with ]", line: line) }
        let words: [String]
        do {
            words = try splitHeader(text[text.index(after: text.startIndex)..<end])
        } catch {
            throw fail(.syntax, "section header \(String(text[...end])): \(error.message)", line: line)
        }
        guard let name = words.first else { throw fail(.syntax, "empty section header []", line: line) }
        guard SectionKind.names.contains(name) else {
            let hint = didYouMean(name, among: SectionKind.names) { "[\($0)]" }
            let known = hint.isEmpty ? "; sections are " + SectionKind.names.map { "[\($0)]" }.joined(separator: ", ") : hint
            throw fail(.unknownSection, "unknown section [\(name)]\(known)", line: line)
        }
        return RawSection(name: name, arguments: Array(words.dropFirst()), line: line)
    }

    /// Header words: separated by spaces; a word may be wrapped in `"…"` or `'…'` to hold spaces.
    /// Backslashes are kept, so a glob's `\[` reaches the glob.
    private func splitHeader(_ text: Substring) throws(ValueError) -> [String] {
        var words: [String] = []
        var rest = text[...]
        while true {
            rest = rest.drop { $0 == " " || $0 == "\t" }
            guard let first = rest.first else { return words }
            if first == "\"" || first == "'" {
                let body = rest.dropFirst()
                guard let close = body.firstIndex(of: first) else { throw ValueError("unterminated \(first) quote") }
                words.append(String(body[..<close]))
                rest = body[body.index(after: close)...]
                guard rest.isEmpty || rest.first == " " || rest.first == "\t" else {
                    throw ValueError("expected a space after the closing quote")
                }
            } else {
                let word = rest.prefix { $0 != " " && $0 != "\t" }
                words.append(String(word))
                rest = rest[word.endIndex...]
            }
        }
    }
}
