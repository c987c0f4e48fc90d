import Foundation
import Glibc
import Synchronization

/// Why the tests' PostgreSQL could not be had. Missing binaries are an error, not a skip: the
/// PostgreSQL store is tested on every run.
public struct PostgresClusterError: Error, CustomStringConvertible {
    public var description: String
}

/// A private PostgreSQL cluster for the tests of one test process: `initdb` in a temporary folder,
/// `postgres` on a free 127.0.0.1 port (trust authentication, which is fine for a cluster only this
/// machine's loopback reaches, and fsync off), its socket in that folder. Started once, on first use.
///
/// Stopped at process exit by an `atexit` handler that signals the postmaster by its process id (from
/// `postmaster.pid`) and removes the folder: a static's deinit never runs, and a test suite cannot
/// know it is the last one to need the cluster. A test process that dies without running `atexit`
/// (a crash) leaves its cluster behind; the next test process stops it and removes its folder, because
/// each folder records the test process that owns it.
///
/// PostgreSQL refuses to run as root: when the tests do, the cluster runs as `nobody` (through
/// `setpriv`, which execs in place) and its folder belongs to that user.
public final class PostgresCluster: Sendable {
    /// The folder holding `data/`, the socket and the logs.
    public let directory: String
    public let port: Int
    /// Where `initdb`, `pg_ctl` and `createdb` are.
    public let binDirectory: String
    /// The superuser the tests connect as.
    public let user = "sinki"

    private static let started: Result<PostgresCluster, any Error> = Result { try PostgresCluster() }
    /// The postmaster to stop at exit, and the folder to remove after it.
    private static let running = Mutex<(pid: pid_t, directory: String)?>(nil)

    /// The cluster of this test process, started by the first call.
    public static func shared() throws -> PostgresCluster { try started.get() }

    /// A `postgresql://` URL of database `name` on this cluster.
    public func url(database name: String) -> String { "postgresql://\(user)@127.0.0.1:\(port)/\(name)" }

    /// A new, empty UTF-8 database with a random name, dropped when the returned value goes.
    public func createDatabase() throws -> PostgresDatabase {
        let name = "t_" + (0..<12).map { _ in String("0123456789abcdefghijklmnopqrstuvwxyz".randomElement()!) }.joined()
        try Self.run(binDirectory + "/createdb", ["-h", "127.0.0.1", "-p", String(port), "-U", user, "-E", "UTF8", "-T", "template0", name],
                     log: directory + "/createdb.log", what: "createdb \(name)")
        return PostgresDatabase(cluster: self, name: name)
    }

    private init() throws {
        binDirectory = try Self.findBinaries()
        Self.removeAbandoned()
        var template = Array("/tmp/sinki-pg-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            throw PostgresClusterError(description: "cannot make a folder for PostgreSQL: \(String(cString: strerror(errno)))")
        }
        directory = String(cString: made)
        try String(getpid()).write(toFile: directory + "/owner.pid", atomically: true, encoding: .utf8)
        let asUser = try Self.unprivileged(directory)
        let data = directory + "/data"
        try Self.run(asUser.first ?? binDirectory + "/initdb", asUser.isEmpty ? Self.initdbArguments(data) : Array(asUser.dropFirst()) + [binDirectory + "/initdb"] + Self.initdbArguments(data),
                     log: directory + "/initdb.log", what: "initdb")
        // A free port can be taken between our look and postgres's bind: a few tries.
        var lastError: (any Error)?
        var chosen = 0
        for _ in 0..<3 {
            let port = freePort()
            let options = "-p \(port) -k \(directory) -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off "
                + "-c full_page_writes=off -c max_connections=400"
            let arguments = ["start", "-D", data, "-l", directory + "/postgres.log", "-w", "-t", "60", "-o", options]
            do {
                try Self.run(asUser.first ?? binDirectory + "/pg_ctl",
                             asUser.isEmpty ? arguments : Array(asUser.dropFirst()) + [binDirectory + "/pg_ctl"] + arguments,
                             log: directory + "/pg_ctl.log", what: "pg_ctl start (port \(port))")
                chosen = port
                break
            } catch {
                lastError = error
            }
        }
        guard chosen != 0 else {
            let log = (try? String(contentsOfFile: directory + "/postgres.log", encoding: .utf8)) ?? ""
            throw PostgresClusterError(description: "\(lastError.map { "\($0)" } ?? "postgres did not start"); postgres.log: \(log.suffix(2000))")
        }
        port = chosen
        let pid = try Self.postmasterPID(data)
        Self.running.withLock { $0 = (pid, directory) }
        // A literal without captures: atexit takes a C function pointer.
        atexit { PostgresCluster.stopAtExit() }
    }

    private static func initdbArguments(_ data: String) -> [String] {
        ["-D", data, "-U", "sinki", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"]
    }

    /// The newest PostgreSQL's server binaries (Debian puts them in /usr/lib/postgresql/VERSION/bin),
    /// or `SINKI_PG_BIN`.
    private static func findBinaries() throws -> String {
        if let override = ProcessInfo.processInfo.environment["SINKI_PG_BIN"] { return override }
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [])
            .compactMap { name in Double(name).map { (name, $0) } }
            .sorted { $0.1 > $1.1 }
        for (name, _) in versions {
            let bin = "\(root)/\(name)/bin"
            if ["initdb", "pg_ctl", "postgres", "createdb"].allSatisfy({ FileManager.default.isExecutableFile(atPath: "\(bin)/\($0)") }) {
                return bin
            }
        }
        throw PostgresClusterError(description: "the PostgreSQL store's tests need a PostgreSQL server: no initdb, pg_ctl and postgres "
            + "in \(root)/*/bin. Install the postgresql package (packaging/install-deps.sh does), or set SINKI_PG_BIN to its bin folder.")
    }

    /// As root: makes `directory` belong to nobody and returns the `setpriv` prefix that runs a
    /// command as that user. Otherwise nothing to do.
    private static func unprivileged(_ directory: String) throws -> [String] {
        guard geteuid() == 0 else { return [] }
        guard let user = getpwnam("nobody") else { throw PostgresClusterError(description: "running as root, and there is no user nobody to run PostgreSQL as") }
        let uid = user.pointee.pw_uid, gid = user.pointee.pw_gid
        guard chown(directory, uid, gid) == 0, chmod(directory, 0o700) == 0 else {
            throw PostgresClusterError(description: "cannot give \(directory) to nobody: \(String(cString: strerror(errno)))")
        }
        for file in ["owner.pid"] { _ = chown(directory + "/" + file, uid, gid) }
        return ["/usr/bin/setpriv", "--reuid=\(uid)", "--regid=\(gid)", "--clear-groups", "--"]
    }

    /// Runs a program to its end; throws with its log when it fails.
    ///
    /// posix_spawn and waitpid rather than Foundation's Process: Process learns of an exit when a
    /// descriptor it gives the child closes, and the postmaster that `pg_ctl start` leaves running
    /// inherits that descriptor, so a Process never sees pg_ctl end. Here the child gets the log on
    /// stdout and stderr and no other descriptor of the test process (closefrom 3).
    @discardableResult
    static func run(_ executable: String, _ arguments: [String], log: String, what: String) throws -> String {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // glibc 2.34's closefrom action, looked up because Swift's Glibc module does not declare it.
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        if let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") {
            _ = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, 3)
        }
        var environment = ProcessInfo.processInfo.environment
        environment["LC_ALL"] = "C"
        environment.removeValue(forKey: "PGDATA")
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, envp)
        guard spawned == 0 else {
            throw PostgresClusterError(description: "\(what): cannot run \(executable): \(String(cString: strerror(spawned)))")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        // WIFEXITED and WEXITSTATUS are macros Swift does not import: exited normally is low 7 bits 0.
        guard status & 0x7f == 0, (status >> 8) & 0xff == 0 else {
            throw PostgresClusterError(description: "\(what) failed (wait status \(status)): \(output.suffix(2000))")
        }
        return output
    }

    private static func postmasterPID(_ data: String) throws -> pid_t {
        let text = (try? String(contentsOfFile: data + "/postmaster.pid", encoding: .utf8)) ?? ""
        guard let line = text.split(separator: "\n").first, let pid = pid_t(line) else {
            throw PostgresClusterError(description: "postgres started but \(data)/postmaster.pid names no process")
        }
        return pid
    }

    /// Stops the postmaster (immediate shutdown: the data is thrown away) and waits, with a deadline,
    /// for it to be gone before removing its folder.
    private static func stop(pid: pid_t, directory: String) {
        if kill(pid, SIGQUIT) == 0 {
            let deadline = Date().addingTimeInterval(10)
            while isAlive(pid) && Date() < deadline { usleep(10_000) }
            if isAlive(pid) { kill(pid, SIGKILL) }
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Whether `pid` runs: a zombie does not (the daemonized postmaster's parent is whatever reaps
    /// orphans here, which in a container may be nobody).
    private static func isAlive(_ pid: pid_t) -> Bool {
        guard kill(pid, 0) == 0 else { return false }
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return true }
        return stat[stat.index(after: close)...].trimmingPrefix(" ").first != "Z"
    }

    private static func stopAtExit() {
        guard let cluster = running.withLock({ state -> (pid: pid_t, directory: String)? in
            defer { state = nil }
            return state
        }) else { return }
        stop(pid: cluster.pid, directory: cluster.directory)
    }

    /// Clusters of earlier test processes that died without stopping theirs.
    private static func removeAbandoned() {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: "/tmp")) ?? [] where name.hasPrefix("sinki-pg-") {
            let folder = "/tmp/" + name
            guard let owner = (try? String(contentsOfFile: folder + "/owner.pid", encoding: .utf8)).flatMap({ pid_t($0) }),
                  kill(owner, 0) != 0, errno == ESRCH else { continue }
            if let pid = try? postmasterPID(folder + "/data") {
                stop(pid: pid, directory: folder)
            } else {
                try? FileManager.default.removeItem(atPath: folder)
            }
        }
    }
}

/// One database of the tests' cluster; dropped (with `--force`, closing what is still connected)
/// when released.
public final class PostgresDatabase: Sendable {
    public let cluster: PostgresCluster
    public let name: String
    public var url: String { cluster.url(database: name) }

    init(cluster: PostgresCluster, name: String) {
        self.cluster = cluster
        self.name = name
    }

    deinit {
        // Only disk space is at stake: the whole cluster goes at exit.
        _ = try? PostgresCluster.run(cluster.binDirectory + "/dropdb",
                                     ["-h", "127.0.0.1", "-p", String(cluster.port), "-U", cluster.user, "--force", name],
                                     log: cluster.directory + "/dropdb-\(name).log", what: "dropdb \(name)")
    }
}
