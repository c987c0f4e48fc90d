import Foundation
import Glibc
import Synchronization
import SinkiTestSupport
import Testing

/// The fault suite's own parts, checked on their own so that a divergence the suite reports is the
/// agent's and not the harness's: the generator's stream, the rule of check 2, and the proxy's faults
/// on real loopback sockets.
@Suite struct FaultSuiteHarness {
    @Test func theGeneratorIsSplitMix64() {
        // The first outputs of SplitMix64 from seed 0, as its reference implementation gives them.
        var random = SeededRandom(seed: 0)
        #expect([random.next(), random.next(), random.next()] == [0xE220_A839_7B1D_CDAF, 0x6E78_9E6A_A1B9_65F4, 0x06C4_5D18_8009_454F])
        var a = SeededRandom(seed: 42), b = SeededRandom(seed: 42)
        #expect((0..<100).map { _ in a.below(7) } == (0..<100).map { _ in b.below(7) })
        #expect((0..<1000).allSatisfy { _ in (0..<7).contains(a.below(7)) })
    }

    @Test func theSameSeedMakesTheSameOperationsOnTheSameTrees() throws {
        func run() throws -> [String] {
            let directory = TemporaryDirectory("sinki-ops")
            let roots = ["a", "b"].map { name -> (agent: String, path: String) in
                let path = directory.child(name)
                try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
                return (name, path)
            }
            let generator = RandomOperations(roots: roots, seed: 7)
            for index in 0..<300 { generator.next(index) }
            return generator.log.operations.map { "\($0.agent) \($0.kind) \($0.path) \($0.destination ?? "") \($0.done) \($0.written.map(\.sha256))" }
        }
        let first = try run()
        #expect(first == (try run()))
        #expect(first.filter { $0.contains(" true ") }.count > 150)
    }

    func operation(_ index: Int, _ agent: String, _ kind: FileOperation.Kind, _ path: String, to destination: String? = nil,
                   content: String? = nil) -> FileOperation {
        var operation = FileOperation(index: index, agent: agent, kind: kind, path: path, destination: destination)
        operation.done = true
        operation.touched = true
        if let content { operation.written = [.init(path: path, size: content.count, sha256: content, orphaned: false)] }
        return operation
    }

    @Test func aVersionIsHeldUntilAnotherOperationTouchesItsPath() {
        let log = OperationLog()
        log.append(operation(0, "a", .create, "d/x", content: "x1"))
        log.append(operation(1, "b", .create, "d/y", content: "y1"))
        log.append(operation(2, "c", .overwrite, "d/y", content: "y2")) // the last write of d/y wins
        log.append(operation(3, "a", .create, "e/z", content: "z1"))
        log.append(operation(4, "b", .renameFolder, "e", to: "f"))      // moves z away: not held
        log.append(operation(5, "a", .create, "g/w", content: "w1"))
        log.append(operation(6, "c", .mkdir, "g"))                    // a mkdir touches only g itself
        log.append(operation(7, "a", .create, "h/v", content: "v1"))
        log.append(operation(8, "b", .removeTree, "h"))                 // removed: not held
        log.append(operation(9, "c", .create, "h/v", content: "v2"))    // written again after: held
        log.append(operation(10, "a", .create, "k", content: "k1"))
        log.append(operation(11, "b", .rename, "m", to: "k"))           // renamed onto: not held
        var failed = operation(12, "c", .delete, "d/x")
        failed.done = false
        failed.touched = false
        log.append(failed)                                              // a failed delete touches nothing
        var same = operation(13, "a", .overwrite, "d/y", content: "y2")
        same.unchanged = true
        same.touched = false
        log.append(same)                                                // same bytes again: d/y stays c's
        let held = log.lastWrites().mapValues(\.version.sha256)
        #expect(held == ["d/x": "x1", "d/y": "y2", "g/w": "w1", "h/v": "v2"])
    }

    @Test func aWriteIntoAFolderAnotherAgentJustRenamedIsNotHeld() {
        let log = OperationLog()
        log.append(operation(0, "a", .create, "d/x", content: "x1"))
        log.append(operation(1, "a", .renameFolder, "d", to: "e"))
        // c had not seen the rename: its write follows the folder, or stays; both are right.
        log.append(operation(2, "c", .overwrite, "d/x", content: "x2"))
        // The renaming agent's own write at the old path made a new folder there: held.
        log.append(operation(3, "a", .create, "d/y", content: "y1"))
        // Long after the rename, another agent's write at the old path is an ordinary write: held.
        log.append(operation(4 + OperationLog.raceWindow, "c", .create, "d/z", content: "z1"))
        let held = log.lastWrites().mapValues(\.version.sha256)
        #expect(held == ["d/y": "y1", "d/z": "z1"])
    }

    @Test func writesThatEndInTheBytesTheyBeganWithChangeNothingUnlessTheServerSawTheWay() {
        func write(_ index: Int, _ agent: String, _ path: String, _ content: String, before: String?) -> FileOperation {
            var written = operation(index, agent, .overwrite, path, content: content)
            written.written[0].before = before
            return written
        }
        let log = OperationLog()
        log.append(write(0, "a", "x", "x1", before: nil))
        log.append(write(1, "b", "x", "x2", before: "x1"))     // b's run: x1 -> x2 -> x1, unseen
        log.append(write(2, "c", "y", "y1", before: nil))      // other paths in between do not matter
        log.append(write(3, "b", "x", "x1", before: "x2"))     // back to a's bytes: a's version is held
        log.append(write(4, "a", "e", "", before: nil))
        log.append(operation(5, "c", .rename, "e", to: "z"))
        log.append(write(6, "b", "e", "e1", before: ""))       // after the rename: b's stale copy (seed 9846)
        log.append(write(6, "b", "e", "", before: "e1"))       // ... emptied again: nothing held
        log.append(write(7, "a", "w", "w1", before: nil))
        log.append(write(8, "b", "w", "w2", before: "w1"))
        log.append(write(9, "c", "w", "w3", before: "w2"))     // another agent between: two runs
        log.append(write(10, "b", "w", "w1", before: "w3"))
        log.append(write(11, "a", "v", "v1", before: nil))
        log.append(write(12, "b", "v", "v2", before: "v1"))
        log.append(write(13, "b", "v", "v1", before: "v2"))    // v2 reached the server: an edit after all
        let held = log.lastWrites(reachedServer: ["v2"]).mapValues(\.version.sha256)
        #expect(held == ["x": "x1", "y": "y1", "w": "w1", "v": "v1"])
        #expect(log.lastWrites(reachedServer: ["v2"])["x"]?.operation.agent == "a")
        #expect(log.lastWrites(reachedServer: ["v2"])["v"]?.operation.agent == "b")
        #expect(log.lastWrites()["v"]?.operation.agent == "a")
    }

    /// Seed 41008: b sent its file, then, stopped, wrote it twice and put back the bytes it had sent,
    /// while c edited it and a deleted it. b's disk never held anything of theirs, so b changed nothing:
    /// the path is held to what c and a made of it (nothing, after a's delete). Had b's agent brought c's
    /// edit in between (b's write finding other bytes than its own), b's write would be held.
    @Test func anAgentThatPutsBackWhatItSentChangedNothingWhateverOthersDidMeanwhile() {
        func write(_ index: Int, _ agent: String, _ content: String, before: String?) -> FileOperation {
            var written = operation(index, agent, .overwrite, "a.txt", content: content)
            written.written[0].before = before
            return written
        }
        let log = OperationLog()
        log.append(write(0, "b", "e0", before: nil))        // sent: reached the server
        log.append(write(1, "b", "e1", before: "e0"))
        log.append(write(2, "c", "c1", before: "e0"))
        log.append(operation(3, "a", .delete, "a.txt"))
        log.append(write(4, "b", "e0", before: "e1"))        // b's own bytes back, on b's own disk
        #expect(log.lastWrites(reachedServer: ["e0", "c1"])["a.txt"] == nil)
        // Without a's delete, c's edit is what stays.
        let kept = OperationLog()
        for operation in log.operations where operation.kind != .delete { kept.append(operation) }
        #expect(kept.lastWrites(reachedServer: ["e0", "c1"])["a.txt"]?.version.sha256 == "c1")
        // b's agent brought c's edit to b before b wrote: b's write is an edit of it, and held.
        let seen = OperationLog()
        seen.append(write(0, "b", "e0", before: nil))
        seen.append(write(1, "c", "c1", before: "e0"))
        seen.append(write(2, "b", "e0", before: "c1"))
        #expect(seen.lastWrites(reachedServer: ["e0", "c1"])["a.txt"]?.operation.agent == "b")
    }

    /// A version the agent carried elsewhere while it was written (seed 5 on a loaded machine: a peer's
    /// rename, then a rename onto another name, then a delete there) is gone rightly once a later
    /// operation did away with those bytes, wherever they were by then.
    @Test func bytesALaterOperationDidAwayWithAreNotAskedFor() throws {
        let log = OperationLog()
        log.append(operation(0, "a", .append, "r", content: "r2"))
        #expect(!log.destroyed("r2", after: 0))
        var deleted = operation(1, "a", .delete, "m")
        deleted.destroyed = ["r2"]
        log.append(deleted)
        #expect(log.destroyed("r2", after: 0))
        #expect(!log.destroyed("r2", after: 1))
        var edited = operation(2, "b", .append, "n", content: "n2")
        edited.written[0].before = "n1"
        log.append(edited)
        #expect(log.destroyed("n1", after: 1))

        // What the generator records: the bytes a delete, a rename onto a file and a tree removal end.
        let directory = TemporaryDirectory("sinki-ops-destroyed")
        let root = directory.child("a")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let generator = RandomOperations(roots: [("a", root)], seed: 11)
        var ended = 0
        for index in 0..<400 {
            let done = generator.next(index)
            guard done.done, [.delete, .removeTree].contains(done.kind) || (done.kind == .rename && done.destroyed.count == 1) else { continue }
            ended += done.destroyed.count
        }
        #expect(ended > 0)
        let deletes = generator.log.operations.filter { $0.kind == .delete && $0.done }
        #expect(!deletes.isEmpty && deletes.allSatisfy { $0.destroyed.count == 1 })
    }

    @Test func theProxyForwardsBothWaysWhenItHasNoFault() throws {
        let server = try ByteServer(sending: 300_000)
        let proxy = try FaultProxy(label: "t", targetPort: server.port, seed: 1, script: [.none])
        defer { proxy.stop() }
        let got = try ByteClient.run(port: proxy.port, sending: 100_000)
        #expect(got.received == 300_000 && got.error == nil)
        try waitUntilSync("the server to get every byte") { server.received == [100_000] }
    }

    @Test func aTruncatedConnectionEndsInOrderAfterExactlyItsBytes() throws {
        let server = try ByteServer(sending: 300_000)
        let proxy = try FaultProxy(label: "t", targetPort: server.port, seed: 1, script: [.truncate(after: 12_345, direction: .down)])
        defer { proxy.stop() }
        let got = try ByteClient.run(port: proxy.port, sending: 0)
        #expect(got.received == 12_345 && got.error == nil)
    }

    @Test func aResetConnectionEndsWithARST() throws {
        let server = try ByteServer(sending: 300_000)
        let proxy = try FaultProxy(label: "t", targetPort: server.port, seed: 1, script: [.reset(after: 1000, direction: .down)])
        defer { proxy.stop() }
        let got = try ByteClient.run(port: proxy.port, sending: 0)
        #expect(got.error == ECONNRESET)
        #expect(got.received <= 1000)
    }

    @Test func healingCutsAStalledConnectionAtOnce() throws {
        let server = try ByteServer(sending: 300_000)
        let proxy = try FaultProxy(label: "t", targetPort: server.port, seed: 1,
                                   script: [.stall(after: 5000, direction: .down, seconds: 60, thenClose: false), .none])
        defer { proxy.stop() }
        let started = Date()
        let healer = Thread { usleep(300_000); proxy.heal() } // when to heal: the point of the test
        healer.start()
        let got = try ByteClient.run(port: proxy.port, sending: 0)
        #expect(got.received == 5000 && got.error == ECONNRESET)
        #expect(Date().timeIntervalSince(started) < 3)
        // Healed: the next connection moves everything, with no fault.
        #expect(try ByteClient.run(port: proxy.port, sending: 0).received == 300_000)
    }

    @Test func aDelayedConnectionArrivesWholeButLate() throws {
        let server = try ByteServer(sending: 1000)
        let proxy = try FaultProxy(label: "t", targetPort: server.port, seed: 1, script: [.delay(milliseconds: 200)])
        defer { proxy.stop() }
        let started = Date()
        let got = try ByteClient.run(port: proxy.port, sending: 0)
        #expect(got.received == 1000 && got.error == nil)
        #expect(Date().timeIntervalSince(started) >= 0.2)
    }

    @Test func withNothingListeningTheAgentSeesItsConnectionRefused() throws {
        let proxy = try FaultProxy(label: "t", targetPort: freePort(), seed: 1, script: [.none])
        defer { proxy.stop() }
        let got = try ByteClient.run(port: proxy.port, sending: 0)
        #expect(got.received == 0 && got.error == ECONNRESET)
    }
}

/// A loopback server for the proxy tests: each connection is sent `sending` bytes, then read to its
/// end; what each connection sent it is in `received`.
final class ByteServer: @unchecked Sendable {
    // @unchecked: `counts` is a Mutex; the listening socket belongs to the accept thread after init.
    let port: Int
    private let listener: Int32
    private let counts = Mutex<[Int]>([])

    init(sending: Int) throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        self.listener = listener
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listening = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, length) == 0 && listen(listener, 16) == 0 && getsockname(listener, $0, &length) == 0
            }
        }
        guard listening else { throw ProxyError("test server cannot listen") }
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread { [self] in
            // Lives until the test process ends (a few sockets, once per test).
            while true {
                let fd = accept(listener, nil, nil)
                guard fd >= 0 else { return }
                Thread { [self] in serve(fd, sending: sending) }.start()
            }
        }.start()
    }

    var received: [Int] { counts.withLock { $0 } }

    private func serve(_ fd: Int32, sending: Int) {
        defer { close(fd) }
        let payload = [UInt8](repeating: 0x5A, count: sending)
        var offset = 0
        while offset < sending {
            let wrote = payload.withUnsafeBytes { send(fd, $0.baseAddress!.advanced(by: offset), sending - offset, Int32(MSG_NOSIGNAL)) }
            if wrote <= 0 { return }
            offset += wrote
        }
        var total = 0
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let got = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if got <= 0 { break }
            total += got
        }
        counts.withLock { $0.append(total) }
    }
}

/// One client connection through the proxy: sends `sending` bytes, closes its sending side, then
/// reads to the end; what it read and the error that ended it (nil for an orderly end).
enum ByteClient {
    static func run(port: Int, sending: Int) throws -> (received: Int, error: Int32?) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(fd) }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard connected else { throw ProxyError("cannot connect to the proxy") }
        let payload = [UInt8](repeating: 0xA5, count: sending)
        var offset = 0
        while offset < sending {
            let wrote = payload.withUnsafeBytes { send(fd, $0.baseAddress!.advanced(by: offset), sending - offset, Int32(MSG_NOSIGNAL)) }
            if wrote <= 0 { break }
            offset += wrote
        }
        shutdown(fd, Int32(SHUT_WR))
        var total = 0
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let got = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if got == 0 { return (total, nil) }
            if got < 0 { return (total, errno) }
            total += got
        }
    }
}
