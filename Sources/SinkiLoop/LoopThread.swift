import Foundation

/// Runs an EventLoop on a thread of its own (tests, and the agent when its main thread is busy).
public final class LoopThread: Sendable {
    public let loop: EventLoop
    private let finished = DispatchSemaphore(value: 0)

    /// Starts a loop on a new thread.
    public init(name: String = "sinki-loop") {
        let loop = EventLoop()
        self.loop = loop
        let finished = self.finished
        let started = DispatchSemaphore(value: 0)
        let thread = Thread {
            loop.markOwner()
            started.signal()
            loop.run()
            finished.signal()
        }
        thread.name = name
        thread.start()
        started.wait()
    }

    /// Stops the loop and waits for its thread to finish.
    public func stop() {
        loop.stop()
        finished.wait()
    }
}
