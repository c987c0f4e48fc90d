import SinkiControl
import SinkiRecord
import Testing

/// The request and answer lines of docs/control.md, read and written.
@Suite struct RequestTests {
    @Test func everyRequestSurvivesItsLine() throws {
        let requests: [ControlRequest] = [
            .status, .pause(root: nil), .pause(root: "SaveGames"), .resume(root: nil), .resume(root: "/home/a/Notes"), .sync(verify: false), .sync(verify: true), .retry(path: nil), .retry(path: "SaveGames/a b.save"), .conflicts,
            .resolve(path: "SaveGames/x.kdbx", keep: .both), .watch(try WatchPath("SaveGames/")), .watch(try WatchPath("/")),
        ]
        for request in requests {
            #expect(try ControlRequest.parse(request.line) == request)
            #expect(!request.line.contains(UInt8(ascii: "\n")))
        }
    }

    @Test func badRequestsSayWhatIsWrong() {
        #expect(throws: ControlError(.badRequest, "request.command: expected a string")) { try ControlRequest.parse(Array(#"{"cmd":"status"}"#.utf8)) }
        #expect(throws: ControlError(.unknownCommand, #"unknown command "stauts"; did you mean status?"#)) {
            try ControlRequest.parse(Array(#"{"command":"stauts"}"#.utf8))
        }
        #expect(throws: ControlError(.badRequest, #"keep must be local, remote or both, not "mine""#)) {
            try ControlRequest.parse(Array(#"{"command":"resolve","path":"R/a","keep":"mine"}"#.utf8))
        }
        #expect(throws: ControlError.self) { try ControlRequest.parse(Array("not json".utf8)) }
    }

    @Test func watchPathsCoverWhatTheySay() throws {
        let folder = try WatchPath("SaveGames/slot 1/")
        #expect(folder.matches("SaveGames/slot 1/a.save"))
        #expect(folder.matches("SaveGames/slot 1/deep/b.save"))
        #expect(!folder.matches("SaveGames/slot 10/a.save"))
        let one = try WatchPath("SaveGames/a.save")
        #expect(one.matches("SaveGames/a.save") && !one.matches("SaveGames/a.save2"))
        #expect(try WatchPath("/").matches("Other/x"))
        #expect(try WatchPath("SaveGames/").rootName == "SaveGames")
        #expect(throws: ControlError.self) { try WatchPath("SaveGames") }
        #expect(throws: ControlError.self) { try WatchPath("SaveGames/../x") }
        #expect(throws: ControlError.self) { try WatchPath("/abs/path") }
    }

    @Test func answersCarryResultsOrErrors() throws {
        let ok = ControlResponse.success(.object([("message", .string("paused"))]))
        #expect(ok.last == UInt8(ascii: "\n"))
        #expect(try ControlAck(json: ControlResponse.parse(Array(ok.dropLast()))) == ControlAck("paused"))
        let failure = ControlResponse.failure(ControlError(.notFound, "no conflict at R/a"))
        #expect(throws: ControlError(.notFound, "no conflict at R/a")) { try ControlResponse.parse(Array(failure.dropLast())) }
    }

    @Test func timesRoundTripToTheMillisecond() {
        let now: Int64 = 1_764_422_400_123_000_000
        #expect(Timestamp.parse(Timestamp.format(now)) == now)
        #expect(Timestamp.parse("2026-11-01T12:00:00Z") != nil)
        #expect(Timestamp.parse("2026-11-01 12:00:00Z") == nil)
        #expect(Timestamp.parse("yesterday") == nil)
    }
}
