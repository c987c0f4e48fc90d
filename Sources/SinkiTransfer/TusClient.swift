import Dispatch
import Glibc
import SinkiLoop
import SinkiRecord
import SinkiSupport
import Synchronization

/// A tus 1.0.0 client on `HTTPClient`: libcurl's multi interface on the agent's libuv loop.
///
/// It asks the server what it offers (`OPTIONS`) and uses nothing else: checksums, concatenation and
/// creation-with-upload only when advertised. Chunks of `chunkSize` stream from the file. Where an
/// upload stands is the caller's to keep: `upload` hands every new state to `persist` before the first
/// byte of a new upload goes and after each acknowledged chunk, and takes one back as `resume`.
///
/// Loop-confined and not Sendable, like the `HTTPClient` it uses: call it from the loop's actor.
public final class TusClient {
    public let http: HTTPClient
    public let server: TusServer
    public var options: TusOptions
    let logger: Logger
    private var capabilities: TusCapabilities?
    /// Whether the server's answer that finishes an upload carries its SHA-256 as `ETag` (sinki's do):
    /// then the client hashes nothing. Unknown until an upload finishes; learned once.
    private var serverGivesSHA256: Bool?
    /// Checksum algorithms this server refused a chunk for (460): the next chunk goes with another one it
    /// offers, in case the server spells that algorithm's digest differently (CRC-32 has variants).
    private var disputedChecksums: Set<Digest.Algorithm> = []

    /// `options.maxRate`, when set, limits `http` as a whole, both ways (`HTTPClient.maxSendRate`):
    /// the parts of an upload, and whatever else uses that client, share it.
    public init(http: HTTPClient, server: TusServer, options: TusOptions = TusOptions(), logger: Logger) {
        self.http = http
        self.server = server
        self.options = options
        self.logger = logger
        if options.maxRate > 0 {
            http.maxSendRate = options.maxRate
            http.maxReceiveRate = options.maxRate
        }
    }

    // MARK: Discovery

    /// What the server offers (asked once, then remembered). A server whose `OPTIONS` fails is taken
    /// to offer the core protocol and creation only.
    public func discover(isolation: isolated (any Actor)? = #isolation) async throws(TusError) -> TusCapabilities {
        if let capabilities { return capabilities }
        var failures = 0
        while true {
            do throws(TusError) {
                let response = try await send(request("OPTIONS", server.endpoint))
                let found: TusCapabilities
                if response.isSuccess {
                    found = TusCapabilities.parse(response)
                    if !found.versions.isEmpty && !found.versions.contains(Tus.version) {
                        throw TusError.protocolViolation(url: server.endpoint, detail: "the server speaks tus \(found.versions.joined(separator: ", ")), not \(Tus.version)")
                    }
                } else if response.status >= 500 {
                    throw TusError.status(response.status, url: server.endpoint, detail: Self.detail(response))
                } else {
                    logger.info("OPTIONS \(server.endpoint) answered \(response.status); assuming core and creation only")
                    found = TusCapabilities(versions: [Tus.version], extensions: ["creation"], maxSize: nil, checksumAlgorithms: [])
                }
                capabilities = found
                return found
            } catch {
                try await backOff(after: error, failures: &failures)
            }
        }
    }

    // MARK: Uploading

    /// Uploads the file at `path` (or goes on with `resume`) and returns the finished upload.
    ///
    /// `persist` is awaited with each new state: first when the upload (or each part) exists on the
    /// server and before any of its bytes are sent, then after each acknowledged chunk, and last when
    /// the parts are joined. `progress(done, total)` runs on the loop as bytes move.
    public func upload(file path: String, metadata: TusMetadata = TusMetadata(), resume: TusUploadState? = nil,
                       persist: @escaping @Sendable (TusUploadState) async throws -> Void = { _ in },
                       progress: ((Int64, Int64) -> Void)? = nil,
                       isolation: isolated (any Actor)? = #isolation) async throws(TusError) -> TusUploadResult {
        let capabilities = try await discover()
        let size: Int64
        do { size = try FileDescriptor.open(path, flags: O_RDONLY).stat().size } catch { throw .io(error) }
        if let maxSize = capabilities.maxSize, size > maxSize { throw .tooLarge(size: size, maxSize: maxSize, url: server.endpoint) }
        let run = UploadRun(path: path, size: size, metadata: metadata, capabilities: capabilities, persist: persist, progress: progress)

        if let resume, resume.size == size, !resume.parts.isEmpty || resume.url != nil {
            if let state = try await reconcile(resume, run: run) {
                run.state = state
                run.resumed = true
            }
        }
        if run.state.parts.isEmpty && run.state.url == nil {
            try await plan(run)
        }
        if let url = run.state.url, run.state.parts.allSatisfy({ $0.offset == $0.length }) {
            await dropJoinedParts(run)
            return try await finish(run, url: url)
        }
        if run.state.parts.count == 1 {
            try await sendPart(0, run: run)
        } else {
            let bound = LoopBound(self, loop: http.loop)
            let boundRun = LoopBound(run, loop: http.loop)
            do {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for index in run.state.parts.indices where run.state.parts[index].offset < run.state.parts[index].length {
                        group.addTask { [isolation] in
                            try await Self.sendPart(bound, boundRun, index, isolation: isolation)
                        }
                    }
                    try await group.waitForAll()
                }
            } catch let error as TusError {
                throw error
            } catch {
                throw .cancelled
            }
            try await join(run)
            await dropJoinedParts(run)
        }
        guard let url = run.state.url else { throw .protocolViolation(url: server.endpoint, detail: "bug: upload finished without a URL") }
        return try await finish(run, url: url)
    }

    /// Termination (`DELETE`): the server may drop the upload's bytes. An upload already gone is fine.
    public func terminate(_ url: String, isolation: isolated (any Actor)? = #isolation) async throws(TusError) {
        let response: HTTPResponse
        do { response = try await send(request("DELETE", url)) } catch { throw error }
        guard response.isSuccess || response.status == 404 || response.status == 410 else {
            throw .status(response.status, url: url, detail: Self.detail(response))
        }
    }

    // MARK: Steps

    /// Checks a stored state against the server; nil when it cannot be resumed (start over).
    private func reconcile(_ stored: TusUploadState, run: UploadRun,
                           isolation: isolated (any Actor)? = #isolation) async throws(TusError) -> TusUploadState? {
        var state = stored
        if let url = state.url, state.parts.count != 1 {
            // A parallel upload whose parts were joined: done if the final upload is there.
            if let (offset, length) = try await head(url), length == state.size, offset == state.size {
                for index in state.parts.indices { state.parts[index].offset = state.parts[index].length }
                return state
            }
            state.url = nil
        }
        for index in state.parts.indices {
            let part = state.parts[index]
            guard let (offset, length) = try await head(part.url) else {
                logger.info("upload \(part.url) is gone; starting over")
                await terminateQuietly(state.urls)
                return nil
            }
            guard length == part.length, offset <= part.length else {
                logger.info("upload \(part.url) is for \(length.map(String.init) ?? "an unknown number of") bytes, not \(part.length); starting over")
                await terminateQuietly(state.urls)
                return nil
            }
            state.parts[index].offset = offset
        }
        logger.info("resuming \(run.path) at \(state.parts.reduce(0) { $0 + $1.offset }) of \(state.size) bytes")
        return state
    }

    /// Terminates `urls` when the server offers termination; one that cannot be terminated is left to expire.
    private func terminateQuietly(_ urls: [String], isolation: isolated (any Actor)? = #isolation) async {
        guard run(offers: "termination") else { return }
        for url in urls {
            do { try await terminate(url) } catch { logger.debug("terminating \(url): \(error)") }
        }
    }

    /// Terminates the parts of a joined upload: the final holds a copy of their bytes, and a server
    /// keeps a finished part until it expires (a day on sinki's), so a 1 GiB file sent in parts would
    /// otherwise take 2 GiB of its disk meanwhile.
    private func dropJoinedParts(_ upload: UploadRun, isolation: isolated (any Actor)? = #isolation) async {
        guard upload.state.parts.count > 1 else { return }
        await terminateQuietly(upload.state.parts.map(\.url).filter { $0 != upload.state.url })
    }

    private func run(offers name: String) -> Bool { capabilities?.offers(name) ?? false }

    /// Where the upload goes: one upload, or parts joined by concatenation for a file above 4 chunks.
    private func plan(_ run: UploadRun, isolation: isolated (any Actor)? = #isolation) async throws(TusError) {
        let size = run.size
        let chunk = max(1, options.chunkSize)
        var count = 1
        if run.capabilities.offers("concatenation"), options.partsPerFile > 1, size > 4 * chunk {
            count = Int(min(Int64(options.partsPerFile), (size + chunk - 1) / chunk))
        }
        guard run.capabilities.offers("creation") else {
            throw .protocolViolation(url: server.endpoint, detail: "the server does not offer creation, and there is no upload to resume")
        }
        if count == 1 {
            let (url, offset) = try await create(length: size, metadata: run.metadata, partial: false, run: run)
            run.state = TusUploadState(size: size, url: url, parts: [.init(url: url, start: 0, length: size, offset: offset)])
            try await run.save()
            return
        }
        var parts: [TusUploadState.Part] = []
        var start: Int64 = 0
        for index in 0..<count {
            let length = index == count - 1 ? size - start : size / Int64(count)
            let (url, _) = try await create(length: length, metadata: TusMetadata(), partial: true, run: nil)
            parts.append(.init(url: url, start: start, length: length, offset: 0))
            start += length
        }
        run.state = TusUploadState(size: size, url: nil, parts: parts)
        try await run.save()
    }

    /// `POST` to the endpoint; the URL of the new upload and its offset (above 0 only when the first
    /// chunk went with it: creation-with-upload, for a sequential upload when allowed).
    private func create(length: Int64, metadata: TusMetadata, partial: Bool, run: UploadRun?,
                        isolation: isolated (any Actor)? = #isolation) async throws(TusError) -> (String, Int64) {
        var failures = 0
        while true {
            do throws(TusError) {
                var headers = [("Upload-Length", String(length))]
                if !metadata.pairs.isEmpty { headers.append(("Upload-Metadata", metadata.header)) }
                if partial { headers.append(("Upload-Concat", "partial")) }
                var body = HTTPBody.none
                if let run, options.creationWithUpload, run.capabilities.offers("creation-with-upload"), length > 0 {
                    let first = min(options.chunkSize, length)
                    headers.append(("Content-Type", Tus.chunkType))
                    if let algorithm = checksumAlgorithm(run) {
                        headers.append(("Upload-Checksum", TusChecksum(algorithm: algorithm.rawValue,
                                                                       digest: try await Self.hashRange(run.path, 0, first, algorithm)).header))
                    }
                    body = .file(path: run.path, offset: 0, length: first)
                }
                let response = try await send(request("POST", server.endpoint, headers: headers, body: body))
                guard response.status == 201 || response.status == 200, let location = response.header("Location"), !location.isEmpty else {
                    throw Self.failure(response, url: server.endpoint, step: "creating an upload")
                }
                let offset = response.header("Upload-Offset").flatMap { Int64($0.trimmedSpaces) } ?? 0
                return (server.resolve(location.trimmedSpaces), body.length > 0 ? max(0, min(offset, length)) : 0)
            } catch {
                try await backOff(after: error, failures: &failures)
            }
        }
    }

    private func checksumAlgorithm(_ run: UploadRun) -> Digest.Algorithm? {
        options.checksums ? run.capabilities.checksum(avoiding: disputedChecksums) : nil
    }

    /// `HEAD`: the offset and length of an upload; nil when it is gone (404, 410, 403) or refuses us.
    func head(_ url: String, isolation: isolated (any Actor)? = #isolation) async throws(TusError) -> (Int64, Int64?)? {
        var failures = 0
        while true {
            do throws(TusError) {
                let response = try await send(request("HEAD", url))
                if (400..<500).contains(response.status) && ![408, 423, 429].contains(response.status) { return nil }
                guard response.isSuccess else { throw Self.failure(response, url: url, step: "asking where the upload stands") }
                guard let offset = response.header("Upload-Offset").flatMap({ Int64($0.trimmedSpaces) }), offset >= 0 else {
                    throw TusError.protocolViolation(url: url, detail: "HEAD answered without a valid Upload-Offset")
                }
                return (offset, response.header("Upload-Length").flatMap { Int64($0.trimmedSpaces) })
            } catch {
                try await backOff(after: error, failures: &failures)
            }
        }
    }

    /// Runs part `index` of a parallel upload on the loop; the boxes are only opened there.
    private static func sendPart(_ client: LoopBound<TusClient>, _ run: LoopBound<UploadRun>, _ index: Int,
                                 isolation: isolated (any Actor)?) async throws(TusError) {
        try await client.value.sendPart(index, run: run.value)
    }

    /// PATCHes part `index` from its offset to its end, chunk by chunk, retrying what fails.
    private func sendPart(_ index: Int, run: UploadRun, isolation: isolated (any Actor)? = #isolation) async throws(TusError) {
        let sequential = run.state.parts.count == 1
        if sequential && options.computeSHA256 && run.hasher == nil && serverGivesSHA256 == false {
            // Bytes an earlier run sent are read once; the rest is hashed as it streams.
            let offset = run.state.parts[0].offset
            let digest = SendableDigest()
            do { try await Self.hashRange(run.path, from: 0, to: offset, into: digest) } catch { throw Self.map(error) }
            run.hasher = StreamHasher(digest: digest, position: offset)
        }
        var failures = 0
        var prefetch: (offset: Int64, length: Int64, algorithm: Digest.Algorithm, task: Task<[UInt8], any Error>, whole: SendableDigest?)?
        defer { prefetch?.task.cancel() }
        while run.state.parts[index].offset < run.state.parts[index].length {
            let part = run.state.parts[index]
            let length = min(options.chunkSize, part.length - part.offset)
            // Asked per chunk: a server that refused one algorithm's checksum gets the next chunk with another.
            let algorithm = checksumAlgorithm(run)
            do throws(TusError) {
                var headers = [("Upload-Offset", String(part.offset)), ("Content-Type", Tus.chunkType)]
                // With a checksum, the read that hashes the chunk also carries the file's SHA-256 over it
                // (in a copy, adopted once the server vouched for these very bytes): the loop hashes nothing.
                var wholeAfter: SendableDigest?
                if let algorithm {
                    let digest: [UInt8]
                    if let ready = prefetch, ready.offset == part.offset, ready.length == length, ready.algorithm == algorithm {
                        prefetch = nil
                        do { digest = try await ready.task.value } catch { throw Self.map(error) }
                        wholeAfter = ready.whole
                    } else {
                        prefetch?.task.cancel()
                        prefetch = nil
                        if let hasher = run.hasher, hasher.position == part.start + part.offset { wholeAfter = hasher.digest.copy() }
                        digest = try await Self.hashRange(run.path, part.start + part.offset, length, algorithm, continuing: wholeAfter)
                    }
                    headers.append(("Upload-Checksum", TusChecksum(algorithm: algorithm.rawValue, digest: digest).header))
                    // Hash the next chunk while this one travels.
                    let next = part.offset + length
                    if next < part.length {
                        let nextLength = min(options.chunkSize, part.length - next)
                        let path = run.path, start = part.start + next
                        let whole = wholeAfter?.copy()
                        prefetch = (next, nextLength, algorithm, Self.hashLater(path, start, nextLength, algorithm, continuing: whole), whole)
                    }
                }
                let http = request("PATCH", part.url, headers: headers, body: .file(path: run.path, offset: part.start + part.offset, length: length))
                let base = part.offset
                let tap = algorithm != nil ? nil : run.hasher.map { hasher in HTTPTap(sent: { offset, bytes in hasher.feed(offset, bytes) }) }
                let response = try await send(http, progress: { done, _ in run.report(part: index, inFlight: done) }, tap: tap)
                run.report(part: index, inFlight: 0)
                switch response.status {
                case 200..<300:
                    guard let offset = response.header("Upload-Offset").flatMap({ Int64($0.trimmedSpaces) }),
                          offset > base, offset <= base + length else {
                        // Not a usable answer: ask where the upload stands.
                        throw TusError.protocolViolation(url: part.url, detail: "PATCH answered Upload-Offset \(response.header("Upload-Offset") ?? "(none)") after \(length) bytes at \(base)")
                    }
                    run.state.parts[index].offset = offset
                    run.bytesSent += offset - base
                    if sequential && offset == part.length { run.learnSHA256(from: response) }
                    if let wholeAfter, offset == base + length { run.hasher?.adopt(wholeAfter, at: part.start + base, to: part.start + offset) }
                    failures = 0
                    // Parts of a parallel upload save in turn: their saves would overtake each other.
                    if sequential { try await run.saveBehind() } else { try await run.save() }
                case 404, 410:
                    throw TusError.status(response.status, url: part.url, detail: "the upload is gone")
                case 409:
                    throw TusError.status(409, url: part.url, detail: "the server stands at another offset")
                case 413:
                    throw TusError.tooLarge(size: part.length, maxSize: run.capabilities.maxSize ?? -1, url: part.url)
                default:
                    throw Self.failure(response, url: part.url, step: "sending a chunk")
                }
            } catch {
                run.report(part: index, inFlight: 0)
                try await recover(part: index, run: run, after: error, failures: &failures)
            }
        }
    }

    /// After a failed chunk: wait, then learn from the server where the part stands (or that it is gone,
    /// and start it again).
    private func recover(part index: Int, run: UploadRun, after error: TusError, failures: inout Int,
                         isolation: isolated (any Actor)? = #isolation) async throws(TusError) {
        var retriable = error.isTemporary
        if case .status(let status, _, _) = error, [404, 409, 410, 460].contains(status) { retriable = true }
        // Only CRC-32 has variants a server may mean by its name; a SHA that does not match is damage.
        if case .status(460, _, _) = error, let algorithm = checksumAlgorithm(run), algorithm == .crc32 {
            logger.info("the server refused a chunk's \(algorithm.rawValue) checksum; sending the next ones with another algorithm it offers")
            disputedChecksums.insert(algorithm)
        }
        if case .protocolViolation = error { retriable = true }
        try await backOff(after: error, failures: &failures, retriable: retriable)
        let part = run.state.parts[index]
        if let (offset, length) = try await head(part.url), length == nil || length == part.length {
            run.state.parts[index].offset = min(offset, part.length)
            return
        }
        logger.info("upload \(part.url) is gone; creating it again")
        let (url, _) = try await create(length: part.length, metadata: run.state.parts.count == 1 ? run.metadata : TusMetadata(),
                                        partial: run.state.parts.count > 1, run: nil)
        run.state.parts[index] = .init(url: url, start: part.start, length: part.length, offset: 0)
        if run.state.parts.count == 1 { run.state.url = url }
        try await run.save()
    }

    /// Joins the parts of a parallel upload (`Upload-Concat: final;…`).
    private func join(_ run: UploadRun, isolation: isolated (any Actor)? = #isolation) async throws(TusError) {
        var failures = 0
        while true {
            do throws(TusError) {
                var headers = [("Upload-Concat", "final;" + run.state.parts.map(\.url).joined(separator: " "))]
                if !run.metadata.pairs.isEmpty { headers.append(("Upload-Metadata", run.metadata.header)) }
                let response = try await send(request("POST", server.endpoint, headers: headers))
                guard response.status == 201 || response.status == 200, let location = response.header("Location") else {
                    throw Self.failure(response, url: server.endpoint, step: "joining the parts")
                }
                run.state.url = server.resolve(location.trimmedSpaces)
                run.learnSHA256(from: response)
                try await run.save()
                return
            } catch {
                try await backOff(after: error, failures: &failures)
            }
        }
    }

    private func finish(_ run: UploadRun, url: String, isolation: isolated (any Actor)? = #isolation) async throws(TusError) -> TusUploadResult {
        try await run.settle()
        var sha256: String?
        if let answered = run.serverSHA256 {
            serverGivesSHA256 = answered.isEmpty ? false : true
            if !answered.isEmpty { sha256 = answered }
        }
        if sha256 == nil, options.computeSHA256 {
            // Hashed as it streamed, or not at all (the server was to say, and did not): the rest is read once.
            let hasher = run.hasher ?? StreamHasher(digest: SendableDigest(), position: 0)
            if hasher.position < run.size {
                do { try await Self.hashRange(run.path, from: hasher.position, to: run.size, into: hasher.digest) } catch { throw Self.map(error) }
            }
            sha256 = hasher.digest.finishHex()
        }
        progressDone(run)
        return TusUploadResult(url: url, size: run.size, sha256: sha256, bytesSent: run.bytesSent, resumed: run.resumed)
    }

    private func progressDone(_ run: UploadRun) { run.progress?(run.size, run.size) }

    // MARK: Requests and retries

    func request(_ method: String, _ url: String, headers: [(String, String)] = [], body: HTTPBody = .none) -> HTTPRequest {
        HTTPRequest(method: method, url: url, headers: [("Tus-Resumable", Tus.version)] + server.headers + headers, body: body,
                    bearerToken: server.bearerToken, stallTimeout: options.stallTimeout)
    }

    func send(_ request: HTTPRequest, sink: HTTPResponseSink = .memory(limit: 1 << 20), progress: ((Int64, Int64) -> Void)? = nil,
              tap: HTTPTap? = nil, isolation: isolated (any Actor)? = #isolation) async throws(TusError) -> HTTPResponse {
        do {
            return try await http.send(request, sink: sink, progress: progress, tap: tap)
        } catch .cancelled {
            throw .cancelled
        } catch {
            throw .transfer(error)
        }
    }

    /// Counts a failure and waits before the next try; throws when the error is not temporary or the
    /// attempts are used up.
    func backOff(after error: TusError, failures: inout Int, retriable: Bool? = nil,
                 isolation: isolated (any Actor)? = #isolation) async throws(TusError) {
        let shown = error
        guard retriable ?? error.isTemporary else { throw shown }
        failures += 1
        if failures >= max(1, options.attempts) { throw .gaveUp(attempts: failures, last: shown) }
        let delay = options.delay(before: failures - 1)
        logger.info("\(shown); trying again in \(delay.formatted1) s (attempt \(failures + 1) of \(options.attempts))")
        if delay > 0 {
            do { try await Task.sleep(nanoseconds: UInt64(delay * 1e9)) } catch { throw .cancelled }
        }
        if Task.isCancelled { throw .cancelled }
    }

    static func failure(_ response: HTTPResponse, url: String, step: String) -> TusError {
        .status(response.status, url: url, detail: "\(step): \(detail(response))")
    }

    /// The server's own words: a problem's detail, else a short body.
    static func detail(_ response: HTTPResponse) -> String {
        if let problem = Problem.parse(response.body) { return problem.detail }
        let text = String(decoding: response.body.prefix(200), as: UTF8.self)
        return text.unicodeScalars.allSatisfy({ $0.value >= 0x20 || $0 == "\n" }) ? text.split(separator: "\n").joined(separator: " ") : ""
    }

    static func map(_ error: any Error) -> TusError {
        if let error = error as? TusError { return error }
        if let error = error as? SystemError { return .io(error) }
        if error is CancellationError { return .cancelled }
        return .protocolViolation(url: "", detail: "\(error)")
    }

    // MARK: Hashing off the loop

    /// `hashRange` started now, awaited later.
    static func hashLater(_ path: String, _ offset: Int64, _ length: Int64, _ algorithm: Digest.Algorithm,
                          continuing whole: SendableDigest? = nil) -> Task<[UInt8], any Error> {
        Task.detached { try await hashRange(path, offset, length, algorithm, continuing: whole) }
    }

    /// The digest of `length` bytes at `offset`, read on the thread pool; the same read feeds `whole`.
    static func hashRange(_ path: String, _ offset: Int64, _ length: Int64, _ algorithm: Digest.Algorithm,
                          continuing whole: SendableDigest? = nil) async throws(TusError) -> [UInt8] {
        do {
            return try await Blocking.run {
                let digest = Digest(algorithm)
                try readRange(path, from: offset, to: offset + length) { bytes in
                    digest.update(bytes)
                    whole?.update(bytes)
                }
                return digest.finish()
            }
        } catch { throw map(error) }
    }

    static func hashRange(_ path: String, from start: Int64, to end: Int64, into digest: SendableDigest) async throws {
        guard end > start else { return }
        try await Blocking.run { try digest.update(fromFile: path, start, end) }
    }

    /// Reads `start..<end` of the file in 1 MiB pieces; a file shorter than that changed under us.
    static func readRange(_ path: String, from start: Int64, to end: Int64, _ body: (UnsafeRawBufferPointer) -> Void) throws {
        guard end > start else { return }
        let file = try FileDescriptor.open(path, flags: O_RDONLY)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        var position = start
        while position < end {
            let want = Int(min(Int64(buffer.count), end - position))
            let got = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]), at: position)
            guard got > 0 else { throw TusError.fileChanged(path: path) }
            body(UnsafeRawBufferPointer(rebasing: buffer[0..<got]))
            position += Int64(got)
        }
    }
}

@available(*, unavailable)
extension TusClient: Sendable {}

/// One upload in progress: the state the caller keeps, and what the parts share. Loop-confined.
final class UploadRun {
    let path: String
    let size: Int64
    let metadata: TusMetadata
    let capabilities: TusCapabilities
    let persist: @Sendable (TusUploadState) async throws -> Void
    let progress: ((Int64, Int64) -> Void)?
    var state: TusUploadState
    var resumed = false
    var bytesSent: Int64 = 0
    var hasher: StreamHasher?
    /// The SHA-256 the answer that finished the upload gave (its ETag); "" when that answer gave none.
    var serverSHA256: String?
    private var inFlight: [Int: Int64] = [:]
    private var saving: Task<Void, any Error>?

    init(path: String, size: Int64, metadata: TusMetadata, capabilities: TusCapabilities,
         persist: @escaping @Sendable (TusUploadState) async throws -> Void, progress: ((Int64, Int64) -> Void)?) {
        self.path = path
        self.size = size
        self.metadata = metadata
        self.capabilities = capabilities
        self.persist = persist
        self.progress = progress
        state = TusUploadState(size: size)
    }

    func save(isolation: isolated (any Actor)? = #isolation) async throws(TusError) {
        try await settle()
        do { try await persist(state) } catch { throw failedSave(error) }
    }

    /// Saves the state after an acknowledged chunk while the next chunk goes: a save that lags one chunk
    /// behind costs nothing (after a restart, HEAD tells where the upload stands), and the request that
    /// waits on it would leave the connection idle. One at a time, in order; a failure shows at the next.
    func saveBehind(isolation: isolated (any Actor)? = #isolation) async throws(TusError) {
        try await settle()
        let state = self.state, persist = self.persist
        saving = Task { try await persist(state) }
    }

    /// Waits for a save still in progress.
    func settle(isolation: isolated (any Actor)? = #isolation) async throws(TusError) {
        guard let pending = saving else { return }
        saving = nil
        do { try await pending.value } catch { throw failedSave(error) }
    }

    private func failedSave(_ error: any Error) -> TusError {
        // The caller's own verdict (the file changed, say) is passed on as it is.
        if let error = error as? TusError { return error }
        return .io(SystemError("saving the upload state", errno: EIO, path: "\(path): \(error)"))
    }

    /// Takes the ETag of the answer that finished the upload, when it is a SHA-256 (64 hex digits).
    func learnSHA256(from response: HTTPResponse) {
        serverSHA256 = Self.sha256(fromETag: response.header("ETag"))
    }

    /// The lowercase hex SHA-256 an `ETag` (quoted or not) holds; empty when it holds something else.
    static func sha256(fromETag header: String?) -> String {
        var tag = Substring(header?.trimmedSpaces ?? "")
        if tag.hasPrefix("\""), tag.hasSuffix("\""), tag.count >= 2 { tag = tag.dropFirst().dropLast() }
        let hex = tag.lowercased()
        return hex.utf8.count == 64 && hex.utf8.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) }) ? hex : ""
    }

    func report(part: Int, inFlight bytes: Int64) {
        guard let progress else { return }
        inFlight[part] = bytes
        let acknowledged = state.parts.reduce(0) { $0 + $1.offset }
        progress(min(size, acknowledged + inFlight.values.reduce(0, +)), size)
    }
}

/// Feeds a digest the bytes of a file in order as they stream by: bytes seen again (a resend) are
/// skipped; a gap stops the feeding (the rest is read from disk at the end).
final class StreamHasher {
    private(set) var digest: SendableDigest
    private(set) var position: Int64

    init(digest: SendableDigest, position: Int64) {
        self.digest = digest
        self.position = position
    }

    func feed(_ offset: Int64, _ bytes: UnsafeRawBufferPointer) {
        let end = offset + Int64(bytes.count)
        guard offset <= position, end > position else { return }
        digest.update(UnsafeRawBufferPointer(rebasing: bytes[Int(position - offset)...]))
        position = end
    }

    /// Takes `next`, this digest carried over the bytes `start..<end` (acknowledged by the server),
    /// when it continues exactly where this one stands.
    func adopt(_ next: SendableDigest, at start: Int64, to end: Int64) {
        guard start == position, end > position else { return }
        digest = next
        position = end
    }
}

/// A SHA-256 fed from the loop as bytes stream and, for bytes already on disk, from the thread pool; one
/// at a time (the loop awaits the pool's work), the lock makes the hand-over explicit.
final class SendableDigest: Sendable {
    private let digest: Mutex<Digest>

    init(_ digest: sending Digest = Digest(.sha256)) {
        self.digest = Mutex(digest)
    }

    func update(_ bytes: UnsafeRawBufferPointer) {
        // The buffer crosses into the lock as an address: it stays valid for this synchronous call.
        let address = UInt(bitPattern: bytes.baseAddress), count = bytes.count
        digest.withLock { $0.update(UnsafeRawBufferPointer(start: UnsafeRawPointer(bitPattern: address), count: count)) }
    }

    func update(fromFile path: String, _ start: Int64, _ end: Int64) throws {
        try digest.withLock { digest in try TusClient.readRange(path, from: start, to: end) { digest.update($0) } }
    }

    func finishHex() -> String { digest.withLock { $0.finishHex() } }

    /// A digest that goes on from here on its own.
    func copy() -> SendableDigest { SendableDigest(digest.withLock { $0.copy() }) }
}

extension Double {
    /// One decimal, for log lines.
    var formatted1: String {
        let tenths = Int((self * 10).rounded())
        return "\(tenths / 10).\(tenths % 10)"
    }
}
