import Foundation
import SinkiRecord

/// Real sinkid processes for end-to-end tests: a server and agents on temporary folders, on
/// 127.0.0.1 with ports the kernel picks. Run as users deploy: the server checks device tokens, and each
/// agent gets a token of its own (of one user, so that they share their records); a cluster without
/// authentication is the exception a test asks for (`authenticated: false`).
public final class Cluster: @unchecked Sendable {
    // @unchecked: a Cluster is used by one test at a time; its arrays are only touched by that test.
    public let directory: TemporaryDirectory
    public private(set) var server: ChildProcess?
    public private(set) var serverPort: Int = 0
    /// The data folder and extra flags of the last server started, for `restartServer`.
    public private(set) var serverData: String?
    /// The PostgreSQL database the server keeps its records and accounts in (`--database`), if any.
    public private(set) var serverDatabase: String?
    private var serverExtra: [String] = []
    public private(set) var agents: [String: ChildProcess] = [:]
    private var launches = 0
    /// The server checks tokens (the default), and agents get theirs.
    public let authenticated: Bool
    /// Each agent's token file, made on its first start.
    private var tokenFiles: [String: String] = [:]
    private var inspector: String?

    public init(_ label: String = "sinki-e2e", authenticated: Bool = true) {
        directory = TemporaryDirectory(label)
        self.authenticated = authenticated
    }

    deinit {
        for agent in agents.values { agent.stop(timeout: 5) }
        server?.stop(timeout: 5)
    }

    public var serverURL: String { "http://127.0.0.1:\(serverPort)" }

    /// Starts `sinkid serve` on a free port (or `port`), waiting until it listens.
    @discardableResult
    public func startServer(port: Int = 0, data: String? = nil, extra: [String] = []) throws -> ChildProcess {
        launches += 1
        let data = data ?? directory.child("server-data")
        serverData = data
        serverExtra = extra
        // Accounts live where the records do: token add is told the same database.
        if let index = extra.firstIndex(of: "--database"), index + 1 < extra.count { serverDatabase = extra[index + 1] }
        let process = try ChildProcess(sinkidExecutable(), ["serve", "--listen", "127.0.0.1:\(port)",
                                                            "--data", data, "--log-level", "debug"] + (authenticated ? [] : ["--insecure-no-auth"]) + extra,
                                       logDirectory: directory.path, label: "server-\(launches)")
        try waitUntilSync("server to listen", timeout: 15) {
            if !process.isRunning { throw ProcessFailed(label: "server", log: process.errors) }
            guard let range = process.errors.range(of: "(port ") else { return false }
            let digits = process.errors[range.upperBound...].prefix { $0.isNumber }
            serverPort = Int(digits) ?? 0
            return serverPort > 0
        }
        server = process
        return process
    }

    public func stopServer() {
        server?.stop()
        server = nil
    }

    /// SIGKILL to the server, then its exit.
    public func killServer() {
        server?.kill9()
        server = nil
    }

    /// Starts the server again on the port and data folder it had. A port just freed may be held
    /// for a moment (another socket of this machine may have been given it), so a server that
    /// cannot bind is started again until `timeout`.
    @discardableResult
    public func restartServer(timeout: Double = 20, extra: [String]? = nil) throws -> ChildProcess {
        let port = serverPort
        let deadline = Date().addingTimeInterval(timeout)
        let flags = extra ?? serverExtra
        while true {
            do {
                let process = try startServer(port: port, data: serverData, extra: flags)
                precondition(serverPort == port, "bug: the server came back on port \(serverPort), not \(port)")
                return process
            } catch let error as ProcessFailed where Date() < deadline && error.log.contains("cannot listen") {
                usleep(200_000) // inside a loop with a deadline: the port is still taken
            }
        }
    }

    /// The root folder of agent `name` (named `rootName`, created if needed).
    public func root(_ name: String, rootName: String = "SaveGames") -> String {
        let path = directory.child(name) + "/" + rootName
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// Starts agent `name` on its root, against the server (or `server`), waiting until its first
    /// scan is done.
    @discardableResult
    /// `prefix` runs the agent through a wrapper (`setpriv ...`), which gets the executable after it.
    public func startAgent(_ name: String, server: String? = nil, rootName: String = "SaveGames", extra: [String] = [],
                           prefix: [String] = [], waitForScan: Bool = true) throws -> ChildProcess {
        let token = try tokenFile(for: name)
        launches += 1
        let arguments = ["--root", root(name, rootName: rootName), "--server", server ?? serverURL,
                         "--state", directory.child(name) + "/state", "--device", name, "--log-level", "debug"]
            + (token.map { ["--token-file", $0] } ?? []) + extra
        let process = try ChildProcess(prefix.first ?? sinkidExecutable(),
                                       prefix.isEmpty ? arguments : Array(prefix.dropFirst()) + [sinkidExecutable()] + arguments,
                                       logDirectory: directory.path, label: "agent-\(name)-\(launches)")
        agents[name] = process
        if waitForScan {
            try waitUntilSync("agent \(name) to scan", timeout: 15) {
                if !process.isRunning { throw ProcessFailed(label: "agent \(name)", log: process.errors) }
                return process.errors.contains("scanned ")
            }
        }
        return process
    }

    public func agent(_ name: String) -> ChildProcess? { agents[name] }

    /// Runs `sql` on the SQLite database at `path` with python3's sqlite3 (the tests do not link SQLite):
    /// statements as one script, or with `query` one query whose rows' first column is printed and
    /// returned, a line each.
    private func sqlite(_ path: String, _ sql: String, label: String, query: Bool = false) throws -> String {
        let script = query
            ? "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); [print(row[0]) for row in c.execute(sys.argv[2])]"
            : "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.executescript(sys.argv[2]); c.commit()"
        let process = try ChildProcess("/usr/bin/env", ["python3", "-c", script, path, sql],
                                       logDirectory: directory.path, label: "sql-\(UInt64.random(in: 0...UInt64.max))")
        guard process.waitForExit() == 0 else { throw ProcessFailed(label: label, log: process.errors) }
        return process.output
    }

    /// The server's SQLite store (`server-data/records.db`).
    private func serverStore(_ what: String) throws -> String {
        guard let data = serverData else { throw ProcessFailed(label: what, log: "no server data folder") }
        return data + "/records.db"
    }

    /// Runs `statement` on agent `name`'s stopped state database.
    public func stateSQL(_ name: String, _ statement: String) throws {
        _ = try sqlite(directory.child(name) + "/state/state.db", statement, label: "sql on \(name)'s state")
    }

    /// Runs several statements on a stopped agent's state database, in one script.
    public func stateScript(_ name: String, _ statements: String) throws {
        _ = try sqlite(directory.child(name) + "/state/state.db", statements, label: "sql script on \(name)'s state")
    }

    /// Runs `statements` on the stopped server's SQLite store, as `stateSQL` does on an agent's.
    public func serverSQL(_ statements: String) throws {
        _ = try sqlite(try serverStore("sql on the server's store"), statements, label: "sql on the server's store")
    }

    /// How many saves the running server's SQLite store has taken in all: the records it holds now and
    /// the versions they replaced (change tags are drawn from the clock, so their difference counts
    /// nothing). Read beside the running server, as any reader of its WAL database may.
    public func serverSaveCount() throws -> Int {
        let label = "counting the server's saves"
        let printed = try sqlite(try serverStore(label), "SELECT (SELECT count(*) FROM records) + (SELECT count(*) FROM versions)",
                                 label: label, query: true)
        guard let count = Int(printed.trimmingCharacters(in: .whitespacesAndNewlines)) else { throw ProcessFailed(label: label, log: printed) }
        return count
    }

    /// Every content id (SHA-256) the running server's SQLite store holds or held, at any path: its
    /// records and every version they replaced. The fault suite's run rule asks whether a version
    /// ever reached the server.
    public func serverContentIDs() throws -> Set<String> {
        let label = "reading the server's content ids"
        let printed = try sqlite(try serverStore(label), "SELECT sha256 FROM records UNION SELECT sha256 FROM versions",
                                 label: label, query: true)
        return Set(printed.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
    }

    /// The user all the cluster's agents belong to.
    public static let user = "owner"

    /// Agent `name`'s token file: a device token of `Cluster.user` made with `sinkid serve token add` on
    /// the server's data folder (beside the running server); nil without authentication or a server.
    /// Agent `name` reads its token from `path` (one the test made itself) instead of one made for it.
    public func useTokenFile(_ path: String, for name: String) {
        tokenFiles[name] = path
    }

    public func tokenFile(for name: String) throws -> String? {
        guard authenticated, serverData != nil else { return nil }
        if let made = tokenFiles[name] { return made }
        let made = try makeToken(user: Self.user, device: name)
        let path = directory.child(name) + "/token"
        try FileManager.default.createDirectory(atPath: directory.child(name), withIntermediateDirectories: true)
        try Data((made + "\n").utf8).write(to: URL(fileURLWithPath: path))
        // As docs/tokens.md says to keep one: an agent warns about a token file others can read.
        chmod(path, 0o600)
        tokenFiles[name] = path
        return path
    }

    /// Forgets the tokens made so far (a server made afresh knows none of them): agents started from
    /// now on get new ones.
    public func forgetTokens() {
        tokenFiles = [:]
        inspector = nil
    }

    /// The token a test reads the server's records with (a device of its own, `inspector`).
    public func inspectorToken() throws -> String? {
        guard authenticated, serverData != nil else { return nil }
        if let made = inspector { return made }
        inspector = try makeToken(user: Self.user, device: "inspector")
        return inspector
    }

    /// A new device token for `user` (made if new) on the cluster's server, with `extra` flags
    /// (`--read-only`, `--prefix P/`, …); returns its text.
    public func makeToken(user: String, device: String, extra: [String] = []) throws -> String {
        guard let data = serverData else { throw ProcessFailed(label: "token add", log: "no server data folder: start the server first") }
        let process = try ChildProcess(sinkidExecutable(), ["serve", "token", "add", user, "--device", device, "--data", data]
                                           + (serverDatabase.map { ["--database", $0] } ?? []) + extra,
                                       logDirectory: directory.path, label: "token-\(user)-\(device)-\(UInt32.random(in: 0...UInt32.max))")
        guard process.waitForExit(timeout: 20) == 0,
              let token = process.output.split(separator: "\n").last.map(String.init), !token.isEmpty else {
            throw ProcessFailed(label: "sinkid serve token add \(user)", log: process.errors + process.output)
        }
        return token
    }

    /// SIGTERM to agent `name` once it can take it (a moment after its start: `ChildProcess.handles`),
    /// then its exit status (nil if it was not running).
    @discardableResult
    public func stopAgent(_ name: String) -> Int32? {
        if let agent = agents[name] {
            try? waitUntilSync("agent \(name) to take SIGTERM", timeout: 10, interval: 0.001) { agent.handles(SIGTERM) || !agent.isRunning }
        }
        let code = agents[name]?.stop()
        agents[name] = nil
        return code
    }

    public func killAgent(_ name: String) {
        agents[name]?.kill9()
        agents[name] = nil
    }

    /// Waits until the roots of agents `a` and `b` hold the same tree (and, if given, until
    /// `condition` holds for it).
    public func waitForConvergence(_ a: String, _ b: String, timeout: Double = 2, rootName: String = "SaveGames",
                                   _ condition: ((TreeSnapshot) -> Bool)? = nil) async throws {
        let left = root(a, rootName: rootName), right = root(b, rootName: rootName)
        do {
            // Cheap comparisons (sizes, times) while waiting; bytes only once those agree.
            try await waitUntil("\(a) and \(b) to converge", timeout: timeout, interval: 0.02) {
                let quick = TreeSnapshot(left, content: false)
                guard quick == TreeSnapshot(right, content: false) else { return false }
                let snapshot = TreeSnapshot(left)
                return snapshot == TreeSnapshot(right) && (condition?(snapshot) ?? true)
            }
        } catch {
            let snapshot = TreeSnapshot(left)
            var difference = snapshot.difference(TreeSnapshot(right))
            if difference.isEmpty {
                difference = ["(trees are equal, \(snapshot.entries.count) entries, but the condition does not hold)"]
                    + snapshot.entries.keys.sorted().prefix(400).map { "  \($0)" }
            }
            throw ConvergenceFailed(what: "\(error)", difference: difference, logs: agents.map { "\($0.key): \($0.value.errors.suffix(3000))" })
        }
    }
}

/// A process a test started that exited early.
public struct ProcessFailed: Error, CustomStringConvertible {
    public var label: String
    public var log: String
    public var description: String { "\(label) exited early:\n\(log.suffix(4000))" }
}

/// Two roots that did not converge, with what differs and the agents' last log lines.
public struct ConvergenceFailed: Error, CustomStringConvertible {
    public var what: String
    public var difference: [String]
    public var logs: [String]
    public var description: String {
        "\(what)\ndiffering paths:\n" + difference.prefix(420).joined(separator: "\n") + "\n--- logs ---\n" + logs.joined(separator: "\n---\n")
    }
}

extension Cluster {
    /// Runs curl against the server as the inspector device (its token, when the cluster has one) and
    /// returns what it printed; throws with curl's output when it fails.
    private func curl(_ arguments: [String], label: String) throws -> [UInt8] {
        let process = try ChildProcess("/usr/bin/curl", ["-sS", "--fail"] + arguments + (try inspectorToken().map { ["-H", "Authorization: Bearer \($0)"] } ?? []),
                                       logDirectory: directory.path, label: "curl-\(UInt64.random(in: 0...UInt64.max))")
        guard process.waitForExit() == 0 else { throw ProcessFailed(label: label, log: process.output + process.errors) }
        return Array((try? Data(contentsOf: URL(fileURLWithPath: process.outputPath))) ?? Data())
    }

    /// Saves `records` at the server as the inspector device would (curl); returns the results' statuses.
    @discardableResult
    public func saveRecords(_ records: [Record]) throws -> [String] {
        let body = directory.child("modify-\(UInt64.random(in: 0...UInt64.max)).json")
        try Data(ModifyRequest(records: records).jsonBytes).write(to: URL(fileURLWithPath: body))
        let answer = try curl(["-H", "Content-Type: application/json", "--data-binary", "@" + body, serverURL + "/v1/records/modify"],
                              label: "curl modify")
        return try ModifyResponse.parse(answer).results.map(\.status.rawValue)
    }

    /// The change tag the server's feed ends at: the last save it took, of any path (sinki's own
    /// records, such as the conflicts every device lists, included).
    public func serverFeedEnd() throws -> Int64 {
        var since = ""
        while true {
            let url = serverURL + "/v1/changes?wait=0&limit=1000" + (since.isEmpty ? "" : "&since=" + since)
            let page = try RecordPage.parse(try curl([url], label: "curl \(url)"))
            since = page.token
            guard page.more else { return Int64(page.token.split(separator: ".").last ?? "") ?? 0 }
        }
    }

    /// The server's records at `prefix` or below (tombstones included), read with curl; with
    /// `withData`, inline content too.
    public func serverRecords(_ prefix: String = "SaveGames", server: String? = nil, withData: Bool = false) throws -> [Record] {
        var records: [Record] = []
        var after = ""
        while true {
            let url = (server ?? serverURL) + "/v1/records?limit=10000&path=\(prefix)" + (withData ? "&data=1" : "")
                + (after.isEmpty ? "" : "&after=" + (after.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? after))
            let page = try RecordPage.parse(try curl([url], label: "curl \(url)"))
            records += page.records
            guard page.more, let last = page.records.last else { return records }
            after = last.path
        }
    }
}
