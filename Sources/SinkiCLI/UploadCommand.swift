import Foundation
import Glibc
import SinkiConfig
import SinkiLoop
import SinkiRecord
import SinkiState
import SinkiSupport
import SinkiTransfer
import Synchronization

/// `sinkid upload FILE --to URL`: one file to any tus server; the upload URL on stdout. Run again
/// after an interruption, it resumes: the file's identity, the endpoint and where the upload stands
/// are kept in the state database (`tus_uploads`), written before the first byte goes.
enum UploadCommand {
    static func run(_ words: [String]) throws(UsageError) -> ExitCode {
        guard let arguments = try Arguments.orHelp(words, CommandCatalog.upload) else { return .success }
        guard arguments.positional.count == 1, let given = arguments.positional.first else {
            throw UsageError(arguments.positional.isEmpty ? "upload needs a FILE" : "upload takes one FILE, not \(arguments.positional.count)")
        }
        guard let endpoint = arguments.value("to"), endpoint.hasPrefix("http://") || endpoint.hasPrefix("https://") else {
            throw UsageError("upload needs --to URL, the tus endpoint (http:// or https://)")
        }
        let path = RunCommand.absolute(given)
        let logger = Logger(label: "sinkid upload", level: try RunCommand.logLevel(arguments.value("log-level")))
        var server = TusServer(endpoint: endpoint)
        for header in arguments.values("header") {
            guard let colon = header.firstIndex(of: ":"), colon != header.startIndex else {
                throw UsageError("--header \(quoted(header)) is not 'Name: value'")
            }
            server.headers.append((String(header[..<colon]), String(header[header.index(after: colon)...]).trimmingCharacters(in: .whitespaces)))
        }
        if let file = arguments.value("token-file") {
            guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { throw UsageError("cannot read the token file \(file)", code: .config) }
            server.bearerToken = text.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let options = try options(arguments)
        let caFile = try caFile(arguments)
        var pairs: [(String, String)] = [("filename", (path as NSString).lastPathComponent), ("filetype", "application/octet-stream")]
        for item in arguments.values("metadata") {
            guard let equals = item.firstIndex(of: "="), equals != item.startIndex else { throw UsageError("--metadata \(quoted(item)) is not key=value") }
            let key = String(item[..<equals])
            pairs.removeAll { $0.0 == key }
            pairs.append((key, String(item[item.index(after: equals)...])))
        }
        let metadata = TusMetadata(text: pairs)
        do { _ = try TusMetadata.parse(metadata.header) } catch { throw UsageError("--metadata: \(error.description)") }

        let stateDirectory: String
        do {
            stateDirectory = try ResolvedConfig.stateDirectory(for: Overrides(stateDirectory: arguments.value("state")), environment: .current())
            try FileManager.default.createDirectory(atPath: stateDirectory, withIntermediateDirectories: true)
        } catch {
            throw UsageError("\(error)", code: .config)
        }
        let journal: UploadJournal
        do { journal = try UploadJournal(path: stateDirectory + "/state.db") } catch {
            throw UsageError("cannot open the state database in \(stateDirectory): \(error)", code: .ioError)
        }

        let loop = EventLoop()
        let uploader = Uploader(loop: loop, logger: logger, server: server, options: options, caFile: caFile)
        let outcome = Mutex<Result<TusUploadResult, TusError>?>(nil)
        Task {
            let result = await uploader.run(path: path, metadata: metadata, journal: journal)
            outcome.withLock { $0 = result }
            loop.stop()
        }
        loop.run()
        switch outcome.withLock({ $0 }) {
        case .success(let result)?:
            print(result.url)
            logger.info("\(result.resumed ? "resumed and finished" : "uploaded") \(result.size) bytes (\(result.bytesSent) sent now) to \(result.url)")
            return .success
        case .failure(let error)?:
            throw UsageError(error.description, code: exitCode(for: error))
        case nil:
            throw UsageError("the upload ended without a result", code: .software)
        }
    }

    static func options(_ arguments: Arguments) throws(UsageError) -> TusOptions {
        var options = TusOptions()
        if let text = arguments.value("chunk-size") {
            guard let size = ConfigValues.size(text), size > 0 else { throw UsageError("--chunk-size \(quoted(text)) is not a size such as 16MiB") }
            options.chunkSize = size
        }
        if let text = arguments.value("parallel") {
            guard let count = Int(text), (1...64).contains(count) else { throw UsageError("--parallel must be a number from 1 to 64") }
            options.partsPerFile = count
        }
        if let text = arguments.value("attempts") {
            guard let count = Int(text), count >= 1 else { throw UsageError("--attempts must be a number from 1 up") }
            options.attempts = count
        }
        if let text = arguments.value("max-rate") {
            let bare = text.hasSuffix("/s") ? String(text.dropLast(2)) : text
            guard let rate = ConfigValues.size(bare), rate >= 0 else { throw UsageError("--max-rate \(quoted(text)) is not a rate such as 10MiB/s") }
            options.maxRate = rate
        }
        options.checksums = !arguments.has("no-checksum")
        return options
    }

    /// The certificates trusted for an `https://` endpoint: `--ca-file`, else the config file's
    /// `[server] ca-file`, else `CURL_CA_BUNDLE` (as curl's own tool reads it), else the system's.
    static func caFile(_ arguments: Arguments) throws(UsageError) -> String? {
        let environment = ProcessEnvironment.current()
        if let given = arguments.value("ca-file") {
            let path = RunCommand.absolute(given)
            guard ProcessEnvironment.isReadableFile(path) else { throw UsageError("--ca-file \(quoted(given)): no such readable file", code: .config) }
            return path
        }
        do {
            if let path = try ResolvedConfig.configPath(for: Overrides(), environment: environment),
               let caFile = try ConfigFile.load(path: path, environment: environment, source: path).server.caFile {
                return caFile
            }
        } catch {
            throw UsageError("\(error)", code: .config)
        }
        if let bundle = environment["CURL_CA_BUNDLE"], !bundle.isEmpty { return bundle }
        return nil
    }

    /// sysexits: the server out of reach or failing is 69/75, a file that changed 65, a refusal 65, a
    /// certificate not trusted 78 (a setting: --ca-file).
    static func exitCode(for error: TusError) -> ExitCode {
        switch error {
        case .transfer(let transfer): transfer.isTemporary ? .unavailable : transfer.isUntrustedCertificate ? .config : .software
        case .gaveUp(_, let last): last.isTemporary ? .unavailable : exitCode(for: last)
        case .status(let status, _, _): status >= 500 ? .temporaryFailure : .dataError
        case .tooLarge, .fileChanged, .contentMismatch: .dataError
        case .protocolViolation: .unavailable
        case .io: .ioError
        case .cancelled: .temporaryFailure
        }
    }
}

/// Runs one upload on the loop: the loop's actor, as the agent is.
private actor Uploader {
    nonisolated let loop: EventLoop
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }
    private let client: TusClient
    private let logger: Logger

    init(loop: EventLoop, logger: Logger, server: TusServer, options: TusOptions, caFile: String?) {
        self.loop = loop
        self.logger = logger
        let http = HTTPClient(loop: loop, logger: logger)
        http.caFile = caFile
        client = TusClient(http: http, server: server, options: options, logger: logger)
    }

    func run(path: String, metadata: TusMetadata, journal: UploadJournal) async -> Result<TusUploadResult, TusError> {
        let endpoint = client.server.endpoint
        do throws(TusError) {
            let identity: FileStat
            do { identity = try FileDescriptor.open(path, flags: O_RDONLY).stat() } catch { throw .io(error) }
            guard identity.kind == .file else { throw .io(SystemError("upload", errno: EISDIR, path: path)) }
            var resume: TusUploadState?
            let found: TusUploadEntry?
            do { found = try await journal.entry(path: path, endpoint: endpoint) } catch {
                // Not knowing where an earlier upload stands costs a fresh upload, never a wrong one.
                logger.warning("cannot read the earlier upload of \(path) from the state database: \(error); starting over")
                found = nil
            }
            if let entry = found {
                if entry.matches(size: identity.size, mtime: identity.mtime, inode: identity.inode) {
                    resume = TusUploadState(encoded: entry.state)
                    if resume == nil { logger.warning("the stored state of \(path)'s earlier upload is unreadable; starting over") }
                } else if let stale = TusUploadState(encoded: entry.state) {
                    // The file changed: its old upload is of no use.
                    logger.info("\(path) changed since its last upload; starting over")
                    for url in stale.parts.map(\.url) + (stale.url.map { [$0] } ?? []) { try? await client.terminate(url) }
                }
            }
            let result = try await client.upload(file: path, metadata: metadata, resume: resume, persist: { state in
                try await journal.save(TusUploadEntry(path: path, endpoint: endpoint, size: identity.size, mtime: identity.mtime,
                                                      inode: identity.inode, state: state.encoded))
            })
            await journal.remove(path: path, endpoint: endpoint)
            return .success(result)
        } catch {
            return .failure(error)
        }
    }
}

/// The state database, written off the loop (SQLite blocks).
final class UploadJournal: Sendable {
    private let store: Mutex<StateStore>

    init(path: String) throws {
        store = Mutex(try StateStore(path: path))
    }

    func entry(path: String, endpoint: String) async throws -> TusUploadEntry? {
        try await Blocking.run { [self] in try store.withLock { try $0.tusUpload(path: path, endpoint: endpoint) } }
    }

    func save(_ entry: TusUploadEntry) async throws {
        try await Blocking.run { [self] in try store.withLock { try $0.saveTusUpload(entry) } }
    }

    func remove(path: String, endpoint: String) async {
        _ = try? await Blocking.run { [self] in try store.withLock { try $0.removeTusUpload(path: path, endpoint: endpoint) } }
    }
}
