/// Waits on the loop without a thread: the awaiting task resumes from a libuv timer.
public final class LoopSleeper {
    private let loop: EventLoop
    private var waiting: [Int: (LoopTimer, CheckedContinuation<Bool, Never>)] = [:]
    private var nextID = 0

    public init(loop: EventLoop) { self.loop = loop }

    /// Sleeps `milliseconds`; returns false when woken early by `wakeAll()`.
    public func sleep(milliseconds: UInt64, isolation: isolated (any Actor)? = #isolation) async -> Bool {
        loop.checkIsolated()
        let id = nextID
        nextID += 1
        return await withCheckedContinuation { continuation in
            let timer = LoopTimer(loop: loop)
            waiting[id] = (timer, continuation)
            timer.start(after: milliseconds) { [unowned self] in
                if let (_, continuation) = self.waiting.removeValue(forKey: id) { continuation.resume(returning: true) }
            }
        }
    }

    /// Ends every sleep now (shutdown, or "sync now").
    public func wakeAll() {
        let all = waiting
        waiting.removeAll()
        for (_, (timer, continuation)) in all {
            timer.stop()
            continuation.resume(returning: false)
        }
    }
}
