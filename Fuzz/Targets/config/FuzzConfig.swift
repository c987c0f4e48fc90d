import SinkiConfig
import SinkiRecord

/// Fuzz target `config` (docs/fuzzing.md): the bytes as a `sinki.conf`, read the way `sinkid` reads
/// one. Parsing gives a configuration or a `ConfigError` — never a trap — whose line (when it has
/// one) is a line of the file, printed as one line of text; a configuration that parses, parses again
/// to the same, and its rules and observers answer for any path without trapping.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzConfig(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    checkConfig(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}

/// A fixed environment, so that a run depends only on its input: commands are found on the system's
/// own PATH (`sh`, `true`), which lets the fuzzer get past `command =` and `exec =` checks.
let environment = ProcessEnvironment(variables: ["HOME": "/home/fuzz", "PATH": "/usr/bin:/bin"],
                                     currentDirectory: "/home/fuzz", hostName: "fuzzhost")

/// Paths the parsed rules are asked about.
let samplePaths = ["SaveGames/a.txt", "SaveGames/slot 1/player1.save", "Other/deep/er/x.json", "SaveGames/.hidden", "R/日本語.md"]

func require(_ condition: Bool, _ what: @autoclosure () -> String) {
    if !condition { fatalError("config invariant broken: \(what())") }
}

func checkConfig(_ bytes: [UInt8]) {
    let lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).count
    let config: ConfigFile
    do {
        config = try ConfigFile.parse(bytes: bytes, source: "fuzz.conf", environment: environment)
    } catch {
        if let line = error.line { require((1...lines).contains(line), "error line \(line) is in a file of \(lines) lines") }
        let text = error.description
        require(text.hasPrefix("fuzz.conf"), "an error names its file: \(text)")
        require(!text.contains("\n"), "an error is one line: \(text)")
        return
    }
    require((try? ConfigFile.parse(bytes: bytes, source: "fuzz.conf", environment: environment)) == config, "parsing is repeatable")
    for root in config.roots {
        require(root.path.hasPrefix("/"), "a root's folder is absolute: \(root.path)")
        require(!root.name.isEmpty && !root.name.contains("/"), "a root's name is one component: \(root.name)")
    }
    for text in samplePaths {
        guard let path = try? RecordPath(validating: text) else { continue }
        _ = config.ruleFor(path: path)
        _ = config.observers(for: path)
    }
    for section in config.mergeSections {
        for pattern in section.patterns {
            for text in samplePaths { _ = pattern.matches(relativePath: text) }
        }
        if let command = section.policy.command {
            _ = command.arguments(substituting: [.local: "/tmp/l", .remote: "/tmp/r", .base: "/tmp/b", .out: "/tmp/o", .path: "SaveGames/a"])
        }
    }
}
