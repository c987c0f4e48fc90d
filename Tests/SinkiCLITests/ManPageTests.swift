import Foundation
import SinkiCLI
import SinkiConfig
import SinkiTestSupport
import Testing

/// The man pages say what the code does: every command and flag in sinkid(1), every section and key
/// of the config parser in sinki.conf(5) and docs/configuration.md, and nothing that is gone.
@Suite struct ManPageTests {
    /// roff text as a reader sees it: `\-` is `-`, font escapes dropped.
    static func text(_ file: String) throws -> String {
        var text = try String(contentsOfFile: repositoryRoot() + "/" + file, encoding: .utf8)
        for (escape, plain) in [("\\-", "-"), ("\\fB", ""), ("\\fR", ""), ("\\fI", ""), ("\\&", ""), ("\\e", "\\")] {
            text = text.replacingOccurrences(of: escape, with: plain)
        }
        return text
    }

    /// The man page's `.SS` subsections, by heading.
    static func subsections(_ text: String) -> [(heading: String, body: String)] {
        var out: [(String, String)] = []
        for chunk in text.components(separatedBy: "\n.SS ").dropFirst() {
            let heading = chunk.prefix { $0 != "\n" }.trimmingCharacters(in: CharacterSet(charactersIn: "\" "))
            let body = String(chunk.drop { $0 != "\n" }).components(separatedBy: "\n.SH ").first ?? ""
            out.append((heading, body))
        }
        return out
    }

    /// The statuses the man page's section on `command` lists in its "Exit status:" paragraph.
    static func exitStatuses(_ text: String, command: String) -> Set<Int32> {
        let heading = command == "run" ? "sinkid [run]" : "sinkid \(command)"
        guard let section = subsections(text).first(where: { $0.heading.hasPrefix(heading) })?.body,
              let paragraph = section.components(separatedBy: "Exit status: ").dropFirst().first?.prefix(while: { $0 != "\n" }) else { return [] }
        return Set(paragraph.split(separator: ";").compactMap { Int32($0.trimmingCharacters(in: .whitespaces).prefix { $0.isNumber }) })
    }

    /// Issue 25, item 5: each command's section lists exactly the statuses of the command table.
    @Test func sinkid1ListsEveryCommandsExitStatuses() throws {
        let text = try Self.text("packaging/man/sinkid.1")
        for spec in CommandCatalog.all {
            #expect(Self.exitStatuses(text, command: spec.name) == Set(spec.exits.map(\.code.rawValue)),
                    "sinkid.1 on \(spec.name): lists \(Self.exitStatuses(text, command: spec.name).sorted()), the command exits with \(spec.exits.map(\.code.rawValue))")
        }
    }

    @Test func sinkid1DocumentsEveryCommandAndExactlyItsFlags() throws {
        let sections = Self.subsections(try Self.text("packaging/man/sinkid.1"))
        for spec in CommandCatalog.all {
            let heading = spec.name == "run" ? "sinkid [run]" : "sinkid \(spec.name)"
            guard let section = sections.first(where: { $0.heading.hasPrefix(heading) }) else {
                Issue.record("sinkid.1 has no section for \(spec.name)")
                continue
            }
            let documented = Set(section.body.matches(of: /\.BI?\s+(--[a-z-]+)/).map { String($0.1) })
            #expect(documented == Set(spec.flags), "sinkid.1 on \(spec.name): documents \(documented.sorted()), the command takes \(spec.flags.sorted())")
        }
    }

    @Test func sinkiConf5AndTheDocsHaveEverySectionAndKey() throws {
        let page = Self.subsections(try Self.text("packaging/man/sinki.conf.5"))
        let docs = try String(contentsOfFile: repositoryRoot() + "/docs/configuration.md", encoding: .utf8)
        for (section, keys) in ConfigFile.knownKeys {
            let heading = section == "merge" ? "[merge] (no patterns)" : section == "merge PATTERNS" ? "[merge PATTERNS...]"
                : section == "root" || section == "observe" ? "[\(section) " : "[\(section)]"
            guard let body = page.first(where: { $0.heading.hasPrefix(heading) })?.body else {
                Issue.record("sinki.conf.5 has no section \(heading)")
                continue
            }
            let documented = Set(body.matches(of: /\n\.TP\n\.B ([a-z-]+)/).map { String($0.1) })
            #expect(documented == Set(keys), "sinki.conf.5 \(heading): documents \(documented.sorted()), the parser takes \(keys.sorted())")
            for key in keys { #expect(docs.contains("| `\(key)` |"), "docs/configuration.md has no row for \(key) in [\(section)]") }
        }
    }
}
