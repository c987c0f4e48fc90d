import SinkiRecord
import SinkiSupport

/// What the history routes share: the store, the window, and how a path is checked against a token.
struct HistoryRoutes {
    let store: any VersionStore
    let limits: ServerLimits
    let retention: RetentionSettings

    /// A path the routes take: a record path by the path rules, or with `folder` also a root name alone.
    static func checkPath(_ path: String?, name: String = "path", folder: Bool = false) throws(Problem) -> String {
        guard let path, !path.isEmpty else { throw Problem(.badRequest, detail: "\(name) is missing", field: name) }
        if folder {
            try LookupRoute.checkPrefix(path)
            return path
        }
        do {
            return try RecordPath(validating: path).string
        } catch {
            throw Problem(.badPath, detail: "\(name): \(error.description)", field: name)
        }
    }

    /// A moment the history still covers: not before the window (`410 history-gone`).
    func checkMoment(_ at: Int64, now: Int64 = Clock.now()) throws(Problem) {
        guard retention.historyDays > 0 else {
            throw Problem(.historyGone, detail: "this server keeps no history (--history-days 0)")
        }
        let oldest = now - retention.historyNanoseconds
        guard at >= oldest else {
            throw Problem(.historyGone, detail: "\(Clock.iso8601(at)) is before the \(retention.historySpoken) of history this server keeps "
                          + "(from \(Clock.iso8601(oldest)))", field: "at")
        }
    }

    /// `at` of a query: nanoseconds since the epoch.
    static func moment(_ request: Request) throws(Problem) -> Int64 {
        guard let text = try request.query("at"), !text.isEmpty else { throw Problem(.badRequest, detail: "at is missing", field: "at") }
        guard let at = Int64(text), at >= 0 else {
            throw Problem(.badRequest, detail: "at must be nanoseconds since the epoch, not \(quoted(text))", field: "at")
        }
        return at
    }
}

/// `GET /v1/history?path=PATH&before=VERSION&limit=N`: the versions of one path, newest first, without
/// content. A token narrowed to a prefix sees the history of the paths within it only: any other path
/// answers as one that never held a record.
struct HistoryRoute: Route {
    let history: HistoryRoutes

    func respond(to request: Request) throws -> Reply {
        let path = try HistoryRoutes.checkPath(try request.query("path"))
        let count = try request.integerQuery("limit", in: 1...history.limits.maxPageRecords, default: history.limits.defaultPageRecords)
        let before = try request.integerQuery("before", in: 1...Int.max, default: Int.max)
        guard request.identity.scope.covers(path) else {
            return .response(.json(VersionPage(path: path, versions: [], more: false).jsonBytes))
        }
        let list = try history.store.versions(user: request.identity.user, path: path, before: before == Int.max ? nil : Int64(before), limit: count)
        return .response(.json(VersionPage(path: path, versions: list.versions, more: list.more).jsonBytes))
    }
}

/// `GET /v1/history/version?path=PATH&version=N`: one version with its content (inline data, or the
/// asset and its manifest: `GET /v1/assets/ID` serves a kept version's manifest as a current one's).
struct VersionRoute: Route {
    let history: HistoryRoutes

    func respond(to request: Request) throws -> Reply {
        let path = try HistoryRoutes.checkPath(try request.query("path"))
        let version = try request.integerQuery("version", in: 1...Int.max, default: 0)
        guard version > 0 else { throw Problem(.badRequest, detail: "version is missing", field: "version") }
        guard request.identity.scope.covers(path),
              let entry = try history.store.version(user: request.identity.user, path: path, version: Int64(version)) else {
            throw Problem(.notFound, detail: "\(quoted(path)) has no version \(version) (it may have expired)")
        }
        return .response(.json(entry.jsonBytes))
    }
}

/// `GET /v1/history/folder?path=FOLDER&at=NS&after=PATH&limit=N`: every path at or below FOLDER with
/// the version it held at the moment `at`, in bytewise path order, without content; narrowed to a
/// token's prefix like a look-up.
struct FolderAtRoute: Route {
    let history: HistoryRoutes

    func respond(to request: Request) throws -> Reply {
        let folder = try HistoryRoutes.checkPath(try request.query("path"), folder: true)
        let at = try HistoryRoutes.moment(request)
        try history.checkMoment(at)
        var after = try request.query("after")
        if after?.isEmpty == true { after = nil }
        let count = try request.integerQuery("limit", in: 1...history.limits.maxPageRecords, default: history.limits.defaultPageRecords)
        let list: VersionList
        switch ScopedPrefix.narrow(asked: folder, scope: request.scopePrefix) {
        case .disjoint: list = VersionList(versions: [], more: false)
        case let .within(narrowed):
            list = try history.store.folder(user: request.identity.user, prefix: narrowed ?? folder, at: at, after: after, limit: count)
        }
        return .response(.json(VersionPage(path: folder, versions: list.versions, more: list.more, at: at).jsonBytes))
    }
}

/// `POST /v1/history/restore`: a version made current again, or a folder brought back to a moment, as
/// new versions saved by the requesting device in one transaction (docs/protocol.md, "History"). A
/// read-only token may not; a narrowed one only within its prefix.
struct RestoreRoute: Route {
    let history: HistoryRoutes
    let hub: WaiterHub

    func begin(_ request: Request) throws -> BodyPolicy { try request.writableJSON(limit: 1 << 20) }

    func respond(to request: Request) throws -> Reply {
        let restore = try request.decodeBody(RestoreRequest.parse)
        let scope = request.identity.scope
        var paths: [(String, String)] = []
        switch restore.target {
        case let .version(path, _, to):
            paths.append(("path", try HistoryRoutes.checkPath(path)))
            if let to { paths.append(("to", try HistoryRoutes.checkPath(to, name: "to"))) }
        case let .folder(folder, at):
            paths.append(("path", try HistoryRoutes.checkPath(folder, folder: true)))
            try history.checkMoment(at)
        }
        for (field, path) in paths where !scope.covers(path) {
            throw Problem(.beyondScope, detail: "\(quoted(path)) is outside the token's prefix \(scope.prefix ?? "")/", field: field)
        }
        let user = request.identity.user
        let changes: [RestoreChange]
        do {
            changes = try history.store.restore(user: user, restore, device: request.identity.device)
        } catch let .noSuchVersion(path, version) as RestoreError {
            throw Problem(.notFound, detail: "\(quoted(path)) has no version \(version) (it may have expired)")
        } catch let .deletedVersion(path, version) as RestoreError {
            throw Problem(.deletedVersion, detail: "version \(version) of \(quoted(path)) is its delete; restore it in place to delete the path again",
                          field: "to")
        } catch let full as StorageFull {
            throw full.problem
        }
        if !restore.dryRun && !changes.isEmpty { hub.notify(user: user) }
        return .response(.json(RestoreResponse(changes: changes, dryRun: restore.dryRun).jsonBytes))
    }
}
