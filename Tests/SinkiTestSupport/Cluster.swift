import Foundation
import SinkiRecord

/// Real sinkid processes for end-to-end tests: a server and agents on temporary folders, on
/// 127.0.0.1 with ports the kernel picks.
public final class Cluster: @unchecked Sendable {
    // @unchecked: a Cluster is used by one test at a time; its arrays are only touched by that test.
    public let directory: TemporaryDirectory
    public private(set) var server: ChildProcess?
    public private(set) var serverPort: Int = 0
    public private(set) var agents: [String: ChildProcess] = [:]
    private var launches = 0

    public init(_ label: String = "sinki-e2e") {
        directory = TemporaryDirectory(label)
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
        let process = try ChildProcess(sinkidExecutable(), ["serve", "--listen", "127.0.0.1:\(port)",
                                                            "--data", data ?? directory.child("server-data"), "--log-level", "debug"] + extra,
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

    /// The root folder of agent `name` (named `rootName`, created if needed).
    public func root(_ name: String, rootName: String = "SaveGames") -> String {
        let path = directory.child(name) + "/" + rootName
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// Starts agent `name` on its root, against the server (or `server`), waiting until its first
    /// scan is done.
    @discardableResult
    public func startAgent(_ name: String, server: String? = nil, rootName: String = "SaveGames", extra: [String] = [],
                           waitForScan: Bool = true) throws -> ChildProcess {
        launches += 1
        let process = try ChildProcess(sinkidExecutable(), ["--root", root(name, rootName: rootName), "--server", server ?? serverURL,
                                                            "--state", directory.child(name) + "/state", "--device", name,
                                                            "--log-level", "debug"] + extra,
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

    public func stopAgent(_ name: String) {
        agents[name]?.stop()
        agents[name] = nil
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
    /// The server's records at `prefix` or below (tombstones included), read with curl; with
    /// `withData`, inline content too.
    public func serverRecords(_ prefix: String = "SaveGames", server: String? = nil, withData: Bool = false) throws -> [Record] {
        var records: [Record] = []
        var after = ""
        while true {
            let url = (server ?? serverURL) + "/v1/records?limit=10000&path=\(prefix)" + (withData ? "&data=1" : "") + (after.isEmpty ? "" : "&after=" + (after.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? after))
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
            process.arguments = ["-sS", "--fail", url]
            let pipe = Pipe()
            process.standardOutput = pipe
            try process.run()
            let data = pipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else { throw ProcessFailed(label: "curl \(url)", log: String(decoding: data, as: UTF8.self)) }
            let page = try RecordPage.parse(Array(data))
            records += page.records
            guard page.more, let last = page.records.last else { return records }
            after = last.path
        }
    }
}
