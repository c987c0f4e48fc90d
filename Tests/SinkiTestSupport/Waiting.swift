import Foundation

/// A condition a test waited for that did not come true before its deadline.
public struct WaitTimeout: Error, CustomStringConvertible {
    public var what: String
    public var seconds: Double
    public var description: String { "timed out after \(seconds) s waiting for \(what)" }
}

/// Polls `condition` every `interval` seconds until it holds or `timeout` passes; throws WaitTimeout.
/// Tests wait on conditions with a deadline, never on a bare sleep. The default deadline is long: a
/// passing test never waits it out, and a loaded CI machine runs every other suite beside it.
public func waitUntil(_ what: String, timeout: Double = 30, interval: Double = 0.02,
                      _ condition: () async throws -> Bool) async throws {
    let deadline = Date().addingTimeInterval(timeout)
    while true {
        if try await condition() { return }
        if Date() > deadline { throw WaitTimeout(what: what, seconds: timeout) }
        try await Task.sleep(nanoseconds: UInt64(interval * 1_000_000_000))
    }
}

/// Polls a synchronous condition (for code without async); throws WaitTimeout.
public func waitUntilSync(_ what: String, timeout: Double = 30, interval: Double = 0.02, _ condition: () throws -> Bool) throws {
    let deadline = Date().addingTimeInterval(timeout)
    while true {
        if try condition() { return }
        if Date() > deadline { throw WaitTimeout(what: what, seconds: timeout) }
        usleep(UInt32(interval * 1_000_000))
    }
}
