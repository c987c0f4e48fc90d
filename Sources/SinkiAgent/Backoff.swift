import SinkiSupport

/// Growing, capped, jittered delays between attempts to reach the server.
public struct Backoff: Sendable {
    public var steps: [Double]
    public var jitter: Double
    /// The first `quickSteps` steps are given in turn, and the last of them again until the delays
    /// given add up to `quickSeconds`; only then do the later steps follow.
    public var quickSteps: Int
    public var quickSeconds: Double
    public private(set) var attempt = 0
    private var step = 0
    /// The delays given so far, before jitter.
    private var waited = 0.0
    /// When the first delay since the last reset was given (monotonic ns), by `clock`.
    private var since: Int64?
    private let clock: @Sendable () -> Int64

    /// 0.5 s, then every second for the first minute, then 2 s doubling up to 30 s; each ±25 %. A
    /// server restart, the outage met most, usually ends within that minute, and the agent finds the
    /// server about a second after it answers again; a longer outage costs a try every 30 s; a fleet
    /// of agents does not knock in step.
    /// The quick steps last until their delays add up to `quickSeconds` *and* that much time has passed
    /// on `clock`: retries that end early (another request's answer, a wake) must not use the minute up
    /// in seconds (a 30 s outage once left agents retrying every 4 to 16 s).
    public init(steps: [Double] = [0.5, 1, 2, 4, 8, 16, 30], jitter: Double = 0.25, quickSteps: Int = 2, quickSeconds: Double = 60,
                clock: @escaping @Sendable () -> Int64 = { Clock.monotonic() }) {
        self.clock = clock
        self.steps = steps
        self.jitter = jitter
        self.quickSteps = quickSteps
        self.quickSeconds = quickSeconds
    }

    /// The next delay in seconds.
    public mutating func next() -> Double {
        let base = steps[step]
        attempt += 1
        waited += base
        let now = clock()
        let started = since ?? now
        since = started
        // When this wait ends, measured both ways.
        let quickOver = waited >= quickSeconds && Double(now - started) / 1e9 + base >= quickSeconds
        if step + 1 < steps.count && (step + 1 < quickSteps || quickOver) { step += 1 }
        return jittered(base)
    }

    /// The delay `next()` would give now, without counting an attempt: for a second retry schedule
    /// that must not hurry the first one along its steps.
    public func upcoming() -> Double { jittered(steps[step]) }

    public mutating func reset() {
        attempt = 0
        step = 0
        waited = 0
        since = nil
    }

    private func jittered(_ base: Double) -> Double { base * Double.random(in: (1 - jitter)...(1 + jitter)) }
}
