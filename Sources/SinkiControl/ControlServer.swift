import Glibc
import SinkiLoop
import SinkiRecord
import SinkiSupport

/// The agent's control socket (`control.sock` in the state folder, mode 0600), served on the
/// agent's event loop: one JSON request per line, one answer per line, in order; `watch` then streams
/// events (docs/control.md). A peer running as another user is refused (`SO_PEERCRED`).
///
/// An actor whose executor is the loop, like the agent: libuv callbacks reach it synchronously.
public actor ControlServer {
    public nonisolated let loop: EventLoop
    public nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }
    public nonisolated let stateDirectory: String

    private weak var handler: (any ControlHandler)?
    private let logger: Logger
    /// The only user allowed to connect.
    private let owner: uid_t
    private var listener: LoopPipeListener?
    private var directory: FileDescriptor?
    /// The socket file's inode, so that `stop` removes only our own.
    private var socketInode: UInt64?
    private var sessions: [Int: Session] = [:]
    private var nextID = 0

    /// Longest request line.
    static let maxLine = 64 * 1024
    static let maxSessions = 64
    /// Watch output a slow reader may leave unread before it is dropped.
    static let maxWatchBacklog = 4 << 20

    public init(loop: EventLoop, stateDirectory: String, handler: any ControlHandler, logger: Logger, owner: uid_t = getuid()) {
        self.loop = loop
        self.stateDirectory = stateDirectory
        self.handler = handler
        self.logger = logger
        self.owner = owner
    }

    /// Creates the socket and starts answering. It is bound under a temporary name, given mode 0600,
    /// then renamed over `control.sock`: no one can connect before the mode is set, and a socket left
    /// by a killed agent is replaced (the state folder's lock says no other agent uses it).
    public func start() throws(ControlError) {
        let directory: FileDescriptor
        do { directory = try ControlSocket.openDirectory(stateDirectory) } catch {
            throw ControlError(.failed, "cannot open the state folder for the control socket: \(error)")
        }
        let temporary = ".control.sock.\(getpid())"
        unlinkat(directory.raw, temporary, 0)
        let listener: LoopPipeListener
        do {
            listener = try LoopPipeListener(loop: loop)
            try listener.bind(ControlSocket.address(of: temporary, in: directory, directoryPath: stateDirectory))
        } catch {
            throw ControlError(.failed, "cannot create the control socket in \(stateDirectory): \(error)")
        }
        do {
            try syscall("chmod", path: temporary) { fchmodat(directory.raw, temporary, 0o600, 0) }
            try syscall("rename", path: ControlSocket.fileName) { renameat(directory.raw, temporary, directory.raw, ControlSocket.fileName) }
            socketInode = try directory.statEntry(ControlSocket.fileName)?.inode
            // Capturing self, the closure is isolated to this actor, and libuv calls it on the loop,
            // which is this actor's executor. The cycle it makes ends in `stop()`.
            try listener.listen { result in
                self.accepted(result)
            }
        } catch {
            listener.close()
            unlinkat(directory.raw, temporary, 0)
            throw ControlError(.failed, "cannot set up the control socket in \(stateDirectory): \(error)")
        }
        self.listener = listener
        self.directory = directory
        logger.debug("control socket \(ControlSocket.path(stateDirectory: stateDirectory))")
    }

    /// Stops answering, hangs up on every client and removes the socket file.
    public func stop() {
        listener?.close()
        listener = nil
        for session in sessions.values { session.connection.close() }
        sessions.removeAll()
        if let directory, let socketInode, (try? directory.statEntry(ControlSocket.fileName))??.inode == socketInode {
            unlinkat(directory.raw, ControlSocket.fileName, 0)
        }
        directory = nil
    }

    /// Sends each event to the `watch` clients whose path covers it.
    public func publish(_ events: [WatchEvent]) {
        for session in sessions.values {
            guard let path = session.watching else { continue }
            var out: [UInt8] = []
            for event in events where path.matches(event.path) { out += event.line }
            if out.isEmpty { continue }
            if session.connection.pendingWriteBytes > Self.maxWatchBacklog {
                logger.warning("dropping a watch client (pid \(session.peerPID)) that does not read its events")
                drop(session.id)
                continue
            }
            session.connection.write(out)
        }
    }

    /// Clients now following `watch`.
    public var watchers: Int { sessions.values.filter { $0.watching != nil }.count }

    // MARK: connections

    private func accepted(_ result: Result<LoopPipeConnection, LoopError>) {
        let connection: LoopPipeConnection
        switch result {
        case let .success(accepted): connection = accepted
        case let .failure(error):
            logger.warning("control socket: cannot accept a connection: \(error)")
            return
        }
        guard let fd = connection.fileDescriptor, let peer = try? ControlSocket.peer(of: fd) else {
            connection.close()
            return
        }
        guard peer.uid == owner else {
            logger.warning("refused a control connection from uid \(peer.uid) (pid \(peer.pid)): only uid \(owner) controls this agent")
            refuse(connection, ControlError(.forbidden, "this agent runs as uid \(owner); uid \(peer.uid) may not control it"))
            return
        }
        guard sessions.count < Self.maxSessions else {
            refuse(connection, ControlError(.unavailable, "too many control connections (\(Self.maxSessions)); try again"))
            return
        }
        let id = nextID
        nextID += 1
        let session = Session(id: id, connection: connection, peerPID: peer.pid)
        sessions[id] = session
        // Isolated to this actor as above; the cycle ends when the connection closes.
        connection.startReading { event in
            self.received(id, event)
        }
    }

    private func refuse(_ connection: LoopPipeConnection, _ error: ControlError) {
        connection.write(ControlResponse.failure(error))
        connection.closeAfterWriting()
    }

    private func received(_ id: Int, _ event: LoopPipeConnection.ReadEvent) {
        guard let session = sessions[id] else { return }
        switch event {
        case let .data(bytes):
            do {
                let lines = try session.lines.append(bytes)
                // A watching client only listens; what it sends is not read as requests.
                if session.watching == nil { session.queue += lines }
            } catch {
                refuse(session.connection, error)
                sessions[id] = nil
                return
            }
            pump(session)
        case .end, .failed:
            drop(id)
        }
    }

    private func drop(_ id: Int) {
        sessions.removeValue(forKey: id)?.connection.close()
    }

    /// Serves the next request of a session; one at a time, so answers keep the requests' order.
    private func pump(_ session: Session) {
        guard !session.busy, session.watching == nil, !session.queue.isEmpty else { return }
        let line = session.queue.removeFirst()
        session.busy = true
        let id = session.id
        Task { await self.serve(id, line) }
    }

    private func serve(_ id: Int, _ line: [UInt8]) async {
        var answer: [UInt8]
        var watch: WatchPath?
        do throws(ControlError) {
            let request = try ControlRequest.parse(line)
            if case let .watch(path) = request { watch = path }
            answer = ControlResponse.success(try await result(of: request))
        } catch {
            answer = ControlResponse.failure(error)
            watch = nil
        }
        guard let session = sessions[id] else { return }
        session.connection.write(answer)
        session.busy = false
        if let watch {
            session.watching = watch
            session.queue.removeAll()
            logger.debug("watch \(watch) for pid \(session.peerPID)")
            return
        }
        pump(session)
    }

    private func result(of request: ControlRequest) async throws(ControlError) -> JSONValue {
        guard let handler else { throw ControlError(.unavailable, "the agent is stopping") }
        switch request {
        case .status: return await handler.status().json
        case let .pause(root): return try await handler.pause(root: root).json
        case let .resume(root): return try await handler.resume(root: root).json
        case let .sync(verify): return await handler.syncNow(verify: verify).json
        case let .retry(path):
            let paths = try await handler.retry(path: path)
            return .object([("requeued", .int(Int64(paths.count))), ("paths", .array(paths.map { .string($0) }))])
        case .conflicts:
            return .object([("conflicts", .array(try await handler.conflicts().map(\.json)))])
        case let .resolve(path, keep): return try await handler.resolve(path: path, keep: keep).json
        case .server: return try await handler.server().json
        case let .watch(path):
            try await handler.checkWatch(path)
            return .object([("watching", .string(path.text))])
        }
    }
}

/// One client connection: its unread bytes, requests waiting, and whether it follows `watch`.
private final class Session {
    let id: Int
    let connection: LoopPipeConnection
    let peerPID: pid_t
    var lines = LineBuffer(limit: ControlServer.maxLine)
    var queue: [[UInt8]] = []
    var busy = false
    var watching: WatchPath?

    init(id: Int, connection: LoopPipeConnection, peerPID: pid_t) {
        self.id = id
        self.connection = connection
        self.peerPID = peerPID
    }
}
