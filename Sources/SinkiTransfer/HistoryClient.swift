import SinkiRecord

/// The history routes of docs/protocol.md ("History") over the same client and token as the sync.
extension SyncClient {
    /// One page of the versions of `path`, newest first, below version `before` when given.
    public func versions(of path: String, before: Int64?, limit: Int = 1000, isolation: isolated (any Actor)? = #isolation) async throws(SyncError) -> VersionPage {
        var query = Routes.history + "?limit=\(limit)&path=" + Self.escape(path)
        if let before { query += "&before=\(before)" }
        let response = try await send(request("GET", query, timeout: 300), isolation: isolation)
        return try await parse(response, isolation: isolation) { try VersionPage.parse($0) }
    }

    /// Version `version` of `path` with its content.
    public func version(_ version: Int64, of path: String, isolation: isolated (any Actor)? = #isolation) async throws(SyncError) -> VersionEntry {
        let query = Routes.historyVersion + "?version=\(version)&path=" + Self.escape(path)
        let response = try await send(request("GET", query, timeout: 300), isolation: isolation)
        return try await parse(response, isolation: isolation) { try VersionEntry.parse($0) }
    }

    /// One page of what `folder` held at `at` (nanoseconds since the epoch), in path order after `after`.
    public func folder(_ folder: String, at: Int64, after: String?, limit: Int = 1000,
                       isolation: isolated (any Actor)? = #isolation) async throws(SyncError) -> VersionPage {
        var query = Routes.historyFolder + "?limit=\(limit)&at=\(at)&path=" + Self.escape(folder)
        if let after { query += "&after=" + Self.escape(after) }
        let response = try await send(request("GET", query, timeout: 300), isolation: isolation)
        return try await parse(response, isolation: isolation) { try VersionPage.parse($0) }
    }

    /// A restore (or its dry run).
    public func restore(_ restore: RestoreRequest, isolation: isolated (any Actor)? = #isolation) async throws(SyncError) -> RestoreResponse {
        var request = request("POST", Routes.restore, timeout: 600)
        request.headers.append(("Content-Type", "application/json"))
        request.body = .bytes(restore.jsonBytes)
        let response = try await send(request, isolation: isolation)
        return try await parse(response, isolation: isolation) { try RestoreResponse.parse($0) }
    }

    /// Bytes `first` to `first + length - 1` of an asset (`GET /v1/assets/ID` with `Range`), at most
    /// `length` of them in memory.
    public func assetRange(_ id: String, first: Int64, length: Int64, isolation: isolated (any Actor)? = #isolation) async throws(SyncError) -> [UInt8] {
        var request = request("GET", Routes.assets + id, timeout: 300)
        request.headers = [("Accept", "application/octet-stream"), ("Range", "bytes=\(first)-\(first + length - 1)")]
        let response: HTTPResponse
        do { response = try await http.send(request, sink: .memory(limit: Int(length) + 1024), isolation: isolation) } catch { throw .transport(error) }
        guard (200..<300).contains(response.status) else { throw Self.failure(response, url: request.url) }
        guard response.status == 206 || first == 0 else { throw .badResponse("the server ignored the range of asset \(id)") }
        return Array(response.body.prefix(Int(length)))
    }
}
