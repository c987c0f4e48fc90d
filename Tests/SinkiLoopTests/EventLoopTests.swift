import Glibc
import Synchronization
import Testing
@testable import SinkiLoop

/// An actor whose executor is the loop, as the agent's is.
actor OnLoop {
    nonisolated let loop: EventLoop
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }
    var fired: [String] = []
    var timer: LoopTimer?
    var poll: LoopPoll?

    init(loop: EventLoop) { self.loop = loop }

    func record(_ event: String) { fired.append(event) }

    /// Waits on the loop for a timer, without blocking the loop thread.
    func timerFires(after milliseconds: UInt64) async -> Int64 {
        let start = Clock.monotonicNanoseconds()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let timer = LoopTimer(loop: loop)
            self.timer = timer
            timer.start(after: milliseconds) { [unowned self] in
                // Timer callbacks run on the loop thread, which is this actor's executor.
                self.assumeIsolated { $0.record("timer") }
                continuation.resume()
            }
        }
        return Clock.monotonicNanoseconds() - start
    }

    func readable(fd: Int32) async throws -> LoopPoll.Events {
        let poll = try LoopPoll(loop: loop, fd: fd)
        self.poll = poll
        return await withCheckedContinuation { continuation in
            poll.start(.readable) { [unowned poll] _, events in
                poll.stop()
                continuation.resume(returning: events)
            }
        }
    }

    func offloaded() async throws -> Bool {
        let value = await Blocking.run { 21 * 2 }
        loop.checkIsolated()
        return value == 42
    }
}

enum Clock {
    static func monotonicNanoseconds() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
    }
}

@Suite struct EventLoopTests {
    @Test func actorRunsOnTheLoopAndTimersFire() async throws {
        let thread = LoopThread()
        defer { thread.stop() }
        let actor = OnLoop(loop: thread.loop)
        let elapsed = await actor.timerFires(after: 20)
        #expect(elapsed >= 19_000_000)
        #expect(await actor.fired == ["timer"])
        #expect(try await actor.offloaded())
    }

    @Test func pollSeesAReadableFileDescriptor() async throws {
        let thread = LoopThread()
        defer { thread.stop() }
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        let (readEnd, writeEnd) = (fds[0], fds[1])
        defer { close(readEnd); close(writeEnd) }
        let actor = OnLoop(loop: thread.loop)
        async let events = actor.readable(fd: readEnd)
        #expect(write(writeEnd, "x", 1) == 1)
        #expect(try await events.contains(.readable))
    }

    @Test func executeRunsClosuresFromOtherThreads() async {
        let thread = LoopThread()
        defer { thread.stop() }
        let count = Mutex(0)
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            for index in 0..<100 {
                thread.loop.execute {
                    thread.loop.checkIsolated()
                    let reached = count.withLock { $0 += 1; return $0 }
                    if reached == 100 { done.resume() }
                    _ = index
                }
            }
        }
        #expect(count.withLock { $0 } == 100)
    }

    @Test func workForALoopThatHasClosedIsDroppedNotACrash() {
        // A task not awaited before its loop stopped may still hop back once its work elsewhere ends:
        // waking the closed loop wrote to its closed eventfd, and libuv aborted the process (an agent
        // stopped by SIGTERM exited with SIGABRT, soak seed 58228).
        let thread = LoopThread()
        thread.stop()
        let ran = Mutex(false)
        thread.loop.execute { ran.withLock { $0 = true } }
        thread.loop.stop()
        #expect(!ran.withLock { $0 })
    }

    @Test func blockingMapKeepsOrder() {
        let out = Blocking.map(Array(0..<1000)) { $0 * 2 }
        #expect(out == (0..<1000).map { $0 * 2 })
    }
}
