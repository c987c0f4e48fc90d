import Foundation
import Glibc
import SinkiRecord

/// A failure of the test client: connect, send, a response that never came or would not parse.
struct ClientError: Error, CustomStringConvertible {
    var description: String
}

/// One HTTP/1.1 response as the test client read it.
struct TestResponse {
    var status: Int
    /// Header names lowercased.
    var headers: [String: String]
    var body: [UInt8]

    var text: String { String(decoding: body, as: UTF8.self) }
    func header(_ name: String) -> String? { headers[name.lowercased()] }

    /// The path of the `Location` header (absolute on the server's own address, or relative).
    var locationPath: String? {
        guard let location = header("Location") else { return nil }
        guard let scheme = location.range(of: "://") else { return location }
        let rest = location[scheme.upperBound...]
        return rest.firstIndex(of: "/").map { String(rest[$0...]) }
    }

    func page() throws -> RecordPage {
        guard status == 200 else { throw ClientError(description: "expected 200, got \(status): \(text)") }
        return try RecordPage.parse(body)
    }

    func modifyResults() throws -> [ModifyResult] {
        guard status == 200 else { throw ClientError(description: "expected 200, got \(status): \(text)") }
        return try ModifyResponse.parse(body).results
    }

    func problem() throws -> Problem {
        guard header("Content-Type") == "application/problem+json", let problem = Problem.parse(body) else {
            throw ClientError(description: "expected a problem, got \(status) \(header("Content-Type") ?? "-"): \(text)")
        }
        return problem
    }
}

/// A blocking HTTP/1.1 client on one TCP connection. Tests use raw sockets so that they control exactly
/// which connection waits, when it is read, and when it hangs up.
final class TestConnection {
    let fd: Int32
    private var pending: [UInt8] = []

    init(port: Int, host: String = "127.0.0.1") throws {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV
        var found: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &found) == 0, let info = found else {
            throw ClientError(description: "cannot resolve \(host)")
        }
        defer { freeaddrinfo(found) }
        fd = socket(info.pointee.ai_family, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0, connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 else {
            let message = String(cString: strerror(errno))
            // No close here: every stored property is set, so deinit runs and closes it. A second
            // close could hit a descriptor another thread just opened (a server's listen socket).
            throw ClientError(description: "connect to \(host):\(port): \(message)")
        }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    deinit { Glibc.close(fd) }

    func send(_ method: String, _ target: String, headers: [(String, String)] = [], body: [UInt8]? = nil,
              chunked: Bool = false) throws {
        var head = "\(method) \(target) HTTP/1.1\r\nHost: localhost\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if let body {
            head += chunked ? "Transfer-Encoding: chunked\r\n" : "Content-Length: \(body.count)\r\n"
        }
        head += "\r\n"
        try write(Array(head.utf8))
        if let body {
            if chunked {
                var offset = 0
                while offset < body.count {
                    let size = min(64 * 1024, body.count - offset)
                    try write(Array("\(String(size, radix: 16))\r\n".utf8) + body[offset..<offset + size] + [13, 10])
                    offset += size
                }
                try write(Array("0\r\n\r\n".utf8))
            } else {
                try write(body)
            }
        }
    }

    func write(_ bytes: [UInt8]) throws {
        var done = 0
        while done < bytes.count {
            let wrote = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + done, bytes.count - done, Int32(MSG_NOSIGNAL)) }
            if wrote < 0 {
                if errno == EINTR { continue }
                throw ClientError(description: "send: \(String(cString: strerror(errno)))")
            }
            done += wrote
        }
    }

    /// Whether bytes (or the end of the stream) arrive within `seconds`.
    func isReadable(within seconds: Double) -> Bool {
        if !pending.isEmpty { return true }
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, Int32(seconds * 1000)) > 0
    }

    /// Bytes read and not yet taken by `receive` (what arrived before an end of stream, say).
    var unread: Int { pending.count }

    /// Whether the server closed the connection (end of stream) within `seconds`.
    func isClosed(within seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            guard isReadable(within: deadline.timeIntervalSinceNow) else { return false }
            var byte: UInt8 = 0
            let got = recv(fd, &byte, 1, 0)
            if got == 0 { return true }
            if got < 0 { return errno == ECONNRESET }
            pending.append(byte)
        }
        return false
    }

    private func fill(timeout: Double) throws {
        guard isReadable(within: timeout) else { throw ClientError(description: "no response within \(timeout) s") }
        var chunk = [UInt8](repeating: 0, count: 256 * 1024)
        let got = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if got < 0 { throw ClientError(description: "recv: \(String(cString: strerror(errno)))") }
        if got == 0 { throw ClientError(description: "the server closed the connection") }
        pending.append(contentsOf: chunk[0..<got])
    }

    /// Reads one response (a Content-Length body; a chunked one is read with `receiveHead` and
    /// `receiveChunk`).
    func receive(timeout: Double = 15, expectBody: Bool = true) throws -> TestResponse {
        let deadline = Date().addingTimeInterval(timeout)
        var head = try receiveHead(timeout: timeout)
        // A HEAD answer announces a length it does not send.
        let length = expectBody ? Int(head.header("Content-Length") ?? "0") ?? 0 : 0
        while pending.count < length { try fill(timeout: max(0, deadline.timeIntervalSinceNow)) }
        head.body = Array(pending[0..<length])
        pending.removeFirst(length)
        return head
    }

    /// Reads a response's head; its body, if chunked, follows through `receiveChunk`.
    func receiveHead(timeout: Double = 15) throws -> TestResponse {
        let deadline = Date().addingTimeInterval(timeout)
        var headEnd: Int?
        while headEnd == nil {
            headEnd = pending.indices.dropLast(3).first { pending[$0] == 13 && pending[$0 + 1] == 10 && pending[$0 + 2] == 13 && pending[$0 + 3] == 10 }
            if headEnd == nil { try fill(timeout: max(0, deadline.timeIntervalSinceNow)) }
        }
        let lines = String(decoding: pending[0..<headEnd!], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = lines[0].split(separator: " ")
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else { throw ClientError(description: "bad status line \(lines[0])") }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        pending.removeFirst(headEnd! + 4)
        return TestResponse(status: status, headers: headers, body: [])
    }

    /// The next chunk of a chunked body; nil at its last, empty one (its trailer read too).
    func receiveChunk(timeout: Double = 15) throws -> [UInt8]? {
        let deadline = Date().addingTimeInterval(timeout)
        func line() throws -> String {
            while true {
                if let end = pending.indices.dropLast().first(where: { pending[$0] == 13 && pending[$0 + 1] == 10 }) {
                    let text = String(decoding: pending[0..<end], as: UTF8.self)
                    pending.removeFirst(end + 2)
                    return text
                }
                try fill(timeout: max(0, deadline.timeIntervalSinceNow))
            }
        }
        let sizeLine = try line()
        guard let size = Int(sizeLine.split(separator: ";")[0], radix: 16) else { throw ClientError(description: "bad chunk size line \(sizeLine)") }
        if size == 0 {
            while try !line().isEmpty {}
            return nil
        }
        while pending.count < size + 2 { try fill(timeout: max(0, deadline.timeIntervalSinceNow)) }
        let chunk = Array(pending[0..<size])
        pending.removeFirst(size + 2)
        return chunk
    }

    func request(_ method: String, _ target: String, headers: [(String, String)] = [], body: [UInt8]? = nil,
                 timeout: Double = 15) throws -> TestResponse {
        try send(method, target, headers: headers, body: body)
        return try receive(timeout: timeout, expectBody: method != "HEAD")
    }
}

/// Percent-encodes a query argument.
func encoded(_ text: String) -> String {
    var allowed = CharacterSet.alphanumerics
    allowed.insert(charactersIn: "-._~")
    return text.addingPercentEncoding(withAllowedCharacters: allowed)!
}
