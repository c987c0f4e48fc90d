/// A loop-confined value carried through a `Sendable` closure to a task that uses it on the same loop.
// @unchecked: `value` checks that it is read on the loop's thread, where every other use of it runs.
public struct LoopBound<Value>: @unchecked Sendable {
    private let wrapped: Value
    public let loop: EventLoop

    public init(_ value: Value, loop: EventLoop) {
        wrapped = value
        self.loop = loop
    }

    public var value: Value {
        loop.checkIsolated()
        return wrapped
    }
}
