import Glibc
import SinkiConfig
import SinkiLoop
import SinkiRecord
import SinkiSupport

/// Decides a conflict by the path's merge rule (issue 5, `docs/merge-rules.md`).
///
/// The engine only decides: it never touches the synced folder. Reading inputs, merging text and
/// JSON run on Dispatch's pool (`Blocking`), commands on threads of their own (`CommandRunner`), so
/// awaiting `resolve` from the event loop never blocks it.
public struct MergeEngine: Sendable {
    /// `[merge] timeout`: how long a `compare` or `command` command may run.
    public var timeout: Duration
    /// Where command workspaces are made (`STATE/merge`); `removeLeftovers()` empties it at start.
    public var workDirectory: String
    /// The environment commands run with (`SINKI_PATH` is added per run).
    public var environment: [String: String]
    /// Larger inputs are not merged as text or JSON in memory: the fallback decides.
    public var textLimit: Int64 = 64 << 20
    /// Bytes of a command's stdout and stderr kept for the log.
    public var outputLimit = 64 << 10
    private let logger: Logger

    public init(settings: MergeSettings = MergeSettings(), workDirectory: String, environment: [String: String], logger: Logger) {
        timeout = settings.timeout
        self.workDirectory = workDirectory
        self.environment = environment
        self.logger = logger
    }

    /// Removes command workspaces a crash left behind. Blocking: call it off the loop, at start.
    public func removeLeftovers() throws(SystemError) {
        try MergeWorkspace.removeLeftovers(in: workDirectory)
    }

    /// The outcome for `path`, changed here (`local`) and on another device (`remote`) since they
    /// shared `base` (nil when that version is not known). Never fails: whatever stops a rule
    /// (a missing base, a failing command, text that does not merge) hands the decision to the
    /// policy's fallback, which always decides.
    public func resolve(path: RecordPath, policy: MergePolicy, local: MergeVersion, remote: MergeVersion,
                        base: [UInt8]?) async -> MergeOutcome {
        let rule = policy.rule
        if local.deleted && remote.deleted {
            return MergeOutcome(resolution: .takeRemote(keepLocalCopy: false), decidedBy: rule, summary: "deleted on both sides")
        }
        if local.deleted {
            return MergeOutcome(resolution: .takeRemote(keepLocalCopy: false), decidedBy: rule,
                                summary: "deleted here but edited on \(remote.device): the edit is kept")
        }
        if remote.deleted {
            return MergeOutcome(resolution: .keepLocal(keepRemoteCopy: false), decidedBy: rule,
                                summary: "deleted on \(remote.device) but edited here: the edit is kept")
        }
        if !local.sha256.isEmpty, local.sha256 == remote.sha256, local.size == remote.size {
            return MergeOutcome(resolution: .takeRemote(keepLocalCopy: false), decidedBy: rule, summary: "both sides hold the same content")
        }
        let attempt: Attempt
        switch rule {
        case .keepBoth, .newest, .local, .remote, .larger, .ask:
            return decide(rule, policy: policy, local: local, remote: remote)
        case .union, .json, .command:
            guard let base else {
                attempt = .failed("the last shared version is not known (never synced, or dropped from the base cache)")
                break
            }
            if let trivial = trivialOutcome(rule, base: base, local: local, remote: remote) { return trivial }
            attempt = rule == .command ? await runMerge(path: path, policy: policy, local: local, remote: remote, base: base)
                                       : await mergeInMemory(rule, local: local, remote: remote, base: base)
        case .compare:
            attempt = await runCompare(path: path, policy: policy, local: local, remote: remote, base: base)
        }
        switch attempt.result {
        case let .decided(resolution, summary):
            return MergeOutcome(resolution: resolution, decidedBy: rule, command: attempt.command, summary: "\(rule.rawValue): \(summary)")
        case let .failed(reason):
            var outcome = decide(fallbackRule(policy), policy: policy, local: local, remote: remote)
            outcome.fallbackReason = reason
            outcome.command = attempt.command
            outcome.summary = "\(rule.rawValue) failed (\(reason)); fallback " + outcome.summary
            logger.warning("\(quoted(path.string)): \(outcome.summary)")
            return outcome
        }
    }

    /// What a rule that can fail came to, and the command it ran if any.
    private struct Attempt {
        enum Result {
            case decided(MergeResolution, String)
            case failed(String)
        }

        var result: Result
        var command: CommandResult?

        static func failed(_ reason: String, command: CommandResult? = nil) -> Attempt {
            Attempt(result: .failed(reason), command: command)
        }

        static func decided(_ resolution: MergeResolution, _ summary: String, command: CommandResult? = nil) -> Attempt {
            Attempt(result: .decided(resolution, summary), command: command)
        }
    }

    /// The fallback, which the config guarantees cannot fail; keep-both if code built a policy that can.
    private func fallbackRule(_ policy: MergePolicy) -> MergeRule {
        policy.fallback.canFail ? .keepBoth : policy.fallback
    }

    /// The rules that always decide, from the two versions' facts alone.
    private func decide(_ rule: MergeRule, policy: MergePolicy, local: MergeVersion, remote: MergeVersion) -> MergeOutcome {
        let keepLoser = policy.keepsLoser(after: rule)
        let copy = keepLoser ? ", the other kept as a conflict copy" : ", the other dropped"
        func pick(_ localWins: Bool, _ why: String) -> MergeOutcome {
            localWins
                ? MergeOutcome(resolution: .keepLocal(keepRemoteCopy: keepLoser), decidedBy: rule, summary: "\(rule.rawValue): the local version \(why)\(copy)")
                : MergeOutcome(resolution: .takeRemote(keepLocalCopy: keepLoser), decidedBy: rule,
                               summary: "\(rule.rawValue): the version from \(remote.device) \(why)\(copy)")
        }
        switch rule {
        case .keepBoth, .union, .json, .compare, .command:
            return MergeOutcome(resolution: .takeRemote(keepLocalCopy: true), decidedBy: .keepBoth,
                                summary: "keep-both: the version from \(remote.device) takes the path, the local one kept as a conflict copy")
        case .ask:
            return MergeOutcome(resolution: .ask, decidedBy: .ask, summary: "ask: both versions kept aside for sinkid resolve")
        case .local:
            return pick(true, "stays")
        case .remote:
            return pick(false, "takes the path")
        case .newest:
            return pick(Preference.localWins(.newest, local: local, remote: remote), "is the newer")
        case .larger:
            return pick(Preference.localWins(.larger, local: local, remote: remote), "is the larger")
        }
    }

    /// A three-way rule where only one side differs from the base needs no merge.
    private func trivialOutcome(_ rule: MergeRule, base: [UInt8], local: MergeVersion, remote: MergeVersion) -> MergeOutcome? {
        let baseHash = ContentID.of(base), baseSize = Int64(base.count)
        if local.sha256 == baseHash, local.size == baseSize {
            return MergeOutcome(resolution: .takeRemote(keepLocalCopy: false), decidedBy: rule,
                                summary: "\(rule.rawValue): only \(remote.device) changed it since the last shared version")
        }
        if remote.sha256 == baseHash, remote.size == baseSize {
            return MergeOutcome(resolution: .keepLocal(keepRemoteCopy: false), decidedBy: rule,
                                summary: "\(rule.rawValue): only this device changed it since the last shared version")
        }
        return nil
    }

    /// `union` and `json`, off the caller's executor.
    private func mergeInMemory(_ rule: MergeRule, local: MergeVersion, remote: MergeVersion, base: [UInt8]) async -> Attempt {
        let limit = textLimit
        if local.size > limit || remote.size > limit || Int64(base.count) > limit {
            return .failed("a version is larger than \(limit) bytes, too large to merge in memory")
        }
        let work: @Sendable () throws -> Attempt = {
            let localBytes: [UInt8], remoteBytes: [UInt8]
            do {
                localBytes = try local.read()
                remoteBytes = try remote.read()
            } catch {
                return .failed("\(error)")
            }
            let merged: [UInt8]
            do {
                merged = rule == .union ? try UnionMerge.merge(base: base, local: localBytes, remote: remoteBytes)
                                        : try JSONMerge.merge(base: base, local: localBytes, remote: remoteBytes)
            } catch {
                return .failed("\(error)")
            }
            return Self.settle(merged, local: localBytes, remote: remoteBytes)
        }
        do { return try await Blocking.run(work) } catch { return .failed("\(error)") }
    }

    /// A merged result equal to one side is reported as that side, so that the agent writes and
    /// pushes only what is new.
    private static func settle(_ merged: [UInt8], local: [UInt8], remote: [UInt8], command: CommandResult? = nil) -> Attempt {
        if merged == remote { return .decided(.takeRemote(keepLocalCopy: false), "the merge equals the remote version", command: command) }
        if merged == local { return .decided(.keepLocal(keepRemoteCopy: false), "the merge equals the local version", command: command) }
        return .decided(.merged(merged), "merged (\(merged.count) bytes)", command: command)
    }

    /// `compare`: `command %local %remote`; exit 0 keeps local, 1 keeps remote.
    private func runCompare(path: RecordPath, policy: MergePolicy, local: MergeVersion, remote: MergeVersion, base: [UInt8]?) async -> Attempt {
        guard let template = policy.command else { return .failed("the rule has no command") }
        let staged: Staged
        do { staged = try await stage(path: path, local: local, remote: remote, base: base) } catch { return .failed("\(error)") }
        let result = await run(template, staged, path: path)
        let keepLoser = policy.keepsLoser(after: .compare)
        let copy = keepLoser ? ", the other kept as a conflict copy" : ""
        switch result.termination {
        case .exited(0): return .decided(.keepLocal(keepRemoteCopy: keepLoser), "the command chose the local version\(copy)", command: result)
        case .exited(1): return .decided(.takeRemote(keepLocalCopy: keepLoser), "the command chose the remote version\(copy)", command: result)
        default: return .failed("\(template.argv[0]) \(result.summary)", command: result)
        }
    }

    /// `command`: `command %base %local %remote %out`; exit 0 with `%out` written is the result.
    private func runMerge(path: RecordPath, policy: MergePolicy, local: MergeVersion, remote: MergeVersion, base: [UInt8]) async -> Attempt {
        guard let template = policy.command else { return .failed("the rule has no command") }
        let staged: Staged
        do { staged = try await stage(path: path, local: local, remote: remote, base: base) } catch { return .failed("\(error)") }
        let result = await run(template, staged, path: path)
        guard result.exitCode == 0 else { return .failed("\(template.argv[0]) \(result.summary)", command: result) }
        let work: @Sendable () throws -> Attempt = {
            let out: FileDescriptor
            do {
                out = try FileDescriptor.open(staged.out, flags: O_RDONLY | O_NOFOLLOW)
            } catch let error as SystemError where error.errno == ENOENT {
                return .failed("\(template.argv[0]) exited 0 but wrote nothing to %out", command: result)
            }
            guard try out.stat().kind == .file else { return .failed("%out is not a regular file", command: result) }
            let merged = try out.readAll()
            let localBytes = try FileDescriptor.open(staged.local, flags: O_RDONLY).readAll()
            let remoteBytes = try FileDescriptor.open(staged.remote, flags: O_RDONLY).readAll()
            return Self.settle(merged, local: localBytes, remote: remoteBytes, command: result)
        }
        do { return try await Blocking.run(work) } catch { return .failed("cannot read %out: \(error)", command: result) }
    }

    /// The inputs copied into a fresh workspace; `out` is where a merge command writes (not created).
    private struct Staged: Sendable {
        // The workspace is removed when the last copy of this goes.
        let workspace: MergeWorkspace
        let local: String
        let remote: String
        let base: String?
        let out: String
    }

    private func stage(path: RecordPath, local: MergeVersion, remote: MergeVersion, base: [UInt8]?) async throws -> Staged {
        let directory = workDirectory
        let ext = Self.fileExtension(path.name)
        return try await Blocking.run {
            let workspace = try MergeWorkspace(in: directory)
            func place(_ version: MergeVersion, _ name: String) throws -> String {
                switch version.content {
                case let .bytes(bytes): return try workspace.write(name, bytes)
                case let .file(source): return try workspace.copy(source, as: name)
                case .none: throw MergeInputError(message: "no content was given for the \(name.prefix { $0 != "." }) version")
                }
            }
            let localPath = try place(local, "local" + ext)
            let remotePath = try place(remote, "remote" + ext)
            let basePath = try base.map { try workspace.write("base" + ext, $0) }
            return Staged(workspace: workspace, local: localPath, remote: remotePath, base: basePath,
                          out: workspace.path + "/merged" + ext)
        }
    }

    private func run(_ template: CommandTemplate, _ staged: Staged, path: RecordPath) async -> CommandResult {
        var values: [Placeholder: String] = [.local: staged.local, .remote: staged.remote, .out: staged.out, .path: path.string]
        if let base = staged.base { values[.base] = base }
        var environment = self.environment
        environment["SINKI_PATH"] = path.string
        let spec = CommandSpec(template, substituting: values, environment: environment, directory: staged.workspace.path,
                               timeout: timeout, outputLimit: outputLimit, killGroupOnExit: true)
        let result = await CommandRunner.run(spec)
        if !result.stderr.bytes.isEmpty || !result.stdout.bytes.isEmpty {
            logger.debug("\(template.argv[0]) for \(quoted(path.string)): \(result.summary); stdout: \(quoted(result.stdout.text)); stderr: \(quoted(result.stderr.text))")
        }
        return result
    }

    /// The name's extension with its dot (`.save`), so that tools that look at names see the type;
    /// empty for a name without one or a dot file (`.bashrc`).
    static func fileExtension(_ name: String) -> String {
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return "" }
        let ext = name[dot...]
        return ext.count <= 16 ? String(ext) : ""
    }
}

/// Which side a picking rule prefers. The order is total and the same on every device, so whichever
/// device decides, the same version wins.
enum Preference {
    /// `newest`: later `modifiedAt`, then larger, then device name, then hash. `larger`: larger,
    /// then later, then device name, then hash.
    static func localWins(_ rule: MergeRule, local: MergeVersion, remote: MergeVersion) -> Bool {
        func key(_ version: MergeVersion) -> (Int64, Int64, [UInt8], [UInt8]) {
            rule == .larger ? (version.size, version.modifiedAt, Array(version.device.utf8), Array(version.sha256.utf8))
                            : (version.modifiedAt, version.size, Array(version.device.utf8), Array(version.sha256.utf8))
        }
        let l = key(local), r = key(remote)
        if l.0 != r.0 { return l.0 > r.0 }
        if l.1 != r.1 { return l.1 > r.1 }
        if l.2 != r.2 { return r.2.lexicographicallyPrecedes(l.2) }
        return r.3.lexicographicallyPrecedes(l.3)
    }
}
