import SinkiRecord
import SinkiState
import SinkiSupport

extension Agent {
    /// Applies remote records: a feed page with its token, or changes not applied before (`retrying`,
    /// no token). Content that is not inline is fetched first; a record whose content cannot be had is
    /// kept as not applied with why, like any record that fails to apply, so the token may move past it.
    func applyRemote(_ records: [Record], token: String?, retrying: Bool = false) async throws {
        guard let replica, let client else { return }
        var records = records
        for index in try await replica.missingContent(records) {
            // The server's current record: when it is newer than the one here, it supersedes it.
            if let full = try await client.record(at: records[index].path), full.changeTag >= records[index].changeTag {
                records[index] = full
            }
        }
        let fetched = try await fetchAssets(records, retrying: retrying)
        let report: ApplyReport
        do {
            report = try await replica.apply(records, token: token, unavailable: fetched.failed)
        } catch {
            await releaseDownloads(fetched)
            throw error
        }
        await releaseDownloads(fetched)
        try await noteApplied(report)
        if !report.notApplied.isEmpty { scheduleRetry() }
        // An apply can queue local changes of its own (a delete that follows a rename, a folder kept,
        // a conflict copy): a retry or a verify has no pull loop behind it to send them.
        pumpPush()
    }

    /// Keeps remote versions whose content could not be fetched as not applied (a push's conflicts).
    func holdNotApplied(_ records: [Record], _ failures: [String: ApplyFailure]) async throws {
        guard let replica, !failures.isEmpty else { return }
        try await replica.keepNotApplied(records.filter { failures[$0.path] != nil }, failures)
        scheduleRetry()
    }
}
