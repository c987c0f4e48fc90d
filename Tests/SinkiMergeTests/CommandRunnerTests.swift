import Foundation
import Glibc
import Synchronization
import Testing
@testable import SinkiMerge
import SinkiTestSupport

/// Real processes through `CommandRunner`: exits, signals, output, time limits, environment.
struct CommandRunnerTests {
    let directory = TemporaryDirectory("sinki-runner")

    func sh(_ script: String, _ words: [String] = [], timeout: Duration = .seconds(30), limit: Int = 1 << 10,
            environment: [String: String] = ["PATH": "/usr/bin:/bin"], directory: String? = nil, killGroup: Bool = true,
            pidfd: Bool = true) -> CommandSpec {
        var spec = CommandSpec(executable: "/bin/sh", arguments: ["sh", "-c", script, "sh"] + words, environment: environment,
                               directory: directory, timeout: timeout, outputLimit: limit, killGroupOnExit: killGroup)
        spec.usePidfd = pidfd
        return spec
    }

    @Test(arguments: [true, false])
    func exitCodesAndOutput(pidfd: Bool) async {
        let result = await CommandRunner.run(sh("echo out; echo err >&2; exit 7", pidfd: pidfd))
        #expect(result.termination == .exited(7))
        #expect(result.stdout.text == "out\n")
        #expect(result.stderr.text == "err\n")
        #expect(result.summary.hasPrefix("exit 7 after "))
        #expect(result.summary.hasSuffix(": err"))
    }

    @Test func aSignalIsReported() async {
        let result = await CommandRunner.run(sh("kill -TERM $$"))
        #expect(result.termination == .signaled(SIGTERM))
    }

    @Test func signalsStartAtTheirDefaults() async {
        // The test process may ignore SIGPIPE; the child must not inherit that.
        let previous = signal(SIGPIPE, SIG_IGN)
        defer { signal(SIGPIPE, previous) }
        let result = await CommandRunner.run(sh("grep SigIgn /proc/self/status"))
        let mask = result.stdout.text.split(separator: "\t").last.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) } ?? ""
        let ignored = UInt64(mask, radix: 16) ?? .max
        #expect(ignored & (1 << (UInt64(SIGPIPE) - 1)) == 0, "SigIgn \(mask)")
    }

    @Test func outputKeepsOnlyItsBoundedTail() async {
        let result = await CommandRunner.run(sh("i=0; while [ $i -lt 5000 ]; do echo line$i; i=$((i+1)); done", limit: 100))
        #expect(result.termination == .exited(0))
        #expect(result.stdout.bytes.count == 100)
        #expect(result.stdout.truncated)
        #expect(result.stdout.total > 40_000)
        #expect(result.stdout.text.hasSuffix("line4999\n"))
    }

    @Test(arguments: [true, false])
    func aHungCommandIsKilledWithItsGroupAtTheTimeout(pidfd: Bool) async throws {
        let pids = directory.child("pids-\(pidfd)")
        // The timeout leaves a loaded machine time to start the shell and write the id (300 ms did not).
        let result = await CommandRunner.run(sh(#"sleep 300 & echo $! > "$1"; sleep 300"#, [pids], timeout: .seconds(2), pidfd: pidfd))
        #expect(result.termination == .timedOut)
        // The runner's own clock: the test's wait to be resumed on a busy pool is not the command's.
        #expect(result.elapsed < .seconds(20))
        let child = Int32((readFile(pids) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        #expect(child > 0)
        try await waitUntil("the background child to be killed", timeout: 10) { processIsGone(child) }
    }

    @Test func whatAMergeCommandLeftRunningIsKilledAtItsExit() async throws {
        let pids = directory.child("left")
        let result = await CommandRunner.run(sh(#"sleep 300 >/dev/null 2>&1 & echo $! > "$1""#, [pids], killGroup: true))
        #expect(result.termination == .exited(0))
        let child = Int32((readFile(pids) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        try await waitUntil("the leftover child to be killed", timeout: 10) { processIsGone(child) }
    }

    @Test func anObserverMayLeaveAProgramRunning() async throws {
        let pids = directory.child("daemon")
        let result = await CommandRunner.run(sh(#"sleep 300 >/dev/null 2>&1 & echo $! > "$1""#, [pids], killGroup: false))
        #expect(result.termination == .exited(0))
        let child = try #require(Int32((readFile(pids) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)))
        try #require(child > 0)
        #expect(!processIsGone(child))
        kill(child, SIGKILL)
    }

    @Test func environmentAndFolderAreTheSpecs() async {
        let folder = directory.clean("cwd")
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let result = await CommandRunner.run(sh(#"pwd; echo "$ONE|$HOME|$#|$1""#, ["two words"], environment: ["ONE": "1", "PATH": "/bin"], directory: folder))
        #expect(result.stdout.text == "\(folder)\n1||1|two words\n")
    }

    @Test func noShellInterpretsTheArguments() async {
        let spec = CommandSpec(executable: "/bin/echo", arguments: ["echo", "$HOME", "*", "a;b", "`x`"], environment: ["HOME": "/h"],
                               timeout: .seconds(30), killGroupOnExit: true)
        let result = await CommandRunner.run(spec)
        #expect(result.stdout.text == "$HOME * a;b `x`\n")
    }

    @Test func descriptorsOfTheAgentDoNotLeakIntoTheChild() async {
        let fd = open(directory.child("held"), O_WRONLY | O_CREAT, 0o600)  // no O_CLOEXEC on purpose
        defer { close(fd) }
        let result = await CommandRunner.run(sh("ls /proc/self/fd"))
        let open = result.stdout.text.split(separator: "\n").compactMap { Int32($0) }
        #expect(!open.contains(fd), "\(open)")
    }

    @Test func aProgramThatDoesNotExistIsNotStarted() async {
        let spec = CommandSpec(executable: directory.child("missing"), arguments: ["missing"], environment: [:], timeout: .seconds(5),
                               killGroupOnExit: true)
        let result = await CommandRunner.run(spec)
        guard case let .notStarted(why) = result.termination else {
            Issue.record("expected notStarted, got \(result.termination)")
            return
        }
        #expect(why.contains("No such file"))
    }

    @Test func manyRunsAtOnceEachGetAThread() async throws {
        // More waiting commands than cores: a quick one started after them still runs and ends
        // while they all wait.
        let release = directory.child("release"), running = directory.child("running")
        try FileManager.default.createDirectory(atPath: running, withIntermediateDirectories: true)
        let ended = Counter()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    let script = #"touch "$2/$$"; while [ ! -e "$1" ]; do sleep 0.02; done"#
                    _ = await CommandRunner.run(self.sh(script, [release, running], timeout: .seconds(300)))
                    ended.add()
                }
            }
            // A generous deadline: the tasks that start them run on Swift's cooperative pool (two threads
            // on a 2-core machine), which the full suite's other tests can hold for a minute or more.
            do {
                try await waitUntil("8 commands to run", timeout: 180) {
                    (try? FileManager.default.contentsOfDirectory(atPath: running).count) == 8
                }
            } catch {
                try? writeFile(release, "") // those that started end now, not at their time limit
                throw error
            }
            let quick = await CommandRunner.run(sh("exit 0"))
            #expect(quick.termination == .exited(0))
            #expect(ended.value == 0)
            try writeFile(release, "")
            try await group.waitForAll()
        }
        #expect(ended.value == 8)
    }
}

/// A count shared between tasks.
final class Counter: Sendable {
    private let count = Mutex(0)
    func add() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}
