import SinkiControl
import SinkiRecord
import SinkiSupport
import SinkiTestSupport
import Testing

/// The status document against its published schema, with every optional part filled in.
@Suite struct StatusReportTests {
    static let full: StatusReport = {
        let now: Int64 = 1_764_422_400_123_000_000
        return StatusReport(
            generatedAt: now,
            agent: AgentSummary(running: true, pid: 42, version: "0.1.0", device: "laptop", startedAt: now - 60_000_000_000,
                                stateDirectory: "/home/u/.local/state/sinki", state: .syncing, reason: "2 local change(s) to send"),
            server: ServerSummary(url: "https://sync.example.net", embedded: false, reachable: true, lastContact: now - 1_000_000_000,
                                  lastError: ProblemNote(at: now - 5_000_000_000, level: "warning", message: "sinkid: server unreachable")),
            roots: [RootStatus(name: "SaveGames", path: "/home/u/SaveGames", files: 12, bytes: 34_567, state: .syncing, reason: nil)],
            pending: PendingSummary(count: 2, refused: 1, changes: [
                PendingChange(path: "SaveGames/big.bin", kind: .create, queuedAt: now - 9_000_000_000, attempts: 2, refused: "too-large"),
                PendingChange(path: "SaveGames/a.save", kind: .modify, queuedAt: now - 3_000_000_000),
            ]),
            remote: RemoteSummary(upToDate: false, position: "s1f0c3a.1041"),
            skipped: SkippedSummary(count: 2, paths: ["SaveGames/fifo", "SaveGames/notes.txt"],
                                    reasons: ["it is a fifo, socket or device", "extended attributes user.big not kept here: too large"]),
            ignored: 3,
            transfers: [TransferStatus(path: "SaveGames/video.mkv", direction: .upload, done: 12 << 20, total: 26 << 20, rate: 3.5 * 1048576),
                        TransferStatus(path: "SaveGames/huge.iso", direction: .download, done: 0, total: 4 << 30, rate: 0, failed: "gave up after 10 attempts")],
            conflicts: [ConflictEntry(path: "SaveGames/db.kdbx", remoteDevice: "desktop", detectedAt: now - 7_200_000_000_000)])
    }()

    @Test func aFullReportMatchesTheSchemaAndReadsBack() throws {
        let schema = try JSONSchema(file: repositoryRoot() + "/docs/status.schema.json")
        let json = Self.full.json
        #expect(schema.problems(json) == [])
        #expect(try StatusReport(json: json) == Self.full)
    }

    @Test func aMovingTransferCarriesItsTimeLeft() throws {
        guard case let .array(transfers)? = Self.full.json["transfers"] else { Issue.record("no transfers"); return }
        // 14 MiB left at 3.5 MiB/s.
        #expect(transfers.first?["eta"] == .double(4))
        #expect(transfers.last?["eta"] == .null)
        #expect(transfers.last?["failed"] == .string("gave up after 10 attempts"))
    }

    @Test func theSchemaCatchesWhatIsWrong() throws {
        let schema = try JSONSchema(file: repositoryRoot() + "/docs/status.schema.json")
        guard case var .object(members) = Self.full.json else { Issue.record("not an object"); return }
        members.removeAll { $0.0 == "pending" }
        members.append(("extra", .int(1)))
        let problems = schema.problems(.object(members))
        #expect(problems.contains("$: pending is missing"))
        #expect(problems.contains("$: extra is not in the schema"))
    }

    @Test func anotherSchemaVersionIsRefused() {
        guard case var .object(members) = Self.full.json else { Issue.record("not an object"); return }
        members[0] = ("schema", .int(2))
        #expect(throws: ControlError.self) { try StatusReport(json: .object(members)) }
    }
}
