import Glibc
import SinkiConfig
import SinkiControl
import SinkiLoop
import SinkiRecord
import SinkiSupport
import SinkiTransfer
import Synchronization

/// `history`, `cat` and `restore`: the server's kept versions (docs/protocol.md, "History"). Each finds
/// its agent through `--state`, asks it where its server is and which token file it uses (`server` on
/// the control socket), and then asks that server itself with the agent's token. A restore is a change
/// the server saves and every agent, this one included, receives through its feed.
enum HistoryCommands {
    static func run(_ name: String, _ words: [String]) throws(UsageError) -> ExitCode {
        guard let spec = CommandCatalog.spec(name) else { throw UsageError("unknown command \(name)") }
        guard let arguments = try Arguments.orHelp(words, spec) else { return .success }
        let json = arguments.has("json")
        let job = try job(name, arguments)
        let state = try ControlCommands.stateDirectory(arguments)
        let access: ServerAccessNote
        do {
            let client = try ControlClient(stateDirectory: state, timeout: 30)
            access = try ServerAccessNote(json: try client.send(.server))
        } catch {
            return ControlCommands.report(error, json: json, stateDirectory: state)
        }
        var token: String?
        if let file = access.tokenFile {
            guard let bytes = try? FileDescriptor.open(file, flags: O_RDONLY).readAll() else {
                throw UsageError("cannot read the agent's token file \(file)", code: .config)
            }
            token = String(decoding: bytes, as: UTF8.self).filter { !$0.isWhitespace }
        }
        let resolved = try job.resolvingPaths(roots: access.roots)
        let logger = Logger(label: "sinkid \(name)", level: .warning)
        let loop = EventLoop()
        let session = HistorySession(loop: loop, logger: logger, access: access, token: token)
        let outcome = Mutex<Result<[String], SyncError>?>(nil)
        Task {
            let result = await session.run(resolved, json: json)
            outcome.withLock { $0 = result }
            loop.stop()
        }
        loop.run()
        switch outcome.withLock({ $0 }) {
        case .success(let lines)?:
            for line in lines { Output.line(line) }
            return .success
        case .failure(let error)?:
            return report(error, server: access.url, json: json)
        case nil:
            throw UsageError("\(name) ended without a result", code: .software)
        }
    }

    /// What a command line asks for, checked before anything is asked of the agent.
    enum Job: Sendable {
        case history(path: String)
        case cat(path: String, version: Int64)
        case restore(RestoreRequest)

        /// Record paths as typed, or a file's own path within one of the agent's roots (`~/SaveGames/a`).
        func resolvingPaths(roots: [(name: String, path: String)]) throws(UsageError) -> Job {
            func resolve(_ text: String) throws(UsageError) -> String {
                guard text.hasPrefix("/") else { return text }
                for root in roots {
                    if text == root.path || text == root.path + "/" { return root.name }
                    if text.utf8.starts(with: (root.path + "/").utf8) { return root.name + "/" + String(text.dropFirst(root.path.count + 1)) }
                }
                throw UsageError("\(text) is in none of the agent's roots (" + roots.map { "\($0.name): \($0.path)" }.joined(separator: ", ") + ")")
            }
            switch self {
            case let .history(path): return .history(path: try resolve(path))
            case let .cat(path, version): return .cat(path: try resolve(path), version: version)
            case let .restore(request):
                switch request.target {
                case let .version(path, version, to):
                    return .restore(RestoreRequest(.version(path: try resolve(path), version: version, to: try to.map(resolve)), dryRun: request.dryRun))
                case let .folder(folder, at):
                    return .restore(RestoreRequest(.folder(try resolve(folder), at: at), dryRun: request.dryRun))
                }
            }
        }
    }

    static func job(_ name: String, _ arguments: Arguments) throws(UsageError) -> Job {
        let operands = arguments.positional
        guard let given = operands.first else { throw UsageError("\(name) needs a PATH, a record path such as SaveGames/a.save (see sinkid help \(name))") }
        if operands.count > 1 { throw UsageError("unexpected argument \(operands[1]) (see sinkid help \(name))") }
        let folder = given.hasSuffix("/")
        let path = ControlCommands.recordPath(absolute(given))
        func version() throws(UsageError) -> Int64 {
            guard let text = arguments.value("version") else { throw UsageError("\(name) needs --version N (sinkid history \(path) lists them)") }
            guard let number = Int64(text), number > 0 else { throw UsageError("--version \(text) is not a version number (sinkid history \(path) lists them)") }
            return number
        }
        switch name {
        case "history":
            return .history(path: path)
        case "cat":
            return .cat(path: path, version: try version())
        case "restore":
            let dryRun = arguments.has("dry-run")
            if let at = arguments.value("at") {
                guard arguments.value("version") == nil else { throw UsageError("restore takes --version (one path) or --at (a folder), not both") }
                guard arguments.value("to") == nil else { throw UsageError("--to is for one version; a folder is restored in place") }
                guard let moment = Moment.parse(at, now: Clock.now()) else {
                    throw UsageError("--at \(at) is not a time: RFC 3339 (2026-12-01T18:00:00Z), local (2026-12-01 18:00[:SS]) or an age (10m, 2h, 3d)")
                }
                return .restore(RestoreRequest(.folder(path, at: moment), dryRun: dryRun))
            }
            guard !folder else { throw UsageError("restore \(given) needs --at TIME (a folder at a moment); one file takes --version N") }
            let to = arguments.value("to").map { ControlCommands.recordPath(absolute($0)) }
            return .restore(RestoreRequest(.version(path: path, version: try version(), to: to), dryRun: dryRun))
        default:
            throw UsageError("unknown command \(name)")
        }
    }

    /// A path as typed: absolute when it names a file here (`~/…`, `./…`), else a record path.
    private static func absolute(_ text: String) -> String {
        if text.hasPrefix("./") || text.hasPrefix("../") || text == "." { return RunCommand.absolute(text) }
        return text
    }

    /// One line for people on stderr (and a JSON error document with `--json`); the exit code.
    static func report(_ error: SyncError, server: String, json: Bool) -> ExitCode {
        let code: ExitCode
        var message: String
        switch error {
        case let .transport(transport):
            code = .unavailable
            message = "server \(server) unreachable: \(transport)"
        case let .problem(problem):
            message = problem.detail.isEmpty ? problem.title : problem.detail
            switch problem.status {
            case 401, 403: code = .noPermission
            case 404, 409, 410: code = .dataError
            case 507: code = .temporaryFailure
            case 400..<500: code = .usage
            default: code = .temporaryFailure
            }
            message += " (\(problem.status) \(problem.code))"
        case let .rateLimited(_, seconds):
            code = .temporaryFailure
            message = "the server asks to slow down" + (seconds.map { ": try again in \($0) s" } ?? "")
        case let .badResponse(detail):
            code = .software
            message = detail
        }
        SinkidCommand.printError(message)
        if json { Output.json(.object([("error", .object([("code", .int(Int64(code.rawValue))), ("message", .string(message))]))])) }
        return code
    }

    /// A version's line for people: number, local time, device, size, mode, start of its hash.
    static func describe(_ entry: VersionEntry, current: Bool) -> String {
        let record = entry.record
        var line = "\(entry.version)  \(Moment.local(entry.savedAt))  \(record.device)  "
        if record.deleted {
            line += "deleted"
        } else if record.kind == .directory {
            line += "folder  " + String(record.mode, radix: 8)
        } else {
            line += "\(HumanUnits.bytes(record.size))  " + String(record.mode, radix: 8) + "  " + String(record.sha256.prefix(12))
        }
        return current ? line + "  (current)" : line
    }

    /// The JSON of `sinkid history --json`.
    static func json(_ path: String, _ versions: [VersionEntry]) -> JSONValue {
        .object([("path", .string(path)), ("versions", .array(versions.map { entry in
            .object([("version", .int(entry.version)), ("time", .string(Moment.utc(entry.savedAt))), ("device", .string(entry.record.device)),
                     ("size", .int(entry.record.size)), ("sha256", .string(entry.record.sha256)), ("deleted", .bool(entry.record.deleted)),
                     ("mode", .int(Int64(entry.record.mode))), ("type", .string(entry.record.type))])
        }))])
    }
}

/// Runs one history command on the loop, as the agent's actor runs its requests.
private actor HistorySession {
    nonisolated let loop: EventLoop
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }
    private let client: SyncClient

    /// Bytes asked for in one range of an asset: whole chunks up to about this much.
    static let rangeBytes: Int64 = 8 << 20

    init(loop: EventLoop, logger: Logger, access: ServerAccessNote, token: String?) {
        self.loop = loop
        let http = HTTPClient(loop: loop, logger: logger)
        http.caFile = access.caFile
        client = SyncClient(http: http, base: access.url, token: token, device: access.device)
    }

    /// The lines to print (a `cat` writes its bytes itself, as they come).
    func run(_ job: HistoryCommands.Job, json: Bool) async -> Result<[String], SyncError> {
        do throws(SyncError) {
            switch job {
            case let .history(path): return .success(try await history(path, json: json))
            case let .cat(path, version): try await cat(path, version: version); return .success([])
            case let .restore(request): return .success(try await restore(request, json: json))
            }
        } catch {
            return .failure(error)
        }
    }

    private func history(_ path: String, json: Bool) async throws(SyncError) -> [String] {
        var versions: [VersionEntry] = []
        var before: Int64?
        while true {
            let page = try await client.versions(of: path, before: before)
            versions += page.versions
            guard page.more, let last = page.versions.last else { break }
            before = last.version
        }
        if json {
            var writer = JSONWriter()
            HistoryCommands.json(path, versions).write(to: &writer)
            return [String(decoding: writer.bytes, as: UTF8.self)]
        }
        if versions.isEmpty { return ["\(path): no versions (never synced, or older than the server's history)"] }
        return ["\(path): \(versions.count) version(s), newest first"]
            + versions.map { "  " + HistoryCommands.describe($0, current: $0.supersededAt == nil) }
    }

    /// Writes version `version`'s bytes to standard output, each checked against its name before it is.
    private func cat(_ path: String, version: Int64) async throws(SyncError) {
        let record = try await client.version(version, of: path).record
        if record.deleted { throw .problem(Problem(.deletedVersion, detail: "version \(version) of \(quoted(path)) is its delete: it has no content")) }
        if record.kind == .directory { throw .problem(Problem(.badRequest, detail: "version \(version) of \(quoted(path)) is a folder: it has no content")) }
        guard let asset = record.asset else {
            let bytes: [UInt8]
            do { bytes = try Deflate.decompress(record.data ?? [], expectedSize: Int(record.size)) } catch {
                throw .badResponse("version \(version) of \(quoted(path)): its content does not inflate to its size: \(error)")
            }
            guard ContentID.of(bytes) == record.sha256 else { throw .badResponse("version \(version) of \(quoted(path)): its content does not match its SHA-256") }
            try write(bytes)
            return
        }
        if let chunks = asset.chunks {
            guard ContentID.manifestHash(hex: chunks.map { ($0.sha256, $0.size) }) == asset.id else {
                throw .badResponse("version \(version) of \(quoted(path)): its manifest does not match its hash")
            }
            // Whole chunks a range at a time, each checked before it is written.
            var index = 0
            var offset: Int64 = 0
            while index < chunks.count {
                var end = index
                var length: Int64 = 0
                repeat {
                    length += chunks[end].size
                    end += 1
                } while end < chunks.count && length + chunks[end].size <= Self.rangeBytes
                let bytes = try await client.assetRange(asset.id, first: offset, length: length)
                guard Int64(bytes.count) == length else { throw .badResponse("asset \(asset.id) ended early at \(offset + Int64(bytes.count))") }
                var start = 0
                for chunk in chunks[index..<end] {
                    let piece = Array(bytes[start..<start + Int(chunk.size)])
                    guard Digest.sha256Hex(piece) == chunk.sha256 else {
                        throw .badResponse("a chunk of version \(version) of \(quoted(path)) does not match its name \(chunk.sha256)")
                    }
                    start += Int(chunk.size)
                }
                try write(bytes)
                offset += length
                index = end
            }
            return
        }
        // An upload asset (from before chunks): checked whole at the end; a mismatch exits non-zero.
        let digest = Digest(.sha256)
        var offset: Int64 = 0
        while offset < asset.size {
            let length = min(Self.rangeBytes, asset.size - offset)
            let bytes = try await client.assetRange(asset.id, first: offset, length: length)
            guard Int64(bytes.count) == length else { throw .badResponse("asset \(asset.id) ended early at \(offset + Int64(bytes.count))") }
            digest.update(bytes)
            try write(bytes)
            offset += length
        }
        guard digest.finishHex() == asset.sha256 else { throw .badResponse("version \(version) of \(quoted(path)) does not match its SHA-256") }
    }

    private func write(_ bytes: [UInt8]) throws(SyncError) {
        var done = 0
        while done < bytes.count {
            let written = bytes[done...].withUnsafeBytes { Glibc.write(STDOUT_FILENO, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                throw .badResponse("cannot write to standard output: \(SystemError("write", errno: errno))")
            }
            done += written
        }
    }

    private func restore(_ request: RestoreRequest, json: Bool) async throws(SyncError) -> [String] {
        let response = try await client.restore(request)
        if json { return [String(decoding: response.jsonBytes, as: UTF8.self)] }
        let would = response.dryRun ? "would " : ""
        var lines = response.changes.map { change in
            change.action == .delete
                ? "\(would)delete \(change.path) (made since; version \(change.from) stays in history)"
                : "\(would)restore \(change.path) to version \(change.from)"
        }
        let restored = response.changes.count { $0.action == .restore }, deleted = response.changes.count - restored
        if response.changes.isEmpty {
            switch request.target {
            case let .version(path, version, to): lines.append("nothing to do: \(to ?? path) holds version \(version)'s content already")
            case let .folder(folder, _): lines.append("nothing to do: \(folder)/ holds what it held then")
            }
        } else if response.dryRun {
            lines.append("dry run: \(restored) path(s) would be restored, \(deleted) deleted; nothing was changed")
        } else {
            lines.append("\(restored) path(s) restored, \(deleted) deleted: every agent receives them as changes (sinkid status)")
        }
        return lines
    }
}
