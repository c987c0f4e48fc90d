import Foundation
import SinkiConfig
import SinkiTestSupport

/// A temporary home with a `bin` folder of stub programs, and config files written into it; the
/// environment handed to the parser is built here, never read from the process.
final class Fixture: Sendable {
    let directory = TemporaryDirectory("sinki-config")
    /// Programs that exist on the fixture's PATH.
    static let stubs = ["notify-send", "save-compare", "sqlite-merge", "merge-tool", "sh", "true"]

    /// The fixture's folder, without the doubled `/` that the system temporary folder leaves.
    var path: String { directory.path.replacingOccurrences(of: "//", with: "/") }
    var home: String { path + "/home" }
    var bin: String { path + "/bin" }

    init() {
        let files = FileManager.default
        try! files.createDirectory(atPath: home, withIntermediateDirectories: true)
        try! files.createDirectory(atPath: bin, withIntermediateDirectories: true)
        for name in Fixture.stubs {
            _ = files.createFile(atPath: bin + "/" + name, contents: Data("#!/bin/sh\nexit 0\n".utf8), attributes: [.posixPermissions: 0o755])
        }
        _ = files.createFile(atPath: bin + "/not-executable", contents: Data(), attributes: [.posixPermissions: 0o644])
    }

    /// HOME is the fixture's home, PATH its bin folder, plus `extra`.
    func environment(_ extra: [String: String] = [:], currentDirectory: String? = nil, hostName: String = "testhost") -> ProcessEnvironment {
        var variables = ["HOME": home, "PATH": bin]
        for (key, value) in extra { variables[key] = value }
        return ProcessEnvironment(variables: variables, currentDirectory: currentDirectory ?? home, hostName: hostName)
    }

    /// Writes `text` to a file (default `sinki.conf` in the fixture) and returns its path.
    @discardableResult
    func write(_ text: String, to path: String? = nil) -> String {
        let path = path ?? self.path + "/sinki.conf"
        let folder = (path as NSString).deletingLastPathComponent
        try! FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try! Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// Writes and loads a config.
    func load(_ text: String) throws(ConfigError) -> ConfigFile {
        try ConfigFile.load(path: write(text), environment: environment())
    }

    /// The error that loading `text` throws, nil when it loads.
    func error(_ text: String) -> ConfigError? {
        do {
            _ = try load(text)
            return nil
        } catch {
            return error
        }
    }
}
