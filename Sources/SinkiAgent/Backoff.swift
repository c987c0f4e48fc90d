/// Growing, capped, jittered delays between attempts to reach the server.
public struct Backoff: Sendable {
    public var steps: [Double]
    public var jitter: Double
    public private(set) var attempt = 0

    /// 0.5 s doubling up to 30 s, each ±25 %: a restarted server is found again within seconds, and
    /// a fleet of agents does not knock in step.
    public init(steps: [Double] = [0.5, 1, 2, 4, 8, 16, 30], jitter: Double = 0.25) {
        self.steps = steps
        self.jitter = jitter
    }

    /// The next delay in seconds.
    public mutating func next() -> Double {
        let base = steps[min(attempt, steps.count - 1)]
        attempt += 1
        return base * Double.random(in: (1 - jitter)...(1 + jitter))
    }

    public mutating func reset() { attempt = 0 }
}
