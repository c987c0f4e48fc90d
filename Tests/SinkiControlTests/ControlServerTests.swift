import Foundation
import SinkiControl
import SinkiLoop
import SinkiRecord
import SinkiSupport
import SinkiTestSupport
import Testing

/// A handler that answers from fixed values and records what it was asked (the agent's own
/// answers are tested end to end in SinkiCLITests).
actor RecordingHandler: ControlHandler {
    nonisolated let loop: EventLoop
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }
    var asked: [String] = []

    init(loop: EventLoop) { self.loop = loop }

    func status() async -> StatusReport {
        asked.append("status")
        return StatusReport(generatedAt: Clock.now(), agent: AgentSummary(running: true, pid: getpid(), stateDirectory: "/s", state: .upToDate),
                            server: ServerSummary(url: "http://127.0.0.1:1"))
    }
    func pause(root: String?) async throws(ControlError) -> ControlAck {
        asked.append("pause" + (root.map { " " + $0 } ?? ""))
        return ControlAck("paused")
    }
    func resume(root: String?) async throws(ControlError) -> ControlAck { asked.append("resume"); return ControlAck("resumed") }
    func syncNow(verify: Bool) async -> ControlAck { asked.append(verify ? "sync --verify" : "sync"); return ControlAck("syncing") }
    func retry(path: String?) async throws(ControlError) -> [String] {
        asked.append("retry \(path ?? "-")")
        if path == "R/none" { throw ControlError(.notFound, "nothing refused at R/none") }
        return ["R/a"]
    }
    func conflicts() async throws(ControlError) -> [ConflictEntry] { [] }
    func resolve(path: String, keep: ResolveChoice) async throws(ControlError) -> ControlAck { ControlAck("kept \(keep.rawValue)") }
    func checkWatch(_ path: WatchPath) async throws(ControlError) {
        if path.rootName == "Other" { throw ControlError(.notFound, "no root named Other") }
    }
    func server() async throws(ControlError) -> ServerAccessNote {
        asked.append("server")
        return ServerAccessNote(url: "http://127.0.0.1:1", tokenFile: "/s/token", caFile: nil, device: "d", roots: [("R", "/r")])
    }
}

/// The control socket on a real loop, spoken to through a real Unix socket.
@Suite(.serialized) struct ControlServerTests {
    final class Fixture: @unchecked Sendable {
        // @unchecked: built once by the test, then only read.
        let thread = LoopThread(name: "control-test")
        let directory = TemporaryDirectory("sinki-control")
        let handler: RecordingHandler
        let server: ControlServer

        init() async throws {
            handler = RecordingHandler(loop: thread.loop)
            server = ControlServer(loop: thread.loop, stateDirectory: directory.path, handler: handler,
                                   logger: Logger(label: "control-test", level: .error))
            try await server.start()
        }

        func stop() async {
            await server.stop()
            thread.stop()
        }
    }

    @Test func theSocketIsTheOwnersOnlyAndGoesAwayOnStop() async throws {
        let fixture = try await Fixture()
        let path = ControlSocket.path(stateDirectory: fixture.directory.path)
        var info = stat()
        #expect(lstat(path, &info) == 0)
        #expect(info.st_mode & S_IFMT == S_IFSOCK)
        #expect(info.st_mode & 0o777 == 0o600)
        // No temporary name is left behind.
        #expect(try FileManager.default.contentsOfDirectory(atPath: fixture.directory.path) == [ControlSocket.fileName])
        await fixture.stop()
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(throws: ControlError.self) { try ControlClient(stateDirectory: fixture.directory.path) }
    }

    @Test func requestsOnOneConnectionAreAnsweredInOrder() async throws {
        let fixture = try await Fixture()
        defer { Task { await fixture.stop() } }
        let client = try ControlClient(stateDirectory: fixture.directory.path)
        #expect(try ControlAck(json: client.send(.pause(root: nil))) == ControlAck("paused"))
        let status = try StatusReport(json: client.send(.status))
        #expect(status.agent.state == .upToDate)
        #expect(try client.send(.retry(path: "R")) == .object([("requeued", .int(1)), ("paths", .array([.string("R/a")]))]))
        #expect(throws: ControlError(.notFound, "nothing refused at R/none")) { try client.send(.retry(path: "R/none")) }
        #expect(try ControlAck(json: client.send(.resolve(path: "R/a", keep: .remote))) == ControlAck("kept remote"))
        #expect(try client.send(.conflicts) == .object([("conflicts", .array([]))]))
        #expect(await fixture.handler.asked == ["pause", "status", "retry R", "retry R/none"])
    }

    @Test func aBadLineIsAnsweredAndTheConnectionGoesOn() async throws {
        let fixture = try await Fixture()
        defer { Task { await fixture.stop() } }
        let socket = try RawSocket(ControlSocket.path(stateDirectory: fixture.directory.path))
        socket.send("this is not json\n{\"command\":\"stauts\"}\n{\"command\":\"resume\"}\n")
        let answers = try socket.lines(3)
        #expect(answers[0].contains(#""ok":false"#) && answers[0].contains(#""code":"bad-request""#))
        #expect(answers[1].contains(#""code":"unknown-command""#) && answers[1].contains("did you mean status?"))
        #expect(answers[2] == #"{"ok":true,"result":{"message":"resumed"}}"#)
    }

    @Test func aLineWithoutEndIsCutOff() async throws {
        let fixture = try await Fixture()
        defer { Task { await fixture.stop() } }
        let socket = try RawSocket(ControlSocket.path(stateDirectory: fixture.directory.path))
        socket.send(String(repeating: "x", count: 80 * 1024))
        let answers = try socket.lines(1)
        #expect(answers[0].contains(#""code":"bad-request""#) && answers[0].contains("longer than"))
        #expect(try socket.lines(1, allowEnd: true).isEmpty, "the connection is closed after the refusal")
    }

    @Test func watchStreamsTheEventsUnderItsPath() async throws {
        let fixture = try await Fixture()
        defer { Task { await fixture.stop() } }
        #expect(throws: ControlError(.notFound, "no root named Other")) {
            try ControlClient(stateDirectory: fixture.directory.path).send(.watch(try WatchPath("Other/")))
        }
        let client = try ControlClient(stateDirectory: fixture.directory.path, timeout: 5)
        #expect(try client.send(.watch(try WatchPath("R/slot/"))) == .object([("watching", .string("R/slot/"))]))
        try await waitUntil("the watch to be registered") { await fixture.server.watchers == 1 }
        func event(_ path: String, _ kind: String) -> WatchEvent {
            WatchEvent(path: path, line: Array(#"{"path":"\#(path)","event":"\#(kind)"}"#.utf8) + [10])
        }
        await fixture.server.publish([event("R/other.save", "changed"), event("R/slot/a.save", "changed"), event("R/slot/deep/b", "deleted")])
        let firstLine = try client.readLine()
        let secondLine = try client.readLine()
        let first = try JSONValue.parse(try #require(firstLine))
        let second = try JSONValue.parse(try #require(secondLine))
        #expect(first["path"] == .string("R/slot/a.save") && first["event"] == .string("changed"))
        #expect(second["path"] == .string("R/slot/deep/b") && second["event"] == .string("deleted"))
    }

    @Test func theNotifierSendsDatagramsToSystemd() throws {
        let directory = TemporaryDirectory("sinki-notify")
        let listener = try DatagramListener(directory.child("notify"), timeoutSeconds: 10)
        let notifier = try #require(ServiceNotifier(socketPath: directory.child("notify")))
        notifier.ready(status: "syncing 1 root(s)")
        notifier.status("syncing 1 root(s)")
        notifier.status("paused")
        notifier.stopping()
        #expect(try listener.receive() == "READY=1\nSTATUS=syncing 1 root(s)")
        #expect(try listener.receive() == "STATUS=paused", "a repeated status is not sent again")
        #expect(try listener.receive() == "STOPPING=1\nSTATUS=stopping")
        #expect(ServiceNotifier(socketPath: nil) == nil)
        #expect(ServiceNotifier(socketPath: "") == nil)
    }
}

/// A plain client socket for sending bytes that are not requests.
final class RawSocket {
    let fd: Int32
    var buffer: [UInt8] = []

    init(_ path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in for (i, byte) in path.utf8.enumerated() { raw[i] = byte } }
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard status == 0 else { throw SystemError("connect", errno: errno, path: path) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    func send(_ text: String) {
        var bytes = Array(text.utf8)
        _ = bytes.withUnsafeMutableBytes { write(fd, $0.baseAddress, $0.count) }
    }

    /// The next `count` lines; fewer only when the peer closed and `allowEnd`.
    func lines(_ count: Int, allowEnd: Bool = false) throws -> [String] {
        var out: [String] = []
        while out.count < count {
            if let newline = buffer.firstIndex(of: 10) {
                out.append(String(decoding: buffer[..<newline], as: UTF8.self))
                buffer.removeSubrange(...newline)
                continue
            }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let got = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if got > 0 { buffer += chunk[..<got]; continue }
            if got == 0 && allowEnd { return out }
            throw SystemError("read", errno: got == 0 ? ECONNRESET : errno)
        }
        return out
    }
}
