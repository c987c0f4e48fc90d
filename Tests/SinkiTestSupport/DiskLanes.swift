/// Keeps the tests that write gigabytes apart from the tests that time real agents to the second.
///
/// The kernel throttles every process that writes once the machine's dirty pages pass their limit
/// (balance_dirty_pages): while one test wrote a 1 GiB file three times over (sender, server, receiver),
/// every agent of another test stalled in its next SQLite write, its server silent and its retries
/// late, for up to 14 s (ServerRestartTests, under the whole suite). Timed tests share their lane; a
/// heavy writer waits for it to empty and holds the disk alone.
public actor DiskLanes {
    public static let shared = DiskLanes()

    private var timed = 0
    private var heavy = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    /// Runs `body` beside other timed tests, never beside a heavy writer.
    public func timed<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        while heavy { await wait() }
        timed += 1
        defer {
            timed -= 1
            wakeAll()
        }
        return try await body()
    }

    /// Runs `body` alone among the timed tests and other heavy writers.
    public func heavy<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        while heavy || timed > 0 { await wait() }
        heavy = true
        defer {
            heavy = false
            wakeAll()
        }
        return try await body()
    }

    private func wait() async {
        await withCheckedContinuation { waiting.append($0) }
    }

    private func wakeAll() {
        let all = waiting
        waiting.removeAll()
        for continuation in all { continuation.resume() }
    }
}
