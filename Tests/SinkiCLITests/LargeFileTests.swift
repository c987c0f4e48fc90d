import Foundation
import SinkiRecord
import SinkiTestSupport
import Testing

/// Files above `[transfer] inline-max` between two real agents through a real server's tus endpoint
/// (issue 4): uploads and downloads that resume, files that change while they move, damaged assets.
@Suite(.serialized) struct LargeFileTests {
    static let mebibyte = 1 << 20

    /// A config file with a `[transfer]` section of `lines`.
    func config(_ cluster: Cluster, _ name: String, _ lines: [String]) throws -> [String] {
        let path = cluster.directory.child("\(name).conf")
        try writeFile(path, "[transfer]\n" + lines.joined(separator: "\n") + "\n")
        return ["--config", path]
    }

    func random(_ count: Int) throws -> Data {
        let handle = try #require(FileHandle(forReadingAtPath: "/dev/urandom"))
        defer { try? handle.close() }
        return try #require(try handle.read(upToCount: count))
    }

    /// Writes `data` over the file in place (same inode), as a program that rewrites it would.
    func overwrite(_ path: String, _ data: Data) throws {
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.truncate(atOffset: 0)
        try handle.write(contentsOf: data)
        try handle.close()
    }

    /// The bytes the server holds of its uploads (`ID.bin` in its data folder), largest first.
    func serverUploadSizes(_ cluster: Cluster) -> [Int] {
        let folder = cluster.directory.child("server-data") + "/uploads"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        return names.filter { $0.hasSuffix(".bin") }
            .compactMap { (try? FileManager.default.attributesOfItem(atPath: folder + "/" + $0))?[.size] as? Int }
            .sorted(by: >)
    }

    func status(_ cluster: Cluster, _ agent: String) throws -> JSONValue {
        let run = try sinkid(["status", "--json", "--state", cluster.directory.child(agent) + "/state"], in: cluster.directory)
        let json = try run.json()
        #expect(ControlTests.schema.problems(json) == [], "status --json breaks docs/status.schema.json")
        return json
    }

    func transfers(_ json: JSONValue) -> [JSONValue] {
        if case let .array(items)? = json["transfers"] { return items }
        return []
    }

    /// The number in the agent's log line `prefix…: SIZE bytes, N <word> now`, for `path`.
    func bytesNow(_ log: String, _ prefix: String, _ path: String) -> Int? {
        guard let line = log.split(separator: "\n").last(where: { $0.contains("\(prefix) \"\(path)\"") }),
              let comma = line.range(of: " bytes, ") else { return nil }
        return Int(line[comma.upperBound...].prefix { $0.isNumber })
    }

    @Test func aLargeFileAndSmallerOnesReachTheOtherAgentAsAssets() async throws {
        let cluster = Cluster("sinki-tus-agents")
        try cluster.startServer()
        try cluster.startAgent("a")
        try cluster.startAgent("b")
        let a = cluster.root("a"), b = cluster.root("b")
        let big = try random(20 * Self.mebibyte)
        let small = try (0..<3).map { _ in try random(Self.mebibyte) }
        try writeFile(a + "/video/big.bin", big)
        for (index, data) in small.enumerated() { try writeFile(a + "/m\(index).bin", data) }
        try writeFile(a + "/note.txt", "small files stay inline")
        try await cluster.waitForConvergence("a", "b", timeout: 20) { $0.entries["video/big.bin"] != nil && $0.entries.count == 6 }
        #expect(FileManager.default.contents(atPath: b + "/video/big.bin") == big)
        for (index, data) in small.enumerated() { #expect(FileManager.default.contents(atPath: b + "/m\(index).bin") == data) }

        let records = try cluster.serverRecords(withData: true)
        for name in ["video/big.bin", "m0.bin", "m1.bin", "m2.bin"] {
            let record = try #require(records.first { $0.path == "SaveGames/" + name })
            #expect(record.asset != nil && record.data == nil, "\(name) should travel as an asset")
            #expect(record.asset?.size == record.size && record.asset?.sha256 == record.sha256)
        }
        #expect(records.first { $0.path == "SaveGames/note.txt" }?.data != nil)
        // Nothing was left half-way: no upload waits, no download lies about.
        let leftovers = (try? FileManager.default.contentsOfDirectory(atPath: cluster.directory.child("b") + "/state/downloads")) ?? []
        #expect(leftovers.isEmpty)
        // b took the files as they are; it never sends them back.
        #expect(!(cluster.agent("b")?.errors.contains("/v1/uploads/") ?? true))

        // Renamed on a: b renames its copy; nothing is uploaded or downloaded again.
        let uploads = cluster.agent("a")?.errors.components(separatedBy: "POST \(cluster.serverURL)/v1/uploads/").count
        let downloads = cluster.agent("b")?.errors.components(separatedBy: "/v1/assets/").count
        try FileManager.default.moveItem(atPath: a + "/video/big.bin", toPath: a + "/video/renamed.bin")
        try await cluster.waitForConvergence("a", "b", timeout: 20) { $0.entries["video/renamed.bin"] != nil && $0.entries["video/big.bin"] == nil }
        #expect(FileManager.default.contents(atPath: b + "/video/renamed.bin") == big)
        #expect(cluster.agent("a")?.errors.components(separatedBy: "POST \(cluster.serverURL)/v1/uploads/").count == uploads)
        #expect(cluster.agent("b")?.errors.components(separatedBy: "/v1/assets/").count == downloads)
    }

    @Test func anUploadTheServerRefusedIsStartedAgainOnItsOwn() async throws {
        let cluster = Cluster("sinki-upload-again")
        try cluster.startServer(extra: ["--max-upload-size", "1MiB"])
        try cluster.startAgent("a")
        try cluster.startAgent("b")
        let data = try random(2 * Self.mebibyte)
        try writeFile(cluster.root("a") + "/big.bin", data)
        try await waitUntil("the server to refuse the upload", timeout: 30) {
            cluster.agent("a")?.errors.contains("upload of \"SaveGames/big.bin\" failed") ?? false
        }
        #expect(cluster.agent("a")?.errors.contains("tried again in") == true)
        // The operator raises the limit; nobody runs sinkid retry: the upload starts again by itself.
        cluster.stopServer()
        try cluster.restartServer(extra: [])
        try await cluster.waitForConvergence("a", "b", timeout: 120) { $0.entries["big.bin"] != nil }
        #expect(FileManager.default.contents(atPath: cluster.root("b") + "/big.bin") == data)
    }

    @Test func aFileWhoseRecordedHashIsWrongIsReadAgainNotUploadedForever() async throws {
        // Two same-size writes within one tick of the file system's clock leave the stat as it was, so
        // a hash can be recorded for content the file no longer has. The upload's own hash finds that
        // out; the file must then be read again, not sent again and again under the old hash.
        let cluster = Cluster("sinki-upload-wrong-hash")
        try cluster.startServer()
        cluster.stopServer()
        let data = try random(2 * Self.mebibyte)
        try writeFile(cluster.root("a") + "/big.bin", data)
        try cluster.startAgent("a")
        #expect(cluster.stopAgent("a") == 0)
        try cluster.stateSQL("a", "UPDATE files SET sha256 = '\(String(repeating: "ab", count: 32))' WHERE path = 'SaveGames/big.bin'")
        try cluster.restartServer(extra: [])
        try cluster.startAgent("a")
        try cluster.startAgent("b")
        try await cluster.waitForConvergence("a", "b", timeout: 60) { $0.entries["big.bin"] != nil }
        #expect(FileManager.default.contents(atPath: cluster.root("b") + "/big.bin") == data)
        let log = try #require(cluster.agent("a")?.errors)
        #expect(log.components(separatedBy: "changed while it was uploaded").count - 1 == 1, "\(log.suffix(2000))")
    }

    @Test func anUploadKilledHalfWayGoesOnFromTheServersOffset() async throws {
        let cluster = Cluster("sinki-tus-kill")
        try cluster.startServer()
        // 12 s to send it all: a loaded machine still sees it a sixth of the way and kills it long before the end.
        let slow = try config(cluster, "slow", ["chunk-size = 1MiB", "max-rate = 2MiB"])
        try cluster.startAgent("a", extra: slow)
        try cluster.startAgent("b")
        let size = 24 * Self.mebibyte
        let data = try random(size)
        try writeFile(cluster.root("a") + "/big.bin", data)
        try await waitUntil("a sixth of the upload on the server", timeout: 30) {
            (serverUploadSizes(cluster).first ?? 0) >= 4 * Self.mebibyte
        }
        cluster.killAgent("a")
        let onServer = try #require(serverUploadSizes(cluster).first)
        #expect(onServer < size, "the upload finished before the kill; the test proves nothing")
        try cluster.startAgent("a", extra: try config(cluster, "fast", ["chunk-size = 1MiB"]))
        try await cluster.waitForConvergence("a", "b", timeout: 30) { $0.entries["big.bin"] != nil }
        #expect(FileManager.default.contents(atPath: cluster.root("b") + "/big.bin") == data)
        let log = try #require(cluster.agent("a")?.errors)
        #expect(log.contains("resuming /proc/self/fd/"))
        let sentNow = try #require(bytesNow(log, "uploaded", "SaveGames/big.bin"))
        // Sent again: at most the chunk that was in flight at the kill.
        #expect(sentNow <= size - onServer + Self.mebibyte, "sent \(sentNow) bytes after the restart; the server had \(onServer)")
        #expect(log.contains("bytes, \(sentNow) sent now (resumed)"))
    }

    @Test func aFileChangedWhileItIsUploadedIsSentAgainAndThePeerEndsWithTheNewContent() async throws {
        let cluster = Cluster("sinki-tus-change")
        try cluster.startServer()
        try cluster.startAgent("a", extra: try config(cluster, "slow", ["chunk-size = 1MiB", "max-rate = 3MiB"]))
        try cluster.startAgent("b")
        let path = cluster.root("a") + "/changing.bin"
        let second = try random(12 * Self.mebibyte)
        try writeFile(path, try random(24 * Self.mebibyte))
        try await waitUntil("the upload under way", timeout: 20) { (serverUploadSizes(cluster).first ?? 0) >= 2 * Self.mebibyte }
        #expect((serverUploadSizes(cluster).first ?? 0) < 24 * Self.mebibyte, "the first upload finished before the change")
        try overwrite(path, second)
        try await cluster.waitForConvergence("a", "b", timeout: 30) { $0.entries["changing.bin"] != nil }
        #expect(FileManager.default.contents(atPath: cluster.root("b") + "/changing.bin") == second)
        let record = try #require(try cluster.serverRecords().first { $0.path == "SaveGames/changing.bin" })
        #expect(record.size == Int64(second.count))
        #expect(cluster.agent("a")?.errors.contains("changed while it was uploaded") == true)
    }

    @Test func aDownloadCutOffByAKillGoesOnWhereItStopped() async throws {
        let cluster = Cluster("sinki-tus-download")
        try cluster.startServer()
        try cluster.startAgent("a")
        let size = 24 * Self.mebibyte
        let data = try random(size)
        try writeFile(cluster.root("a") + "/big.bin", data)
        try await waitUntil("the record on the server", timeout: 20) {
            try cluster.serverRecords().contains { $0.path == "SaveGames/big.bin" && $0.asset != nil }
        }
        try cluster.startAgent("b", extra: try config(cluster, "slow", ["max-rate = 6MiB"]))
        let downloads = cluster.directory.child("b") + "/state/downloads"
        func partial() -> Int {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: downloads)) ?? []
            return names.filter { $0.hasSuffix(".part") }
                .compactMap { (try? FileManager.default.attributesOfItem(atPath: downloads + "/" + $0))?[.size] as? Int }.max() ?? 0
        }
        try await waitUntil("a third of the download", timeout: 20) { partial() >= 8 * Self.mebibyte }
        cluster.killAgent("b")
        let had = partial()
        #expect(had < size)
        #expect(!FileManager.default.fileExists(atPath: cluster.root("b") + "/big.bin"), "applied before it was whole")
        try cluster.startAgent("b")
        try await cluster.waitForConvergence("a", "b", timeout: 30) { $0.entries["big.bin"] != nil }
        #expect(FileManager.default.contents(atPath: cluster.root("b") + "/big.bin") == data)
        let log = try #require(cluster.agent("b")?.errors)
        let receivedNow = try #require(bytesNow(log, "downloaded", "SaveGames/big.bin"))
        #expect(receivedNow <= size - had, "received \(receivedNow) bytes after the restart; \(had) were there")
    }

    @Test func aDamagedAssetIsNeverAppliedAndRetryFetchesItOnceMended() async throws {
        let cluster = Cluster("sinki-tus-damaged")
        try cluster.startServer()
        try cluster.startAgent("a")
        let data = try random(2 * Self.mebibyte)
        try writeFile(cluster.root("a") + "/save.bin", data)
        var record: Record?
        try await waitUntil("the record on the server", timeout: 20) {
            record = try cluster.serverRecords().first { $0.path == "SaveGames/save.bin" && $0.asset != nil }
            return record != nil
        }
        // A change the feed holds after the damaged one.
        try writeFile(cluster.root("a") + "/later.txt", "comes after the damaged one")
        try await waitUntil("the later record on the server", timeout: 20) {
            try cluster.serverRecords().contains { $0.path == "SaveGames/later.txt" }
        }
        let asset = try #require(record?.asset)
        let stored = cluster.directory.child("server-data") + "/uploads/\(asset.id).bin"
        var damaged = data
        damaged[data.count / 2] ^= 0xff
        try overwrite(stored, damaged)

        try cluster.startAgent("b", extra: try config(cluster, "b", ["attempts = 2"]))
        var failure: JSONValue?
        try await waitUntil("the failed download in status", timeout: 20) {
            failure = transfers(try status(cluster, "b")).first { $0["failed"] != .null && $0["failed"] != nil }
            return failure != nil
        }
        #expect(failure?["path"] == .string("SaveGames/save.bin"))
        #expect(failure?["direction"] == .string("download"))
        if case let .string(reason)? = failure?["failed"] { #expect(reason.contains("SHA-256")) }
        #expect(!FileManager.default.fileExists(atPath: cluster.root("b") + "/save.bin"))
        // The damaged record is kept as not applied, with why; the feed goes on past it.
        var notApplied: JSONValue?
        try await waitUntil("the record listed as not applied, and the one after it applied", timeout: 20) {
            notApplied = try status(cluster, "b")["notApplied"]
            return notApplied?["count"] == .int(1) && readFile(cluster.root("b") + "/later.txt") == "comes after the damaged one"
        }
        let entry = try #require(notApplied?["changes"]?[0])
        #expect(entry["path"] == .string("SaveGames/save.bin"))
        #expect(entry["cause"] == .string("download-failed"))
        if case let .string(reason)? = entry["reason"] { #expect(reason.contains("SHA-256")) }
        let state = try status(cluster, "b")
        #expect(state["remote"]?["upToDate"] == .bool(false))
        #expect(state["agent"]?["state"] == .string("error"))
        let text = try sinkid(["status", "--state", cluster.directory.child("b") + "/state"], in: cluster.directory)
        #expect(text.output.contains("1 not applied") && text.output.contains("not applied  SaveGames/save.bin"))

        try overwrite(stored, data)
        let retry = try sinkid(["retry", "--state", cluster.directory.child("b") + "/state"], in: cluster.directory)
        #expect(retry.code == 0 && retry.output.contains("SaveGames/save.bin"))
        try await cluster.waitForConvergence("a", "b", timeout: 20) { $0.entries["save.bin"] != nil && $0.entries["later.txt"] != nil }
        #expect(FileManager.default.contents(atPath: cluster.root("b") + "/save.bin") == data)
        #expect(transfers(try status(cluster, "b")).isEmpty)
    }

    @Test func anUploadTheServerRefusesIsListedAsFailedUntilRetry() async throws {
        let cluster = Cluster("sinki-tus-refused")
        try cluster.startServer(extra: ["--max-upload-size", "100KiB"])
        let port = cluster.serverPort
        try cluster.startAgent("a")
        let data = try random(Self.mebibyte)
        try writeFile(cluster.root("a") + "/too big.bin", data)
        var failure: JSONValue?
        try await waitUntil("the failed upload in status", timeout: 20) {
            failure = transfers(try status(cluster, "a")).first { $0["failed"] != .null && $0["failed"] != nil }
            return failure != nil
        }
        #expect(failure?["path"] == .string("SaveGames/too big.bin"))
        #expect(failure?["direction"] == .string("upload"))
        #expect(failure?["total"] == .int(Int64(data.count)))
        if case let .string(reason)? = failure?["failed"] { #expect(reason.contains("at most 102400 bytes")) }
        let text = try sinkid(["status", "--state", cluster.directory.child("a") + "/state"], in: cluster.directory)
        #expect(text.output.contains("failed: "))

        // The server takes it now; retry starts the upload again.
        cluster.stopServer()
        try cluster.startServer(port: port)
        let retry = try sinkid(["retry", "SaveGames/too big.bin", "--state", cluster.directory.child("a") + "/state"], in: cluster.directory)
        #expect(retry.code == 0 && retry.output.contains("SaveGames/too big.bin"))
        try await waitUntil("the record on the server", timeout: 20) {
            try cluster.serverRecords().contains { $0.path == "SaveGames/too big.bin" && $0.asset?.size == Int64(data.count) }
        }
        #expect(transfers(try status(cluster, "a")).isEmpty)
    }
}
