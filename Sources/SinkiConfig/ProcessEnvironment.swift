import Glibc

/// What the config depends on outside the file: environment variables, the working directory and the
/// host name. `current()` reads the process; tests build one so that they never depend on the machine.
public struct ProcessEnvironment: Sendable, Equatable {
    public var variables: [String: String]
    /// Relative paths on the command line are taken from here.
    public var currentDirectory: String
    /// The default device name.
    public var hostName: String

    public init(variables: [String: String] = [:], currentDirectory: String = "/", hostName: String = "localhost") {
        self.variables = variables
        self.currentDirectory = currentDirectory
        self.hostName = hostName
    }

    /// The running process's environment, working directory and host name; `HOME` falls back to the
    /// password database when it is not set.
    public static func current() -> ProcessEnvironment {
        var variables: [String: String] = [:]
        var cursor = environ
        while let entry = cursor.pointee {
            let text = String(cString: entry)
            if let equals = text.firstIndex(of: "=") {
                variables[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            cursor += 1
        }
        if variables["HOME", default: ""].isEmpty, let entry = getpwuid(getuid()), let dir = entry.pointee.pw_dir {
            variables["HOME"] = String(cString: dir)
        }
        var buffer = [CChar](repeating: 0, count: 4097)
        let directory = getcwd(&buffer, buffer.count) != nil ? text(buffer) : "/"
        var host = [CChar](repeating: 0, count: 256)
        let hostName = gethostname(&host, host.count - 1) == 0 ? text(host) : "localhost"
        return ProcessEnvironment(variables: variables, currentDirectory: directory, hostName: hostName)
    }

    /// A variable's value; nil when it is unset or empty.
    public subscript(name: String) -> String? {
        guard let value = variables[name], !value.isEmpty else { return nil }
        return value
    }

    /// A NUL-terminated C buffer as a String.
    private static func text(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// `$HOME`, nil when unset or empty.
    public var home: String? { self["HOME"] }

    /// The absolute path of the program `name` on `$PATH` (or the default path when `PATH` is unset);
    /// a name with a `/` is checked as it is. nil when it is not an executable file.
    public func findExecutable(_ name: String) -> String? {
        if name.contains("/") { return Self.isExecutableFile(name) ? name : nil }
        let search = self["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for entry in search.split(separator: ":", omittingEmptySubsequences: true) where entry.hasPrefix("/") {
            let directory = String(entry)
            let candidate = directory.hasSuffix("/") ? directory + name : directory + "/" + name
            if Self.isExecutableFile(candidate) { return candidate }
        }
        return nil
    }

    /// Whether a file (not a directory) exists at `path`, following symlinks.
    static func isFile(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) != S_IFDIR
    }

    /// A file (not a folder) this process can read.
    public static func isReadableFile(_ path: String) -> Bool { isFile(path) && access(path, R_OK) == 0 }

    private static func isExecutableFile(_ path: String) -> Bool {
        isFile(path) && access(path, X_OK) == 0
    }
}
