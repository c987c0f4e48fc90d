import CSystemShim
import Glibc
import SinkiSupport

/// Runs a command to its end without blocking the caller's executor: `posix_spawn` into a process
/// group of its own, then a thread of its own waits on the process (a pidfd) and its output pipes.
///
/// A thread per run, not Dispatch's pool: a hung command must not hold a pool thread that other
/// work (another observer, a merge) is queued behind. Runs are few and bounded by their callers.
public enum CommandRunner {
    /// Without a pidfd (kernels before 5.3) the waiter looks at the process this often (ms).
    static let fallbackPoll: Int32 = 20

    /// Runs `spec` and returns how it ended. Never throws: a program that cannot be started is a
    /// result (`notStarted`) like any other failure.
    public static func run(_ spec: CommandSpec) async -> CommandResult {
        await withCheckedContinuation { continuation in
            DetachedThread.start {
                continuation.resume(returning: runBlocking(spec))
            }
        }
    }

    /// The whole run on the calling thread.
    static func runBlocking(_ spec: CommandSpec) -> CommandResult {
        let started = Clock.monotonic()
        func elapsed() -> Duration { .nanoseconds(Clock.monotonic() - started) }
        let process: SpawnedProcess
        do {
            process = try SpawnedProcess(spec)
        } catch {
            return CommandResult(termination: .notStarted(error.description), elapsed: elapsed())
        }
        var stdout = CapturedOutput(), stderr = CapturedOutput()
        let limit = max(spec.outputLimit, 0)
        let deadline = started + Int64(spec.timeout.components.seconds) * 1_000_000_000 + spec.timeout.components.attoseconds / 1_000_000_000
        var streams: [Int32] = [process.stdout.raw, process.stderr.raw]
        var buffer = [UInt8](repeating: 0, count: 64 << 10)

        /// Reads what a stream has now; false at end of file.
        func drain(_ fd: Int32) -> Bool {
            while true {
                let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if count > 0 {
                    buffer.withUnsafeBytes { raw in
                        let chunk = UnsafeRawBufferPointer(rebasing: raw[0..<count])
                        if fd == process.stdout.raw { stdout.append(chunk, limit: limit) } else { stderr.append(chunk, limit: limit) }
                    }
                    continue
                }
                if count == 0 { return false }
                let code = errno
                if code == EINTR { continue }
                return code == EAGAIN || code == EWOULDBLOCK
            }
        }

        var status: Int32?
        var timedOut = false
        while status == nil {
            let remaining = deadline - Clock.monotonic()
            if remaining <= 0 {
                // Kill the group first: the leader is not reaped yet, so its id cannot be reused.
                kill(-process.pid, SIGKILL)
                timedOut = true
                status = process.reap()
                break
            }
            var polled: [pollfd] = streams.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            if let pidfd = process.pidfd { polled.append(pollfd(fd: pidfd.raw, events: Int16(POLLIN), revents: 0)) }
            var wait = Int32(min(remaining / 1_000_000 + 1, Int64(Int32.max)))
            if process.pidfd == nil { wait = min(wait, fallbackPoll) }
            let ready = poll(&polled, nfds_t(polled.count), wait)
            if ready < 0 && errno != EINTR { break }
            for entry in polled.prefix(streams.count) where entry.revents != 0 {
                if !drain(entry.fd) { streams.removeAll { $0 == entry.fd } }
            }
            let exited = process.pidfd.map { _ in polled.last!.revents != 0 } ?? process.hasExited()
            if exited {
                for fd in streams { _ = drain(fd) }
                if spec.killGroupOnExit { kill(-process.pid, SIGKILL) }
                status = process.reap()
            }
        }
        stdout.finish(limit: limit)
        stderr.finish(limit: limit)
        let termination: CommandResult.Termination
        if timedOut {
            termination = .timedOut
        } else if let status, status >= 0 {
            // The wait status layout (<bits/waitstatus.h>): low 7 bits the signal, else the exit code above.
            termination = status & 0x7F == 0 ? .exited((status >> 8) & 0xFF) : .signaled(status & 0x7F)
        } else {
            termination = .unknown
        }
        return CommandResult(termination: termination, stdout: stdout, stderr: stderr, elapsed: elapsed())
    }
}

/// A started child: its id, the pidfd that says when it exits, and the read ends of its stdout and
/// stderr pipes. The descriptors close with the object; the child must be reaped with `reap()`.
final class SpawnedProcess {
    let pid: pid_t
    let pidfd: FileDescriptor?
    let stdout: FileDescriptor
    let stderr: FileDescriptor
    private var reaped = false
    private var kept: Int32?

    init(_ spec: CommandSpec) throws(SystemError) {
        let outPipe = try Self.pipe()
        let errPipe: (read: Int32, write: Int32)
        do { errPipe = try Self.pipe() } catch {
            close(outPipe.read)
            close(outPipe.write)
            throw error
        }
        defer {
            close(outPipe.write)
            close(errPipe.write)
        }
        stdout = FileDescriptor(raw: outPipe.read, path: "stdout of \(spec.executable)")
        stderr = FileDescriptor(raw: errPipe.read, path: "stderr of \(spec.executable)")
        for fd in [outPipe.read, errPipe.read] { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, outPipe.write, 1)
        posix_spawn_file_actions_adddup2(&actions, errPipe.write, 2)
        if let directory = spec.directory { sinki_spawn_addchdir(&actions, directory) }
        // Descriptors another thread opened without O_CLOEXEC must not leak into the child.
        sinki_spawn_addclosefrom(&actions, 3)

        let argv = CStringArray(spec.arguments)
        let envp = CStringArray(spec.environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" })
        var child = pid_t()
        // Its own process group, so a timeout kills what it started too.
        let status = SpawnAttributes.withFreshSignals(ownGroup: true) { attributes in
            posix_spawn(&child, spec.executable, &actions, attributes, argv.pointers, envp.pointers)
        }
        guard status == 0 else { throw SystemError("posix_spawn", errno: status, path: spec.executable) }
        pid = child
        let raw = spec.usePidfd ? sinki_pidfd_open(child) : -1
        pidfd = raw >= 0 ? FileDescriptor(raw: raw, path: "pidfd \(child)") : nil
    }

    deinit {
        // A child never left behind unreaped, whatever path led here.
        if !reaped {
            kill(-pid, SIGKILL)
            _ = reap()
        }
    }

    /// Whether the child has exited, for the path without a pidfd; if so it is reaped here and
    /// `reap` returns the status kept.
    func hasExited() -> Bool {
        var status: Int32 = 0
        guard waitpid(pid, &status, WNOHANG) == pid else { return false }
        reaped = true
        kept = status
        return true
    }

    /// Waits for the child and returns its wait status; nil when someone else reaped it.
    func reap() -> Int32? {
        if reaped { return kept }
        var status: Int32 = 0
        while true {
            let result = waitpid(pid, &status, 0)
            if result == pid { reaped = true; kept = status; return status }
            if result < 0 && errno == EINTR { continue }
            reaped = true
            return nil
        }
    }

    private static func pipe() throws(SystemError) -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        try syscall("pipe2") { sinki_pipe_cloexec(&fds) }
        return (fds[0], fds[1])
    }
}

/// NUL-terminated C strings and the NULL-terminated array of them that `execve` wants; freed with
/// the object.
private final class CStringArray {
    let pointers: [UnsafeMutablePointer<CChar>?]

    init(_ strings: [String]) {
        pointers = strings.map { strdup($0) } + [nil]
    }

    deinit {
        for pointer in pointers { free(pointer) }
    }
}

/// A thread of its own for one blocking job.
enum DetachedThread {
    private final class Job {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }

    static func start(_ body: @escaping @Sendable () -> Void) {
        let context = Unmanaged.passRetained(Job(body)).toOpaque()
        var thread = pthread_t()
        // A thread limit reached for a moment (EAGAIN) passes: run here, the job would hold the caller's
        // executor for as long as the command runs (a pool thread, and with commands that wait for each
        // other, all of them).
        for attempt in 0..<50 {
            let status = pthread_create(&thread, nil, { raw in
                // Taken back exactly once: the thread owns the job from here.
                let job = Unmanaged<Job>.fromOpaque(raw!).takeRetainedValue()
                job.body()
                return nil
            }, context)
            if status == 0 {
                pthread_detach(thread)
                return
            }
            if status != EAGAIN || attempt == 49 { break }
            usleep(20_000)
        }
        // No thread to be had: run it here rather than lose it.
        Unmanaged<Job>.fromOpaque(context).takeRetainedValue().body()
    }
}
