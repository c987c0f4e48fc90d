import SinkiControl
import SinkiSupport

/// `sinkid status` for people: sections in a fixed order, colour and progress bars only on a
/// terminal, one fact per line otherwise (so that scripts can grep it).
struct StatusRenderer {
    let colour: Bool
    var barWidth = 24
    /// The terminal's columns: longer lines are folded between words, the rest indented under their
    /// start (a terminal folds them mid-word). nil: one line per fact, however long (for scripts).
    var width: Int?

    func render(_ report: StatusReport) -> String {
        let now = report.generatedAt
        var out: [String] = []
        let agent = report.agent
        if agent.running {
            var head = "agent: " + paint(agent.state)
            var facts: [String] = []
            if let device = agent.device { facts.append("device \(device)") }
            if let pid = agent.pid { facts.append("pid \(pid)") }
            if let version = agent.version { facts.append("sinkid \(version)") }
            if let started = agent.startedAt { facts.append("up \(Format.duration(Double(now - started) / 1e9))") }
            if !facts.isEmpty { head += " (" + facts.joined(separator: ", ") + ")" }
            out.append(head)
        } else {
            out.append("agent: " + paint(.notRunning) + " (state folder \(agent.stateDirectory))")
        }
        if let reason = agent.reason { out.append("  " + reason) }

        let server = report.server
        var serverLine = "server: " + (server.url ?? (server.embedded == true ? "embedded" : "unknown"))
        if server.embedded == true && server.url != nil { serverLine += " (embedded)" }
        switch server.reachable {
        case true?: serverLine += ", " + tint("reachable", .green)
        case false?: serverLine += ", " + tint("unreachable", .red)
        case nil: break
        }
        if server.tokenRefused != nil { serverLine += ", " + tint("token refused", .red) }
        if server.storageFull != nil { serverLine += ", " + tint("storage full", .red) }
        out.append(serverLine)
        if let refused = server.tokenRefused { out.append("  token refused: \(refused); nothing is sent until the token file changes") }
        if let retryAt = server.retryAt, retryAt > now { out.append("  asked to slow down (429): next request in \(Format.duration(Double(retryAt - now) / 1e9))") }
        if let full = server.storageFull {
            out.append("  server storage full (507) since \(Format.ago(full.since, now: now)): \(full.words); local changes are kept, "
                       + (full.retryAt > now ? "sent again in \(Format.duration(Double(full.retryAt - now) / 1e9))" : "sent again now"))
        }
        if let contact = server.lastContact { out.append("  last contact: \(Format.ago(contact, now: now))") } else if agent.running {
            out.append("  last contact: none yet")
        }
        // The last problem logged, unless the state's reason says it already (an outage is one problem,
        // said once).
        if let problem = server.lastError, !Self.sameProblem(problem.message, agent.reason) {
            let times = problem.count > 1 ? ", \(problem.count) times" : ""
            out.append("  last problem (\(Format.ago(problem.at, now: now))\(times)): "
                + tint("\(problem.level): \(problem.message)", problem.level == "error" ? .red : .yellow))
        }

        out.append("roots:")
        if report.roots.isEmpty { out.append("  none") }
        for root in report.roots {
            var line = "  \(root.name)  \(root.path ?? "(folder unknown)")  \(Format.plural(root.files, "file")), \(Format.bytes(root.bytes))"
            if agent.running { line += "  " + paint(root.state) }
            // A root that is where it is for the agent's reason does not say it again.
            if let reason = root.reason, reason != agent.reason || !agent.running { line += ": \(reason)" }
            out.append(line)
        }

        let pending = report.pending
        var pendingHead = "pending local changes: \(pending.count)"
        if pending.refused > 0 { pendingHead += " (" + tint("\(pending.refused) refused by the server", .red) + "; sinkid retry sends them again)" }
        out.append(pendingHead)
        for change in pending.changes {
            var line = "  \(change.kind.rawValue.padding(6))  \(change.path)  \(Format.ago(change.queuedAt, now: now))"
            if let refused = change.refused { line += "  " + tint("refused: \(refused)", .red) + " (\(Format.plural(change.attempts, "attempt")))" }
            out.append(line)
        }
        if pending.count > pending.changes.count { out.append("  … and \(pending.count - pending.changes.count) more") }

        let remote = report.remote
        let notApplied = report.notApplied
        if notApplied.count > 0 {
            let urgent = notApplied.changes.contains(where: \.needsAttention)
            out.append("remote changes: " + tint("\(notApplied.count) not applied", urgent ? .red : .yellow)
                + " (retried when the cause is gone; sinkid retry tries them now)")
        } else {
            switch remote.upToDate {
            case true?: out.append("remote changes: all applied")
            case false?: out.append("remote changes: " + tint(agent.state == .paused ? "not applied while paused" : "being read from the server", .yellow))
            case nil: out.append("remote changes: not known (the agent reads them when it runs)")
            }
        }
        for change in notApplied.changes {
            out.append("  not applied  \(change.path)  \(change.cause): \(change.reason) (\(Format.plural(change.attempts, "attempt")), since \(Format.ago(change.since, now: now)))")
        }
        if notApplied.count > notApplied.changes.count { out.append("  … and \(notApplied.count - notApplied.changes.count) more") }
        if let position = remote.position { out.append("  feed position: \(position)") }
        let verify = report.verify
        var verifyLine = "last full comparison: "
        if let last = verify.lastRun {
            verifyLine += Format.ago(last, now: now) + ", "
            switch verify.result {
            case "same": verifyLine += tint("the same as the server", .green)
            case "repaired": verifyLine += tint("\(verify.repaired) difference(s) repaired", .yellow)
            case "differing": verifyLine += tint("\(verify.differing.count) path(s) still differ", .red)
            default: verifyLine += tint(verify.detail ?? verify.result ?? "unknown", .red)
            }
        } else {
            verifyLine += "none yet"
        }
        if verify.running { verifyLine += " (one runs now)" }
        out.append(verifyLine)
        for path in verify.differing.prefix(20) { out.append("  differs  \(path)") }
        if agent.running { out.append(render(report.digest, now: now)) }

        out.append("skipped: \(report.skipped.count)")
        for (index, path) in report.skipped.paths.enumerated() {
            out.append("  \(path)" + (index < report.skipped.reasons.count ? ": \(report.skipped.reasons[index])" : ""))
        }
        if report.skipped.count > report.skipped.paths.count { out.append("  … and \(report.skipped.count - report.skipped.paths.count) more") }
        out.append("ignored: \(report.ignored)")

        out.append("transfers: " + (report.transfers.isEmpty ? "none" : "\(report.transfers.count)"))
        for transfer in report.transfers { out.append("  " + render(transfer)) }

        out.append("conflicts: " + (report.conflicts.isEmpty ? "none" : "\(report.conflicts.count) (sinkid resolve PATH --keep local|remote|both)"))
        for conflict in report.conflicts { out += Format.conflict(conflict, now: now).map { "  " + $0 } }
        guard let width else { return out.joined(separator: "\n") }
        return out.flatMap { Self.fold($0, width: width) }.joined(separator: "\n")
    }

    /// Whether a logged problem (`component: words`) is the problem `reason` states: the same words up
    /// to the first `;` (what follows says how it goes on: retrying, a count).
    static func sameProblem(_ logged: String, _ reason: String?) -> Bool {
        guard let reason else { return false }
        func head(_ text: Substring) -> Substring { text.prefix { $0 != ";" } }
        var words = Substring(logged)
        if let colon = words.firstIndex(of: ":"), !words[..<colon].contains(" ") { words = words[words.index(after: colon)...].drop { $0 == " " } }
        return head(words) == head(Substring(reason))
    }

    /// `line` in pieces of at most `width` columns, broken at spaces; the pieces after the first are
    /// indented four columns past the line's own indent. A word longer than a line is cut.
    static func fold(_ line: String, width: Int) -> [String] {
        // The last column stays empty: a terminal that is written to there may wrap on its own.
        let width = width - 1
        guard width > 20, Format.columns(line) > width else { return [line] }
        let lead = line.prefix { $0 == " " }
        let indent = String(repeating: " ", count: lead.count + 4)
        var pieces: [String] = []
        var current = String(lead)
        for word in line.dropFirst(lead.count).split(separator: " ", omittingEmptySubsequences: false) {
            let candidate = current.count == lead.count ? current + word : current + " " + word
            if Format.columns(candidate) <= width || current.trimmingCharacters(in: .whitespaces).isEmpty {
                current = candidate
                continue
            }
            pieces.append(current)
            current = indent + word
        }
        pieces.append(current)
        // A word that alone is wider than a line is cut where the line ends.
        return pieces.flatMap { piece -> [String] in
            var rest = Substring(piece), out: [String] = []
            while Format.columns(String(rest)) > width {
                var cut = rest.startIndex
                var used = 0
                while cut < rest.endIndex, used + Format.columns(String(rest[cut])) <= width {
                    used += Format.columns(String(rest[cut]))
                    cut = rest.index(after: cut)
                }
                out.append(String(rest[..<cut]))
                rest = Substring(indent) + rest[cut...]
            }
            out.append(String(rest))
            return out
        }
    }

    /// `↑ path  [#####.....] 45%  12.0 MiB of 26.7 MiB (1.0 MiB new)  3.1 MiB/s  5s left` (the bar only on a terminal;
    /// "new" for a file moving as chunks: the bytes of those the other end lacked).
    /// The line about the checks against the server's digests.
    func render(_ digest: DigestSummary, now: Int64) -> String {
        var line = "checked against the server: "
        if digest.unsupported {
            line += "the server offers no digests"
        } else if digest.matched {
            line += tint("the same", .green) + (digest.lastMatch.map { ", " + Format.ago($0, now: now) } ?? "")
        } else if let failure = digest.failure {
            line += tint(failure, .yellow)
        } else {
            line += "not yet at this position"
        }
        if digest.repaired > 0 {
            line += "; " + tint("repaired after a mismatch with the server: \(digest.repaired) path(s)", .red)
                + (digest.lastRepairAt.map { ", last \(Format.ago($0, now: now))" } ?? "")
        }
        return line
    }

    func render(_ transfer: TransferStatus) -> String {
        let arrow = transfer.direction == .upload ? "↑" : "↓"
        let fraction = transfer.total > 0 ? min(1, Double(transfer.done) / Double(transfer.total)) : 0
        var line = "\(arrow) \(transfer.path)  "
        if colour {
            let filled = Int((fraction * Double(barWidth)).rounded(.down))
            line += "[" + tint(String(repeating: "█", count: filled), .green) + String(repeating: "·", count: barWidth - filled) + "] "
        }
        line += "\(Int((fraction * 100).rounded(.down)))%  \(Format.bytes(transfer.done)) of \(Format.bytes(transfer.total))"
        // A file moving as chunks sends only what the other end lacks.
        if let new = transfer.newBytes { line += " (\(Format.bytes(new)) new)" }
        if let failed = transfer.failed {
            return line + "  " + tint("failed: \(failed)", .red) + " (sinkid retry)"
        }
        line += "  \(Format.bytes(Int64(transfer.rate)))/s"
        if let left = transfer.secondsLeft { line += "  \(Format.duration(left)) left" }
        return line
    }

    enum Hue: String {
        case green = "32", yellow = "33", red = "31"
    }

    func tint(_ text: String, _ hue: Hue) -> String {
        colour ? "\u{1B}[\(hue.rawValue)m\(text)\u{1B}[0m" : text
    }

    func paint(_ state: SyncState) -> String {
        switch state {
        case .upToDate: tint(state.words, .green)
        case .scanning, .syncing, .paused: tint(state.words, .yellow)
        case .stoppedForSafety, .error, .notRunning: tint(state.words, .red)
        }
    }
}

extension String {
    /// Padded with spaces to `width` characters.
    func padding(_ width: Int) -> String { count >= width ? self : self + String(repeating: " ", count: width - count) }
}
