import Glibc
import SinkiLoop
import SinkiSupport

extension TusClient {
    /// Downloads an asset (`GET /v1/assets/ID`) into `temporaryPath`, going on from what the file
    /// already holds with `Range`, hashing the bytes as they arrive. Returns once the file has exactly
    /// `size` bytes whose SHA-256 is `sha256`; the caller then renames it into place. A mismatch is
    /// downloaded again from the start (it counts as a failed attempt), never returned.
    public func download(_ url: String, to temporaryPath: String, size: Int64, sha256: String,
                         progress: ((Int64, Int64) -> Void)? = nil,
                         isolation: isolated (any Actor)? = #isolation) async throws(TusError) -> Int64 {
        var failures = 0
        var received: Int64 = 0
        while true {
            do throws(TusError) {
                var have: Int64 = 0
                var info = Glibc.stat()
                if stat(temporaryPath, &info) == 0 {
                    have = Int64(info.st_size)
                } else {
                    // Made now, so the hasher finds it whenever it first reads.
                    let fd = open(temporaryPath, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
                    guard fd >= 0 else { throw TusError.io(SystemError("open", errno: errno, path: temporaryPath)) }
                    close(fd)
                }
                if have > size {
                    truncate(temporaryPath, 0)
                    have = 0
                }
                // What an earlier try left is read once, before the request (a server that ignores the
                // Range has the file rewritten); the rest is hashed beside the transfer as it lands in
                // the file, never on the loop. The file is synced once whole: what is hashed starts for
                // the disk.
                let hasher = TrailingDigest(path: temporaryPath, from: 0, algorithm: .sha256, startsWriteback: true)
                let prefix = have
                do { try await Blocking.run { try hasher.wait(upTo: prefix) } } catch { throw Self.map(error) }
                var outcome: Result<HTTPResponse, TusError>?
                let arrived = ByteCount()
                if have < size {
                    let request = HTTPRequest(url: url, headers: server.headers, bearerToken: server.bearerToken, stallTimeout: options.stallTimeout)
                    do {
                        outcome = .success(try await send(request, sink: .file(path: temporaryPath, offset: have), progress: progress,
                                                          tap: HTTPTap(received: { offset, bytes in
                                                              arrived.value += Int64(bytes.count)
                                                              hasher.advance(to: offset + Int64(bytes.count))
                                                          })))
                    } catch {
                        outcome = .failure(error)
                    }
                }
                var now = Glibc.stat()
                let statFailed = stat(temporaryPath, &now) != 0 ? errno : 0
                switch outcome {
                case .failure(let error)?:
                    // The next try (or none) hashes afresh: this hasher's queue is idle before it goes.
                    await Blocking.run { hasher.abandon() }
                    throw error
                case .success(let response)? where !response.isSuccess:
                    await Blocking.run { hasher.abandon() }
                    if response.status == 416 { truncate(temporaryPath, 0) }
                    throw Self.failure(response, url: url, step: "downloading")
                default: break
                }
                received += arrived.value
                guard statFailed == 0 else { throw TusError.io(SystemError("stat", errno: statFailed, path: temporaryPath)) }
                let length = Int64(now.st_size)
                let actual: String
                do { actual = Hex.encode(try await Blocking.run { try hasher.finish(at: length) }) } catch {
                    // Cut back under the hasher (a download that started over): checked, and found wanting.
                    guard stat(temporaryPath, &now) == 0, Int64(now.st_size) < length else { throw Self.map(error) }
                    actual = "(the file was cut short while it was hashed)"
                }
                guard Int64(now.st_size) == size, actual == sha256.lowercased() else {
                    truncate(temporaryPath, 0)
                    throw TusError.contentMismatch(url: url, detail: "got \(now.st_size) bytes with SHA-256 \(actual), expected \(size) with \(sha256); downloading again")
                }
                progress?(size, size)
                return received
            } catch {
                try await backOff(after: error, failures: &failures)
            }
        }
    }
}

/// Bytes counted by a loop callback and read after the transfer, on the same loop.
private final class ByteCount {
    var value: Int64 = 0
}
