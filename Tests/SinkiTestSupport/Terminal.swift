import Foundation
import Glibc

/// A real terminal for tests of what people see: a tmux server of its own (its own socket, so it
/// never meets a user's tmux), one window of a fixed size running `command`; keys are typed into it
/// and the screen is read back as text. `stop()` (or deinit) ends that tmux server alone.
public final class Terminal: @unchecked Sendable {
    // @unchecked: one test drives a terminal; the tmux server is the only state, and it is a process.
    public let socket: String
    private let directory: TemporaryDirectory
    private var running = true

    /// Starts `command` (run by `/bin/sh -c`) in a window `columns` wide and `rows` high, with
    /// `environment` only (and TERM).
    public init(_ directory: TemporaryDirectory, columns: Int = 80, rows: Int = 40, environment: [String: String] = [:],
                command: String) throws {
        self.directory = directory
        socket = "sinki-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let variables = (environment.merging(["TERM": "xterm-256color"]) { mine, _ in mine })
            .map { "\($0.key)=\(Self.shellQuoted($0.value))" }.sorted().joined(separator: " ")
        try tmux(["new-session", "-d", "-s", "test", "-x", String(columns), "-y", String(rows), "env -i \(variables) /bin/sh -c \(Self.shellQuoted(command))"])
    }

    deinit { stop() }

    /// Types `keys` (tmux key names: a text, `Enter`, `Tab`, `C-c`).
    public func send(_ keys: String...) throws {
        try tmux(["send-keys", "-t", "test"] + keys)
    }

    /// The screen as text, one string per row, trailing spaces dropped.
    public func screen() throws -> [String] {
        let run = try tmux(["capture-pane", "-p", "-t", "test"])
        return run.split(separator: "\n", omittingEmptySubsequences: false).map { String($0.reversed().drop { $0 == " " }.reversed()) }
    }

    /// Ends this terminal's tmux server (and what runs in it).
    public func stop() {
        guard running else { return }
        running = false
        _ = try? tmux(["kill-server"])
    }

    /// Runs tmux with `arguments` and returns what it printed. Spawned here rather than through
    /// Foundation's `Process`, with every signal unblocked and at its default: the tmux server it
    /// starts inherits both, and with the test process's mask it neither saw its children exit nor
    /// ended on `kill-server` (and Foundation did not see the client exit).
    @discardableResult
    private func tmux(_ arguments: [String]) throws -> String {
        let output = directory.child("tmux-\(UInt32.random(in: 0...UInt32.max)).out")
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, output + ".err", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t(), all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv = (["/usr/bin/tmux", "-L", socket, "-f", "/dev/null"] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/usr/bin/tmux", &actions, &attributes, argv, environ)
        guard spawned == 0 else { throw ProcessFailed(label: "tmux", log: String(cString: strerror(spawned))) }
        var status: Int32 = 0
        let deadline = Date().addingTimeInterval(20)
        while waitpid(pid, &status, WNOHANG) == 0 {
            if Date() > deadline {
                kill(pid, SIGKILL)
                _ = waitpid(pid, &status, 0)
                break
            }
            usleep(2_000)
        }
        let errors = (try? String(contentsOfFile: output + ".err", encoding: .utf8)) ?? ""
        // WIFEXITED and WEXITSTATUS, which Swift does not import.
        guard status & 0x7f == 0, (status >> 8) & 0xff == 0 else { throw ProcessFailed(label: "tmux \(arguments.first ?? "")", log: errors) }
        return (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
    }

    /// `text` in single quotes for /bin/sh.
    public static func shellQuoted(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'" }
}
