import SinkiRecord

extension StatusReport {
    /// The document of docs/status.md.
    public var json: JSONValue {
        .object([
            ("schema", .int(Int64(Self.schemaVersion))),
            ("generatedAt", .time(generatedAt)),
            ("agent", agent.json),
            ("server", server.json),
            ("roots", .array(roots.map(\.json))),
            ("pending", pending.json),
            ("remote", remote.json),
            ("skipped", .object([("count", .int(Int64(skipped.count))), ("paths", .array(skipped.paths.map { .string($0) })),
                                 ("reasons", .array(skipped.reasons.map { .string($0) }))])),
            ("ignored", .object([("count", .int(Int64(ignored)))])),
            ("transfers", .array(transfers.map(\.json))),
            ("conflicts", .array(conflicts.map(\.json))),
            ("notApplied", notApplied.json),
            ("verify", verify.json),
            ("digest", digest.json),
            ("progress", progress.json),
        ])
    }

    public init(json: JSONValue) throws(ControlError) {
        let fields = JSONFields(json, what: "status")
        let schema = try fields.int("schema")
        guard schema == Int64(Self.schemaVersion) else {
            throw ControlError(.badResponse, "status schema \(schema) is not the \(Self.schemaVersion) this sinkid reads; is the agent another version?")
        }
        generatedAt = try fields.time("generatedAt")
        agent = try AgentSummary(try fields.object("agent"))
        server = try ServerSummary(try fields.object("server"))
        roots = []
        for item in try fields.array("roots") { roots.append(try RootStatus(JSONFields(item, what: "status.roots[]"))) }
        pending = try PendingSummary(try fields.object("pending"))
        let remote = try fields.object("remote")
        self.remote = RemoteSummary(upToDate: try remote.optionalBool("upToDate"), position: try remote.optionalString("position"))
        let skipped = try fields.object("skipped")
        var paths: [String] = []
        for item in try skipped.array("paths") {
            guard case let .string(path) = item else { throw skipped.fail("paths", "expected strings") }
            paths.append(path)
        }
        var reasons: [String] = []
        // Added after schema 1 was fixed: an older agent leaves it out.
        for item in skipped.has("reasons") ? try skipped.array("reasons") : [] {
            guard case let .string(reason) = item else { throw skipped.fail("reasons", "expected strings") }
            reasons.append(reason)
        }
        self.skipped = SkippedSummary(count: Int(try skipped.int("count")), paths: paths, reasons: reasons)
        ignored = Int(try fields.object("ignored").int("count"))
        transfers = []
        for item in try fields.array("transfers") { transfers.append(try TransferStatus(JSONFields(item, what: "status.transfers[]"))) }
        conflicts = []
        for item in try fields.array("conflicts") { conflicts.append(try ConflictEntry(JSONFields(item, what: "status.conflicts[]"))) }
        // Members added after schema 1 was fixed: an older agent leaves them out.
        notApplied = fields.has("notApplied") ? try NotAppliedSummary(try fields.object("notApplied")) : NotAppliedSummary()
        verify = fields.has("verify") ? try VerifySummary(try fields.object("verify")) : VerifySummary()
        digest = fields.has("digest") ? try DigestSummary(try fields.object("digest")) : DigestSummary()
        progress = fields.has("progress") ? try ProgressSummary(try fields.object("progress")) : ProgressSummary()
    }
}

extension SyncState {
    init(_ fields: JSONFields, _ key: String) throws(ControlError) {
        let text = try fields.string(key)
        guard let state = SyncState(rawValue: text) else { throw fields.fail(key, "unknown state \(quoted(text))") }
        self = state
    }
}

extension AgentSummary {
    var json: JSONValue {
        .object([("running", .bool(running)), ("pid", .optional(pid.map(Int64.init))), ("version", .optional(version)),
                 ("device", .optional(device)), ("startedAt", .time(startedAt)), ("stateDirectory", .string(stateDirectory)),
                 ("state", .string(state.rawValue)), ("reason", .optional(reason))])
    }

    init(_ fields: JSONFields) throws(ControlError) {
        self.init(running: try fields.bool("running"), pid: try fields.optionalInt("pid").map { Int32(truncatingIfNeeded: $0) },
                  version: try fields.optionalString("version"), device: try fields.optionalString("device"),
                  startedAt: try fields.optionalTime("startedAt"), stateDirectory: try fields.string("stateDirectory"),
                  state: try SyncState(fields, "state"), reason: try fields.optionalString("reason"))
    }
}

extension ServerSummary {
    var json: JSONValue {
        let problem: JSONValue = lastError.map {
            .object([("at", .time($0.at)), ("level", .string($0.level)), ("message", .string($0.message)), ("count", .int(Int64($0.count)))])
        } ?? .null
        return .object([("url", .optional(url)), ("embedded", .optional(embedded)), ("reachable", .optional(reachable)),
                        ("lastContact", .time(lastContact)), ("lastError", problem), ("tokenRefused", .optional(tokenRefused)),
                        ("retryAt", .time(retryAt)), ("storageFull", storageFull?.json ?? .null)])
    }

    init(_ fields: JSONFields) throws(ControlError) {
        var problem: ProblemNote?
        if fields.has("lastError") {
            let note = try fields.object("lastError")
            problem = ProblemNote(at: try note.time("at"), level: try note.string("level"), message: try note.string("message"),
                                  count: note.has("count") ? Int(try note.int("count")) : 1)
        }
        self.init(url: try fields.optionalString("url"), embedded: try fields.optionalBool("embedded"),
                  reachable: try fields.optionalBool("reachable"), lastContact: try fields.optionalTime("lastContact"), lastError: problem,
                  tokenRefused: try fields.optionalString("tokenRefused"), retryAt: try fields.optionalTime("retryAt"),
                  storageFull: fields.has("storageFull") ? try StorageFullNote(try fields.object("storageFull")) : nil)
    }
}

extension StorageFullNote {
    var json: JSONValue {
        .object([("detail", .string(detail)), ("liveBytes", .optional(figures?.liveBytes)), ("historyBytes", .optional(figures?.historyBytes)),
                 ("quotaBytes", .optional(figures?.quotaBytes)), ("neededBytes", .optional(figures?.neededBytes)),
                 ("since", .time(since)), ("retryAt", .time(retryAt))])
    }

    init(_ fields: JSONFields) throws(ControlError) {
        var figures: StorageFigures?
        if let live = try fields.optionalInt("liveBytes"), let history = try fields.optionalInt("historyBytes") {
            figures = StorageFigures(liveBytes: live, historyBytes: history, quotaBytes: try fields.optionalInt("quotaBytes"),
                                     neededBytes: try fields.optionalInt("neededBytes"))
        }
        self.init(detail: try fields.string("detail"), figures: figures, since: try fields.time("since"), retryAt: try fields.time("retryAt"))
    }
}

extension RootStatus {
    var json: JSONValue {
        .object([("name", .string(name)), ("path", .optional(path)), ("files", .int(Int64(files))), ("bytes", .int(bytes)),
                 ("state", .string(state.rawValue)), ("reason", .optional(reason))])
    }

    init(_ fields: JSONFields) throws(ControlError) {
        self.init(name: try fields.string("name"), path: try fields.optionalString("path"), files: Int(try fields.int("files")),
                  bytes: try fields.int("bytes"), state: try SyncState(fields, "state"), reason: try fields.optionalString("reason"))
    }
}

extension PendingSummary {
    var json: JSONValue {
        .object([("count", .int(Int64(count))), ("refused", .int(Int64(refused))), ("changes", .array(changes.map(\.json)))])
    }

    init(_ fields: JSONFields) throws(ControlError) {
        var changes: [PendingChange] = []
        for item in try fields.array("changes") {
            let change = JSONFields(item, what: "status.pending.changes[]")
            let kindText = try change.string("kind")
            guard let kind = ChangeKind(rawValue: kindText) else { throw change.fail("kind", "unknown kind \(quoted(kindText))") }
            changes.append(PendingChange(path: try change.string("path"), kind: kind, queuedAt: try change.time("queuedAt"),
                                         attempts: Int(try change.int("attempts")), refused: try change.optionalString("refused")))
        }
        self.init(count: Int(try fields.int("count")), refused: Int(try fields.int("refused")), changes: changes)
    }
}

extension PendingChange {
    var json: JSONValue {
        .object([("path", .string(path)), ("kind", .string(kind.rawValue)), ("queuedAt", .time(queuedAt)),
                 ("attempts", .int(Int64(attempts))), ("refused", .optional(refused))])
    }
}

extension RemoteSummary {
    var json: JSONValue { .object([("upToDate", .optional(upToDate)), ("position", .optional(position))]) }
}

extension TransferStatus {
    var json: JSONValue {
        .object([("path", .string(path)), ("direction", .string(direction.rawValue)), ("done", .int(done)), ("total", .int(total)),
                 ("rate", .double(rate)), ("eta", secondsLeft.map { .double(($0 * 10).rounded() / 10) } ?? .null),
                 ("failed", .optional(failed)), ("new", newBytes.map { .int($0) } ?? .null)])
    }

    init(_ fields: JSONFields) throws(ControlError) {
        let text = try fields.string("direction")
        guard let direction = Direction(rawValue: text) else { throw fields.fail("direction", "unknown direction \(quoted(text))") }
        self.init(path: try fields.string("path"), direction: direction, done: try fields.int("done"), total: try fields.int("total"),
                  rate: try fields.double("rate"), failed: try fields.optionalString("failed"), newBytes: try fields.optionalInt("new"))
    }
}

extension ConflictEntry {
    /// As `conflicts` and status list it.
    public var json: JSONValue {
        .object([("path", .string(path)), ("remoteDevice", .string(remoteDevice)), ("detectedAt", .time(detectedAt)),
                 ("local", local.json), ("remote", remote.json), ("foundBy", .string(foundBy)), ("shared", .bool(shared))])
    }

    init(_ fields: JSONFields) throws(ControlError) {
        let local = try ConflictVersion(fields.object("local"))
        // Members added later: an older agent leaves them out.
        self.init(path: try fields.string("path"), remoteDevice: try fields.string("remoteDevice"), detectedAt: try fields.time("detectedAt"),
                  local: local, remote: try ConflictVersion(fields.object("remote")),
                  foundBy: fields.has("foundBy") ? try fields.string("foundBy") : local.device,
                  shared: fields.has("shared") ? try fields.bool("shared") : false)
    }

    /// Reads the result of `conflicts`: `{"conflicts": […]}`.
    public static func list(json: JSONValue) throws(ControlError) -> [ConflictEntry] {
        var out: [ConflictEntry] = []
        for item in try JSONFields(json, what: "result").array("conflicts") { out.append(try ConflictEntry(JSONFields(item, what: "conflict"))) }
        return out
    }
}

extension ConflictVersion {
    public var json: JSONValue {
        .object([("device", .string(device)), ("deleted", .bool(deleted)), ("size", .int(size)), ("sha256", .string(sha256)),
                 ("modifiedAt", .time(modifiedAt)), ("copy", .optional(copy))])
    }

    init(_ fields: JSONFields) throws(ControlError) {
        self.init(device: try fields.string("device"), deleted: try fields.bool("deleted"), size: try fields.int("size"),
                  sha256: try fields.string("sha256"), modifiedAt: try fields.time("modifiedAt"), copy: try fields.optionalString("copy"))
    }
}

extension NotAppliedSummary {
    var json: JSONValue {
        .object([("count", .int(Int64(count))), ("changes", .array(changes.map { change in
            .object([("path", .string(change.path)), ("cause", .string(change.cause)), ("reason", .string(change.reason)),
                     ("attempts", .int(Int64(change.attempts))), ("since", .time(change.since)), ("nextAttempt", .time(change.nextAttempt))])
        }))])
    }

    init(_ fields: JSONFields) throws(ControlError) {
        var changes: [NotAppliedChange] = []
        for item in try fields.array("changes") {
            let change = JSONFields(item, what: "status.notApplied.changes[]")
            changes.append(NotAppliedChange(path: try change.string("path"), cause: try change.string("cause"), reason: try change.string("reason"),
                                            attempts: Int(try change.int("attempts")), since: try change.time("since"),
                                            nextAttempt: try change.optionalTime("nextAttempt")))
        }
        self.init(count: Int(try fields.int("count")), changes: changes)
    }
}

extension VerifySummary {
    var json: JSONValue {
        .object([("lastRun", .time(lastRun)), ("result", .optional(result)), ("repaired", .int(Int64(repaired))),
                 ("differing", .array(differing.map { .string($0) })), ("detail", .optional(detail)), ("running", .bool(running)),
                 ("nextRun", .time(nextRun))])
    }

    init(_ fields: JSONFields) throws(ControlError) {
        var differing: [String] = []
        for item in try fields.array("differing") {
            guard case let .string(path) = item else { throw fields.fail("differing", "expected strings") }
            differing.append(path)
        }
        self.init(lastRun: try fields.optionalTime("lastRun"), result: try fields.optionalString("result"),
                  repaired: Int(try fields.int("repaired")), differing: differing, detail: try fields.optionalString("detail"),
                  running: try fields.bool("running"), nextRun: try fields.optionalTime("nextRun"))
    }
}

extension DigestSummary {
    var json: JSONValue {
        .object([("matched", .bool(matched)), ("lastMatch", .time(lastMatch)), ("repaired", .int(Int64(repaired))),
                 ("lastRepairAt", .time(lastRepairAt)), ("failure", .optional(failure)), ("unsupported", .bool(unsupported))])
    }

    init(_ fields: JSONFields) throws(ControlError) {
        self.init(matched: try fields.bool("matched"), lastMatch: try fields.optionalTime("lastMatch"), repaired: Int(try fields.int("repaired")),
                  lastRepairAt: try fields.optionalTime("lastRepairAt"), failure: try fields.optionalString("failure"),
                  unsupported: try fields.bool("unsupported"))
    }
}
