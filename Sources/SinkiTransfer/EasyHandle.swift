import CCurl
import CCurlShim
import Glibc
import SinkiSupport

/// One libcurl easy handle and the state of the one request it carries. Loop-confined and not
/// Sendable: libcurl calls back into it on the loop thread, from inside `curl_multi_socket_action`.
///
/// Every callback gets this object back from its user-data pointer, unretained: while libcurl may call,
/// the multi handle's table of transfers holds a strong reference. `deinit` frees the handle, which by
/// then is out of the multi handle.
final class EasyHandle {
    let raw: UnsafeMutableRawPointer
    let method: String
    let url: String
    let started = Clock.monotonic()

    private let errorBuffer: UnsafeMutablePointer<CChar>
    private var headerList: UnsafeMutablePointer<curl_slist>?

    private let body: Body
    private let bodyLength: Int64
    private var bodyPosition: Int64 = 0

    private let sink: Sink
    /// Chosen at the first body byte, once the status is known.
    private var destination: Destination?
    private var writePosition: Int64 = 0
    private var received: [UInt8] = []
    private var headers: [(String, String)] = []

    private let progress: ((Int64, Int64) -> Void)?
    private let tap: HTTPTap?
    /// The client's rate limits this transfer's body passes through (`RateLimit`), the directions
    /// paused for them, and the piece set aside for each direction let go from a line.
    private let sendLimit: RateLimit?
    private let receiveLimit: RateLimit?
    private var pausedFor: Set<RateLimit.Direction> = []
    private var setAside: [RateLimit.Direction: Int] = [:]
    private var lastProgress: (Int64, Int64) = (-1, -1)

    /// Set by a callback that aborts the transfer; takes precedence over libcurl's own result code.
    private var failure: TransferError?
    /// Resumed exactly once, by `finish`.
    private var continuation: CheckedContinuation<Result<HTTPResponse, TransferError>, Never>?

    static let keepaliveIdleSeconds = 30
    static let keepaliveIntervalSeconds = 10
    static let keepaliveProbes = 3
    static let unacknowledgedMilliseconds = 60_000

    /// Bodies from this size up are read in 2 MiB pieces.
    static let largeBody: Int64 = 4 << 20

    /// Bodies of non-2xx answers to a file download are kept in memory up to this size.
    static let errorBodyLimit = 1 << 20

    private enum Body {
        case none
        case bytes([UInt8])
        case file(FileDescriptor, offset: Int64)
        /// The parts and where each starts in the body.
        case parts([[UInt8]], starts: [Int64])
    }

    private enum Sink {
        case memory(limit: Int)
        case file(FileDescriptor, offset: Int64)
        case tap
    }

    private enum Destination {
        case memory(limit: Int)
        case file(FileDescriptor)
        case tap
    }

    struct Settings {
        var userAgent: String
        /// Shared with the client's other transfers (nil: unlimited).
        var sendLimit: RateLimit?
        var receiveLimit: RateLimit?
        /// PEM file of certificates to trust instead of the system's.
        var caFile: String?
    }

    init(request: HTTPRequest, sink: HTTPResponseSink, settings: Settings,
         progress: ((Int64, Int64) -> Void)?, tap: HTTPTap? = nil) throws(TransferError) {
        method = request.method.uppercased()
        url = request.url
        self.progress = progress
        self.tap = tap
        sendLimit = settings.sendLimit
        receiveLimit = settings.receiveLimit

        // Validate and open everything before allocating the libcurl handle.
        for (name, value) in request.headers where name.isEmpty || Self.breaksLine(name) || Self.breaksLine(value) {
            throw .invalidRequest("header \"\(name)\" is empty or holds a line break")
        }
        if let token = request.bearerToken, Self.breaksLine(Self.trimmed(token)) {
            throw .invalidRequest("the bearer token holds a line break")
        }
        switch request.body {
        case .none:
            body = .none
        case .bytes(let bytes):
            body = .bytes(bytes)
        case .parts(let parts):
            var starts: [Int64] = []
            var at: Int64 = 0
            for part in parts {
                starts.append(at)
                at += Int64(part.count)
            }
            body = .parts(parts, starts: starts)
        case .file(let path, let offset, let length):
            guard offset >= 0, length >= 0 else { throw .invalidRequest("file body \(path): offset \(offset), length \(length)") }
            do { body = .file(try FileDescriptor.open(path, flags: O_RDONLY), offset: offset) } catch { throw .io(error) }
        }
        bodyLength = request.body.length
        switch sink {
        case .memory(let limit):
            self.sink = .memory(limit: max(0, limit))
        case .file(let path, let offset):
            guard offset >= 0 else { throw .invalidRequest("download to \(path) from offset \(offset)") }
            do { self.sink = .file(try FileDescriptor.open(path, flags: O_WRONLY | O_CREAT, mode: 0o600), offset: offset) } catch {
                throw .io(error)
            }
        case .tap:
            self.sink = .tap
        }

        guard let raw = curl_easy_init() else { fatalError("bug: curl_easy_init failed (out of memory)") }
        self.raw = raw
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        configure(request, settings: settings)
    }

    deinit {
        curl_easy_cleanup(raw)
        curl_slist_free_all(headerList)
        errorBuffer.deallocate()
    }

    // MARK: Options

    private func configure(_ request: HTTPRequest, settings: Settings) {
        let me = Unmanaged.passUnretained(self).toOpaque()
        set(CURLOPT_URL, request.url)
        set(CURLOPT_ERRORBUFFER, UnsafeRawPointer(errorBuffer))
        set(CURLOPT_NOSIGNAL, 1)
        set(CURLOPT_TCP_NODELAY, 1)
        // Keep-alive probes keep a long-poll's idle connection known to NATs and find a dead peer within
        // a minute (30 s idle, then three probes 10 s apart), where the long-poll alone would wait out
        // its 300 s; data left unacknowledged for a minute ends the connection too, where TCP would
        // retransmit for a quarter of an hour. The kernel's timers: an idle agent does not wake for them.
        set(CURLOPT_TCP_KEEPALIVE, 1)
        set(CURLOPT_TCP_KEEPIDLE, Self.keepaliveIdleSeconds)
        set(CURLOPT_TCP_KEEPINTVL, Self.keepaliveIntervalSeconds)
        check(sinki_curl_easy_set_dead_peer_limits(raw, Self.keepaliveProbes, Self.unacknowledgedMilliseconds), "TCP_KEEPCNT, TCP_USER_TIMEOUT")
        set(CURLOPT_PROTOCOLS_STR, "http,https")
        set(CURLOPT_USERAGENT, settings.userAgent)
        if let caFile = settings.caFile { set(CURLOPT_CAINFO, caFile) }
        // Large bodies move in libcurl's largest pieces: 2 MiB file reads instead of 64 KiB, 512 KiB
        // receives into a file instead of 16 KiB, which cut a 1 GiB transfer's system calls 30-fold.
        // Not under a rate limit, whose pieces are small so that many transfers take turns.
        if case .file = body, bodyLength >= Self.largeBody, settings.sendLimit == nil {
            set(CURLOPT_UPLOAD_BUFFERSIZE, 2 << 20)
        }
        if case .file = sink, settings.receiveLimit == nil {
            set(CURLOPT_BUFFERSIZE, 512 << 10)
        }
        if request.timeout > 0 { set(CURLOPT_TIMEOUT_MS, Self.milliseconds(request.timeout)) }
        if request.connectTimeout > 0 { set(CURLOPT_CONNECTTIMEOUT_MS, Self.milliseconds(request.connectTimeout)) }
        if request.stallTimeout > 0 {
            set(CURLOPT_LOW_SPEED_LIMIT, 1)
            set(CURLOPT_LOW_SPEED_TIME, max(1, Int(request.stallTimeout.rounded(.up))))
        }

        // The method and how the body travels.
        let sendsBody = bodyLength > 0 || ["POST", "PUT", "PATCH"].contains(method)
        switch method {
        case "GET" where !sendsBody:
            set(CURLOPT_HTTPGET, 1)
        case "HEAD" where !sendsBody:
            set(CURLOPT_NOBODY, 1)
        case "POST":
            set(CURLOPT_POST, 1)
            setLarge(CURLOPT_POSTFIELDSIZE_LARGE, bodyLength)
        default:
            if sendsBody {
                set(CURLOPT_UPLOAD, 1)
                setLarge(CURLOPT_INFILESIZE_LARGE, bodyLength)
            }
            if method != "PUT" || !sendsBody { set(CURLOPT_CUSTOMREQUEST, method) }
        }
        if sendsBody {
            set(CURLOPT_READDATA, me)
            check(sinki_curl_easy_setopt_data_cb(raw, CURLOPT_READFUNCTION) { buffer, size, count, user in
                guard let buffer, let user else { return Int(CURL_READFUNC_ABORT) }
                let easy = Unmanaged<EasyHandle>.fromOpaque(user).takeUnretainedValue()
                return easy.readBody(into: UnsafeMutableRawBufferPointer(start: buffer, count: size * count))
            }, "CURLOPT_READFUNCTION")
            // libcurl rewinds the body when it must send it again (a reused connection that had died).
            set(CURLOPT_SEEKDATA, me)
            check(sinki_curl_easy_setopt_seek_cb(raw) { user, offset, origin in
                guard let user else { return CURL_SEEKFUNC_FAIL }
                return Unmanaged<EasyHandle>.fromOpaque(user).takeUnretainedValue().seekBody(to: offset, origin: origin)
            }, "CURLOPT_SEEKFUNCTION")
        }

        // Headers: the caller's, then ours. `Expect:` off: waiting for `100 Continue` costs a round trip
        // (or a full second against servers that never send it). A POST without a type of the
        // caller's would otherwise claim `application/x-www-form-urlencoded`.
        var lines = request.headers.map { "\($0.0): \($0.1)" }
        if let token = request.bearerToken { lines.append("Authorization: Bearer \(Self.trimmed(token))") }
        if sendsBody {
            lines.append("Expect:")
            if !request.headers.contains(where: { $0.0.lowercased() == "content-type" }) { lines.append("Content-Type:") }
        }
        if case .file(_, let offset) = sink, offset > 0 { set(CURLOPT_RANGE, "\(offset)-") }
        for line in lines { headerList = curl_slist_append(headerList, line) }
        if let headerList { set(CURLOPT_HTTPHEADER, UnsafeRawPointer(headerList)) }

        set(CURLOPT_HEADERDATA, me)
        check(sinki_curl_easy_setopt_data_cb(raw, CURLOPT_HEADERFUNCTION) { buffer, size, count, user in
            guard let buffer, let user else { return 0 }
            let easy = Unmanaged<EasyHandle>.fromOpaque(user).takeUnretainedValue()
            return easy.receiveHeader(UnsafeRawBufferPointer(start: buffer, count: size * count))
        }, "CURLOPT_HEADERFUNCTION")
        set(CURLOPT_WRITEDATA, me)
        check(sinki_curl_easy_setopt_data_cb(raw, CURLOPT_WRITEFUNCTION) { buffer, size, count, user in
            guard let buffer, let user else { return 0 }
            let easy = Unmanaged<EasyHandle>.fromOpaque(user).takeUnretainedValue()
            return easy.receiveBody(UnsafeRawBufferPointer(start: buffer, count: size * count))
        }, "CURLOPT_WRITEFUNCTION")
        if progress != nil {
            set(CURLOPT_NOPROGRESS, 0)
            set(CURLOPT_XFERINFODATA, me)
            check(sinki_curl_easy_setopt_xferinfo_cb(raw) { user, downloadTotal, downloaded, _, uploaded in
                guard let user else { return 0 }
                let easy = Unmanaged<EasyHandle>.fromOpaque(user).takeUnretainedValue()
                easy.reportProgress(downloaded: Int64(downloaded), downloadTotal: Int64(downloadTotal), uploaded: Int64(uploaded))
                return 0
            }, "CURLOPT_XFERINFOFUNCTION")
        }
    }

    private func set(_ option: CURLoption, _ value: Int) {
        check(sinki_curl_easy_setopt_long(raw, option, value), option)
    }

    private func setLarge(_ option: CURLoption, _ value: Int64) {
        check(sinki_curl_easy_setopt_off_t(raw, option, curl_off_t(value)), option)
    }

    /// Strings are copied by libcurl; pointers (error buffer, header list) must outlive the handle.
    private func set(_ option: CURLoption, _ value: String) {
        check(value.withCString { sinki_curl_easy_setopt_ptr(raw, option, $0) }, option)
    }

    private func set(_ option: CURLoption, _ value: UnsafeRawPointer) {
        check(sinki_curl_easy_setopt_ptr(raw, option, value), option)
    }

    private func check(_ code: CURLcode, _ option: Any) {
        // Every option used here exists in libcurl 7.88 and takes the kind passed: a failure is a bug
        // (or a libcurl built without a feature we rely on).
        precondition(code == CURLE_OK, "bug: curl_easy_setopt(\(option)) failed: \(String(cString: curl_easy_strerror(code)))")
    }

    private static func milliseconds(_ seconds: Double) -> Int { max(1, Int((seconds * 1000).rounded(.up))) }

    private static func breaksLine(_ text: String) -> Bool { text.utf8.contains { $0 == 13 || $0 == 10 } }

    private static func trimmed(_ text: String) -> String {
        var scalars = Substring(text).unicodeScalars
        while let first = scalars.first, first.properties.isWhitespace { scalars.removeFirst() }
        while let last = scalars.last, last.properties.isWhitespace { scalars.removeLast() }
        return String(scalars)
    }

    // MARK: Life cycle (driven by MultiHandle)

    func attach(_ continuation: CheckedContinuation<Result<HTTPResponse, TransferError>, Never>) {
        precondition(self.continuation == nil, "bug: a transfer was started twice")
        self.continuation = continuation
    }

    /// Completes the awaiting `send` exactly once.
    func finish(_ result: Result<HTTPResponse, TransferError>) {
        sendLimit?.forget(self)
        receiveLimit?.forget(self)
        guard let continuation else { return }
        self.continuation = nil
        continuation.resume(returning: result)
    }

    /// The outcome once libcurl reports the transfer done with `code`.
    func outcome(_ code: CURLcode) -> Result<HTTPResponse, TransferError> {
        if let failure { return .failure(failure) }
        guard code == CURLE_OK else {
            var detail = String(cString: errorBuffer)
            if detail.isEmpty { detail = String(cString: curl_easy_strerror(code)) }
            var osErrno = 0
            if sinki_curl_easy_getinfo_long(raw, CURLINFO_OS_ERRNO, &osErrno) == CURLE_OK, osErrno != 0 {
                detail += " (\(String(cString: strerror(Int32(osErrno)))))"
            }
            return .failure(TransferError(code: code, detail: detail, url: url))
        }
        let status = responseCode()
        if case .file(let file, _) = sink, (200..<300).contains(status) {
            // An empty body never reached receiveBody: the file must still end where the body ends.
            if destination == nil {
                destination = chooseDestination()
                if let failure { return .failure(failure) }
            }
            if ftruncate(file.raw, off_t(writePosition)) != 0 {
                return .failure(.io(SystemError("ftruncate", errno: errno, path: file.path)))
            }
        }
        if progress != nil {
            var uploaded: curl_off_t = 0
            var downloaded: curl_off_t = 0
            _ = sinki_curl_easy_getinfo_off_t(raw, CURLINFO_SIZE_UPLOAD_T, &uploaded)
            _ = sinki_curl_easy_getinfo_off_t(raw, CURLINFO_SIZE_DOWNLOAD_T, &downloaded)
            reportProgress(downloaded: Int64(downloaded), downloadTotal: Int64(downloaded), uploaded: Int64(uploaded))
        }
        let response = HTTPResponse(status: status, headers: headers, body: received)
        received = []
        return .success(response)
    }

    private func responseCode() -> Int {
        var code = 0
        _ = sinki_curl_easy_getinfo_long(raw, CURLINFO_RESPONSE_CODE, &code)
        return code
    }

    // MARK: Rate limits

    /// The piece set aside for this transfer in `direction` when a limit let it go from its line;
    /// taken once.
    func granted(_ direction: RateLimit.Direction) -> Int? {
        setAside.removeValue(forKey: direction)
    }

    /// A limit lets this transfer go on in `direction`, `piece` bytes set aside for it. libcurl may
    /// hand over the piece it kept at once, from inside this call.
    func resume(_ direction: RateLimit.Direction, setAside piece: Int) {
        guard pausedFor.remove(direction) != nil, continuation != nil else { return }
        setAside[direction] = piece
        let still = (pausedFor.contains(.send) ? Self.pauseSend : 0) | (pausedFor.contains(.receive) ? Self.pauseReceive : 0)
        let code = curl_easy_pause(raw, still)
        if code != CURLE_OK { failure = failure ?? .curl(code: Int(code.rawValue), message: "curl_easy_pause failed", url: url) }
    }

    /// `CURLPAUSE_SEND` and `CURLPAUSE_RECV` (macros Swift does not import).
    static let pauseSend: Int32 = 1 << 2
    static let pauseReceive: Int32 = 1 << 0

    // MARK: Callbacks

    /// CURLOPT_READFUNCTION: the next piece of the body.
    private func readBody(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        var wanted = Int(min(Int64(buffer.count), bodyLength - bodyPosition))
        guard wanted > 0 else { return 0 }
        if let limit = sendLimit {
            wanted = min(wanted, RateLimit.piece)
            guard limit.admit(wanted, for: self) else {
                pausedFor.insert(.send)
                return Int(CURL_READFUNC_PAUSE)
            }
        }
        switch body {
        case .none:
            return 0
        case .bytes(let bytes):
            bytes.withUnsafeBytes { source in
                buffer.baseAddress!.copyMemory(from: source.baseAddress! + Int(bodyPosition), byteCount: wanted)
            }
            bodyPosition += Int64(wanted)
            return wanted
        case .parts(let parts, let starts):
            // The last part starting at or before the position (empty parts are passed over).
            var index = starts.count - 1
            while index > 0 && starts[index] > bodyPosition { index -= 1 }
            while parts[index].count == Int(bodyPosition - starts[index]) { index += 1 }
            let within = Int(bodyPosition - starts[index])
            wanted = min(wanted, parts[index].count - within)
            parts[index].withUnsafeBytes { source in
                buffer.baseAddress!.copyMemory(from: source.baseAddress! + within, byteCount: wanted)
            }
            bodyPosition += Int64(wanted)
            return wanted
        case .file(let file, let offset):
            let got: Int
            do {
                got = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<wanted]), at: offset + bodyPosition)
            } catch {
                failure = .io(error)
                return Int(CURL_READFUNC_ABORT)
            }
            guard got > 0 else {
                failure = .bodyShrank(path: file.path, expected: bodyLength)
                return Int(CURL_READFUNC_ABORT)
            }
            tap?.sent?(offset + bodyPosition, UnsafeRawBufferPointer(rebasing: buffer[0..<got]))
            bodyPosition += Int64(got)
            return got
        }
    }

    /// CURLOPT_SEEKFUNCTION: only rewinds within the body are asked for.
    private func seekBody(to offset: curl_off_t, origin: Int32) -> Int32 {
        guard origin == SEEK_SET, offset >= 0, Int64(offset) <= bodyLength else { return CURL_SEEKFUNC_CANTSEEK }
        bodyPosition = Int64(offset)
        return CURL_SEEKFUNC_OK
    }

    /// CURLOPT_HEADERFUNCTION: one header line at a time, status lines included.
    private func receiveHeader(_ line: UnsafeRawBufferPointer) -> Int {
        var bytes = line[...]
        while let last = bytes.last, last == 13 || last == 10 { bytes.removeLast() }
        if bytes.starts(with: "HTTP/".utf8) {
            // A new response begins (after a `100 Continue`, say): only the final one's headers count.
            headers.removeAll()
        } else if let colon = bytes.firstIndex(of: 58) {
            let name = String(decoding: bytes[..<colon], as: UTF8.self)
            var value = bytes[(colon + 1)...]
            while let first = value.first, first == 32 || first == 9 { value.removeFirst() }
            while let last = value.last, last == 32 || last == 9 { value.removeLast() }
            headers.append((name, String(decoding: value, as: UTF8.self)))
        }
        return line.count
    }

    /// CURLOPT_WRITEFUNCTION: a piece of the response body. Returning less than given aborts.
    private func receiveBody(_ data: UnsafeRawBufferPointer) -> Int {
        if let limit = receiveLimit, !limit.admit(data.count, for: self) {
            pausedFor.insert(.receive)
            return Int(CURL_WRITEFUNC_PAUSE)
        }
        if destination == nil {
            destination = chooseDestination()
        }
        switch destination {
        case nil:
            return 0
        case .memory(let limit):
            guard received.count + data.count <= limit else {
                failure = .tooLarge(url: url, limit: limit)
                return 0
            }
            received.append(contentsOf: data)
        case .file(let file):
            let start = writePosition
            var done = 0
            while done < data.count {
                let wrote = pwrite(file.raw, data.baseAddress! + done, data.count - done, off_t(writePosition))
                if wrote < 0 {
                    if errno == EINTR { continue }
                    failure = .io(SystemError("write", errno: errno, path: file.path))
                    return 0
                }
                done += wrote
                writePosition += Int64(wrote)
            }
            // After the write: a reader of the file (a trailing hasher) finds these bytes there.
            tap?.received?(start, data)
        case .tap:
            tap?.received?(writePosition, data)
            writePosition += Int64(data.count)
        }
        return data.count
    }

    /// Where the body goes, decided when it starts and the status is known; nil after a failure.
    private func chooseDestination() -> Destination? {
        let status = responseCode()
        var announced: curl_off_t = -1
        _ = sinki_curl_easy_getinfo_off_t(raw, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &announced)
        switch sink {
        case .file(let file, let offset) where (200..<300).contains(status):
            if status == 206 {
                guard let start = contentRangeStart(), start == offset else {
                    failure = .badResponse(url: url, detail: "Content-Range \"\(header("content-range") ?? "")\" does not start at byte \(offset)")
                    return nil
                }
                writePosition = offset
            } else {
                writePosition = 0
            }
            if ftruncate(file.raw, off_t(writePosition)) != 0 {
                failure = .io(SystemError("ftruncate", errno: errno, path: file.path))
                return nil
            }
            // After the truncation, which frees blocks past the end.
            if announced > 0 { file.reserve(writePosition, Int64(announced)) }
            return .file(file)
        case .tap where (200..<300).contains(status):
            return .tap
        case .file, .tap:
            return limitMemory(Self.errorBodyLimit, announced: Int64(announced))
        case .memory(let limit):
            return limitMemory(limit, announced: Int64(announced))
        }
    }

    private func limitMemory(_ limit: Int, announced: Int64) -> Destination? {
        if announced > Int64(limit) {
            failure = .tooLarge(url: url, limit: limit)
            return nil
        }
        if announced > 0 { received.reserveCapacity(Int(announced)) }
        return .memory(limit: limit)
    }

    private func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name }?.1
    }

    /// The first byte of `Content-Range: bytes FIRST-LAST/TOTAL`.
    private func contentRangeStart() -> Int64? { Self.contentRangeStart(header("content-range")) }

    /// The parsing behind `contentRangeStart()`, apart from the handle (the fuzz target calls it).
    static func contentRangeStart(_ header: String?) -> Int64? {
        guard let value = header else { return nil }
        let parts = value.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bytes", let dash = parts[1].firstIndex(of: "-") else { return nil }
        return Int64(parts[1][..<dash])
    }

    /// CURLOPT_XFERINFOFUNCTION: (done, total) of the upload when there is a body, else of the
    /// download, counted from the file's start for a resumed one; reported only when it changes.
    private func reportProgress(downloaded: Int64, downloadTotal: Int64, uploaded: Int64) {
        guard let progress else { return }
        let value: (Int64, Int64)
        if bodyLength > 0 {
            value = (uploaded, bodyLength)
        } else {
            // Before the status line, a resumed download cannot tell whether it resumes (206) or
            // starts over (200): say nothing yet.
            let status = responseCode()
            guard status != 0 else { return }
            var base: Int64 = 0
            if case .file(_, let offset) = sink, offset > 0, status == 206 { base = offset }
            value = (base + downloaded, downloadTotal > 0 ? base + downloadTotal : 0)
        }
        guard value != lastProgress else { return }
        lastProgress = value
        progress(value.0, value.1)
    }
}

@available(*, unavailable)
extension EasyHandle: Sendable {}
